"""The trainer on 2 CPU ranks (gloo), started by the train job's own launcher (scheduling/ranks.py).

The same script as the multi-GPU test (tests/gpu/ds_ranks.py) runs `trainer.train` on a tiny
model: float32 REINFORCE, CISPO and GRPO with a KL term and recomputed old log-probs (ZeRO-2), uninterrupted and interrupted after every optimizer
step (one rank's stop request: the ranks agree, save a ZeRO checkpoint, resume), and bf16 with
gradient checkpointing. Asserted: both ranks end with identical results and bit-identical weights;
an interrupted run ends bit for bit where the uninterrupted one does (CPU arithmetic is
deterministic); 2 ranks train like 1 rank on the same data (same loss to 1e-4, weights within
AdamW's step bound, 99.9 % within 1e-5: the gradient sums differ in order only); each optimizer step's
report (backends/train_steps.py) is the same on both ranks and equals 1 rank's (loss, tokens, entropy,
DeepSpeed's global gradient norm), a resumed run's steps those of the uninterrupted one. With train.optimizer = "carry" (`--carry`) two rounds
end bit for bit where one uninterrupted call over both does, a round stopped and resumed too.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import pytest

GPU_TESTS = Path(__file__).resolve().parents[1] / "gpu"
sys.path.insert(0, str(GPU_TESTS))
from ds_ranks import LR, close_weights, launch_ds_ranks, weights  # noqa: E402

from sgsbatch.run.checkpoint import is_complete  # noqa: E402


def reports(work: Path, world: int) -> dict[str, Any]:
    reps = [json.loads((work / "ranks" / f"rank{r}.json").read_text()) for r in range(world)]
    assert [r["rank"] for r in reps] == list(range(world)) and all(r["world"] == world for r in reps)
    for name in reps[0]["runs"]:
        runs = [r["runs"][name] for r in reps]
        assert all(x["result"] == runs[0]["result"] for x in runs), f"{name}: ranks disagree on the result"
        assert all(x["digest"] == runs[0]["digest"] for x in runs), f"{name}: ranks hold different weights"
        assert all(x["steps"] == runs[0]["steps"] for x in runs), f"{name}: ranks disagree on a step's statistics"
    return reps[0]


@pytest.fixture
def model_dir(rank_model_dir: Path) -> Path:
    return rank_model_dir


def test_two_cpu_ranks_train_like_one_and_resume_bit_for_bit(model_dir: Path, tmp_path: Path) -> None:
    two, one = tmp_path / "two", tmp_path / "one"
    assert launch_ds_ranks(2, model_dir, two) == 0, (two / "ranks.log").read_text()[-6000:]
    assert launch_ds_ranks(1, model_dir, one, "--plain-only") == 0, (one / "ranks.log").read_text()[-6000:]
    rep2, rep1 = reports(two, 2), reports(one, 1)
    start = weights(model_dir)
    for name, run in rep2["runs"].items():
        res = run["result"]
        assert res["steps"] == 2 and res["sequences"] == 7 and math.isfinite(res["mean_loss"]), (name, res)
        assert is_complete(two / name) and not list((two / f"state-{name}").glob("step*"))
        saved = weights(two / name)
        assert any(not (saved[k] == start[k]).all() for k in start), f"{name}: the weights did not change"
    bound = 2 * LR * 2 + 1e-6  # two AdamW steps
    for objective in ("reinforce", "cispo", "grpo-kl"):
        plain, resumed = rep2["runs"][f"fp32-{objective}-plain"], rep2["runs"][f"fp32-{objective}-resumed"]
        assert resumed["interruptions"] == plain["result"]["steps"] - 1
        assert resumed["result"] == plain["result"] and resumed["digest"] == plain["digest"], objective
        ref = rep1["runs"][f"fp32-{objective}-plain"]
        assert math.isclose(plain["result"]["mean_loss"], ref["result"]["mean_loss"], rel_tol=1e-4)
        close_weights(weights(two / f"fp32-{objective}-plain"), weights(one / f"fp32-{objective}-plain"), bound,
                      f"{objective}: 2 ranks vs 1")
        # each step's statistics are global: the gradient norm (DeepSpeed's, ZeRO-2) and the rest as on 1 rank
        assert resumed["steps"] == plain["steps"] and len(plain["steps"]) == 2, objective
        for s2, s1 in zip(plain["steps"], ref["steps"], strict=True):
            assert (s2["tokens"], s2["sequences"], s2["lr"]) == (s1["tokens"], s1["sequences"], s1["lr"]), objective
            for key in ("loss", "grad_norm", "entropy"):
                assert math.isclose(s2[key], s1[key], rel_tol=1e-4), (objective, key, s2[key], s1[key])
            assert s2["grad_norm"] > 0 and (s2["clip_fraction"] is None) == (objective == "reinforce"), objective
            assert (s2["ref_kl"] is None) == (objective != "grpo-kl"), objective  # only with a KL term
            if s2["ref_kl"] is not None:
                assert math.isclose(s2["ref_kl"], s1["ref_kl"], rel_tol=1e-4, abs_tol=1e-9), objective
    bf16 = rep2["runs"]["bf16-reinforce-plain"]["steps"]  # ZeRO-2's bf16 path records the norm too
    assert len(bf16) == 2 and all(math.isfinite(s["grad_norm"]) and s["grad_norm"] > 0 and s["lr"] == LR for s in bf16)


def test_two_cpu_ranks_carry_the_optimizer_state_across_rounds(model_dir: Path, tmp_path: Path) -> None:
    """train.optimizer = "carry" on 2 ranks (ZeRO-2: each rank saves and loads its partition of the moments into
    one published state): round 0 then round 1 end bitwise where one uninterrupted call over both rounds'
    steps does, also when round 1 is stopped after its first step and resumed; a fresh AdamW does not."""
    work = tmp_path / "carry"
    assert launch_ds_ranks(2, model_dir, work, "--carry") == 0, (work / "ranks.log").read_text()[-6000:]
    reps = [json.loads((work / "ranks" / f"rank{r}.json").read_text()) for r in range(2)]
    assert reps[0]["digests"] == reps[1]["digests"] and reps[0]["world"] == 2
    assert all(r["interrupted"] for r in reps)  # round 1 (2 steps) was stopped after its first
    d = reps[0]["digests"]
    assert d["round1"] == d["joint"] == d["round1-resumed"] != d["round1-fresh"]
    assert d["round0"] != d["joint"]
    state = work / "opt" / "r0000"
    assert is_complete(state) and len(list(state.glob("state/zero_pp_rank_*optim_states.pt"))) == 2

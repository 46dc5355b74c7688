"""Held-out evaluation's pure parts and its config: the unbiased pass@k estimator (logic/evaluation.py) against
worked values, and `[eval]` (config/schema.EvalConfig, config/validation._eval_errors, the paths of
eval.sets). Not covered here: sampling and verifying a stored round (tests/integration/test_eval.py)."""

from __future__ import annotations

import math
from itertools import combinations
from pathlib import Path

import pytest

from sgsbatch.config.loading import load_config
from sgsbatch.config.schema import Config
from sgsbatch.errors import ConfigError
from sgsbatch.logic.evaluation import correct_counts, pass_at_k, set_pass_at_k

TINY = Path(__file__).resolve().parents[2] / "jobs" / "tiny.toml"


def _by_enumeration(n: int, c: int, k: int) -> float:
    """pass@k by definition: the share of the C(n, k) draws of k samples that hold a correct one."""
    draws = list(combinations([True] * c + [False] * (n - c), k))
    return sum(any(d) for d in draws) / len(draws)


def test_pass_at_k_worked_values() -> None:
    assert pass_at_k(8, 0, 1) == 0.0 and pass_at_k(8, 0, 8) == 0.0
    assert pass_at_k(8, 2, 1) == pytest.approx(0.25)  # c / n
    assert pass_at_k(4, 1, 2) == pytest.approx(0.5)  # 1 - C(3,2)/C(4,2) = 1 - 3/6
    assert pass_at_k(5, 2, 2) == pytest.approx(0.7)  # 1 - C(3,2)/C(5,2) = 1 - 3/10
    assert pass_at_k(8, 1, 8) == 1.0  # n - c < k: every draw holds the correct one
    assert pass_at_k(10, 3, 8) == 1.0
    for n, c, k in [(6, 2, 3), (7, 3, 2), (9, 1, 4), (5, 5, 1), (6, 0, 2)]:
        assert pass_at_k(n, c, k) == pytest.approx(_by_enumeration(n, c, k)), (n, c, k)


def test_pass_at_k_is_stable_for_large_n() -> None:
    """No factorials: n = 10,000 samples stays finite and matches the closed form in logs."""
    got = pass_at_k(10_000, 3, 100)
    want = 1 - math.exp(math.lgamma(9998) - math.lgamma(9898) - math.lgamma(10_001) + math.lgamma(9901))
    assert math.isfinite(got) and got == pytest.approx(want, rel=1e-9)


def test_pass_at_k_refuses_impossible_inputs() -> None:
    with pytest.raises(ValueError, match="k must be within"):
        pass_at_k(4, 1, 5)
    with pytest.raises(ValueError, match="k must be within"):
        pass_at_k(4, 1, 0)
    with pytest.raises(ValueError, match="correct samples"):
        pass_at_k(4, 5, 1)


def test_a_sets_pass_at_k_is_the_mean_over_its_problems() -> None:
    verdicts = {"b": ["verified", "failed", "failed", "failed"], "a": ["failed"] * 4,
                "c": ["verified", "verified", "timeout", "unextracted"]}
    counts = correct_counts(verdicts)
    assert counts == [(4, 0), (4, 1), (4, 2)]  # in id order
    got = set_pass_at_k(counts, [1, 2, 4])
    assert got[1] == pytest.approx((0 + 0.25 + 0.5) / 3)
    assert got[2] == pytest.approx((0 + 0.5 + (1 - 1 / 6)) / 3)
    assert got[4] == pytest.approx(2 / 3)
    assert set_pass_at_k([], [1]) == {1: 0.0}


def test_eval_is_off_by_default_and_a_tiny_config_does_not_change() -> None:
    e = Config().eval
    assert (e.every_rounds, e.sets, e.samples, e.pass_k, e.split) == (0, {}, 8, (1, 8), "test")
    assert load_config(TINY).eval == e


def test_eval_sets_resolve_like_data_source(tmp_path: Path) -> None:
    held = tmp_path / "held.jsonl"
    jobs = tmp_path / "jobs.toml"
    jobs.write_text(f'inherit = "{TINY}"\n[eval]\nsets = {{mini = "./held.jsonl", hub = "org/minif2f"}}\n'
                    'splits = {hub = "valid"}\nsamples = 4\npass_k = [1, 4]\n')
    cfg = load_config(jobs)
    assert cfg.eval.sets == {"mini": str(held.resolve()), "hub": "org/minif2f"}
    assert cfg.eval.splits == {"hub": "valid"} and cfg.eval.pass_k == (1, 4)
    over = load_config(TINY, ["eval.sets.other=./x.jsonl"], cwd=tmp_path)
    assert over.eval.sets == {"other": str((tmp_path / "x.jsonl").resolve())}


@pytest.mark.parametrize(("sets", "key", "says"), [
    (["eval.samples=4", "eval.pass_k=[1, 8]"], "eval.pass_k[1]", "must be within [1, eval.samples = 4]"),
    (["eval.pass_k=[0]"], "eval.pass_k[0]", "must be within [1, eval.samples = 8]"),
    (["eval.pass_k=[]"], "eval.pass_k", "at least one k"),
    (["eval.pass_k=[1, 1]"], "eval.pass_k", "lists a k twice"),
    (["eval.samples=0"], "eval.samples", "must be >= 1"),
    (["eval.every_rounds=-1"], "eval.every_rounds", "must be >= 0"),
    (["eval.every_rounds=2"], "eval.every_rounds", "eval.sets is empty"),
    (["eval.limit=-3"], "eval.limit", "must be >= 0"),
    (['eval.sets={a = "x.jsonl"}', "eval.every_rounds=1", "solver.mode=search"],
     "eval.every_rounds", "not built for tactic-level search"),
    (['eval.sets={"a b" = "x.jsonl"}'], "eval.sets.a b", "letters, digits"),
    (['eval.sets={a = ""}'], "eval.sets.a", "must name a source"),
    (['eval.sets={a = "x.jsonl"}', 'eval.splits={b = "valid"}'], "eval.splits.b", "names no evaluation set"),
])
def test_bad_eval_keys_are_refused_naming_the_key(sets: list[str], key: str, says: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(TINY, sets)
    assert err.value.key == key and says in err.value.message, (err.value.key, err.value.message)


def test_plan_counts_the_evaluation_jobs_beside_the_chain(tmp_path: Path) -> None:
    """`plan`: run.rounds // every_rounds jobs of slurm.solve's resources, each model load + generation at the
    decode rate + one REPL start + Lean on the job's CPUs; the run's days unchanged; a hub set not counted."""
    from sgsbatch.views.plan import make_plan, plan_text
    from sgsbatch.views.projection import decode_tokens_per_s

    held = tmp_path / "held.jsonl"
    held.write_text((Path(__file__).resolve().parents[2] / "sgsbatch" / "embedded" / "tiny_targets.jsonl")
                    .read_text().splitlines()[0] + "\n" + "\n".join(
                        f'{{"id": "p{i}", "header": "", "theorem": "theorem p{i} : 1 = 1 := by"}}' for i in range(9)) + "\n")
    sgs = TINY.parent / "sgs.toml"
    base = make_plan(load_config(sgs))
    assert base.projection.eval is None and base.to_json()["eval"] is None
    cfg = load_config(sgs, ["run.rounds=20", "eval.every_rounds=5", f"eval.sets.mini={held}", "eval.sets.hub=org/f2f"])
    p = make_plan(cfg)
    ev = p.projection.eval
    assert ev is not None and (ev.evaluations, ev.problems, ev.samples, ev.uncounted) == (4, 10, 80, ("hub",))
    f, res = p.projection.figures, cfg.slurm.solve
    want = (f["model_load_s"] + 80 * cfg.projection.mean_tokens / (res.gpus * decode_tokens_per_s(cfg, f))
            + f["repl_start_s"] + 80 / (res.cpus * f["lean_proofs_per_s"]))
    assert ev.job_s == pytest.approx(want)
    assert ev.gpu_hours == pytest.approx(4 * res.gpus * want / 3600) and ev.cpu_hours == pytest.approx(4 * res.cpus * want / 3600)
    assert p.projection.run_days == pytest.approx(make_plan(load_config(sgs, ["run.rounds=20"])).projection.run_days)
    text = plan_text(p)
    assert "held-out evaluation (eval.every_rounds = 5): 4 jobs beside the chain" in text and "not counted" in text
    limited = make_plan(load_config(sgs, ["eval.every_rounds=5", "eval.sets.hub=org/f2f", "eval.limit=3"])).projection.eval
    assert limited is not None and (limited.problems, limited.uncounted) == (3, ())

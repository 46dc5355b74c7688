"""One rank of the multi-GPU training test (tests/gpu/test_deepspeed_multi.py); not a test module.

Launched the way the train job starts its ranks (`launch_ds_ranks`: scheduling/ranks.launch, one
process per rank with RANK / WORLD_SIZE / MASTER_PORT; on CPU the ranks use gloo), it calls
the real trainer (`sgsbatch.backends.trainer.train`) on a tiny model, for each case:

- `<case>-plain`: one uninterrupted training call;
- `<case>-resumed` (unless --plain-only): the same call, where the last rank's `should_stop()` says
  yes after every optimizer step (the ranks must agree to stop, save a ZeRO checkpoint and raise
  TrainingInterrupted), called again until it finishes.

Cases: `fp32-reinforce`, `fp32-cispo` and `fp32-grpo-kl` (GRPO with a KL term to the starting weights and
recomputed old log-probs; float32, ZeRO-2), `bf16-reinforce` (what jobs/sgs.toml
trains with: bf16, gradient checkpointing, ZeRO-2; plain only). Each rank writes
`<out>/rank<R>.json`: its rank, world size, device, and per run the TrainResult, the number of
interruptions and a sha256 of the weights its engine holds at the end (every rank holds all of
them under ZeRO-2), so the test can check that the ranks agree bit for bit.

    python tests/gpu/ds_ranks.py MODEL_DIR WORK_DIR [--plain-only]   (or launch_ds_ranks(G, ...))

With `--carry` it instead trains fp32 CISPO (ZeRO-2) over two rounds with the optimizer state carried
(train.optimizer = "carry": `round0`, then `round1`, and `round1-resumed` stopped after its first step and
resumed), and `joint`, one uninterrupted call over both rounds' steps; `<out>/rank<R>.json` holds each run's
weights digest.

With `--fault RANK:STEP:MODE` (mode hang | kill9) it instead trains one case (fp32 REINFORCE, one
sequence per optimizer step) with `collective_timeout_s = --collective-timeout-s`, and rank RANK
hangs or dies right after optimizer step STEP; a rank that finishes writes `<out>/rank<R>.json`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from sgsbatch.backends.generation import chat_prompt_ids  # noqa: E402
from sgsbatch.backends.trainer import Example, TrainingInterrupted, TrainSettings, train  # noqa: E402

LR = 1e-3
PROOFS = ["nlinarith [sq_nonneg (x - y), sq_nonneg (x + y)]", "omega", "norm_num", "simp", "positivity",
          "linarith", "decide"]
CASES: dict[str, dict[str, Any]] = {
    "fp32-reinforce": {"objective": "reinforce"},
    "fp32-cispo": {"objective": "cispo"},
    # the KL to a reference (the starting weights: one scoring pass also gives pi_old) and recomputed pi_old
    "fp32-grpo-kl": {"objective": "grpo", "kl_beta": 0.1, "old_logprobs": "recompute"},
    "bf16-reinforce": {"objective": "reinforce", "bf16": True, "gradient_checkpointing": True},
}


def examples(model_dir: Path) -> list[Example]:
    """7 examples (steps of 4 and 3 at batch size 4, so one rank runs a dummy micro-batch);
    CISPO groups of 2 with mixed-sign advantages and made-up sampler logprobs."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(model_dir))
    out = []
    for i, proof in enumerate(PROOFS):
        prompt = chat_prompt_ids(tok, [{"role": "user", "content": f"Prove: theorem t{i} (x y : ℝ) : x ≤ x := by"}])
        completion = [int(t) for t in tok(proof, add_special_tokens=False)["input_ids"]] + [int(tok.eos_token_id)]
        out.append(Example(prompt, completion, weight=(1.0 if i % 2 == 0 else -0.5), group=i // 2,
                           sampler_logprobs=[-2.0 - 0.1 * t for t in range(len(completion))]))
    return out


def launch_ds_ranks(ranks: int, model_dir: Path, work: Path, *extra: str, env: dict[str, str] | None = None) -> int:
    """Run this script on `ranks` ranks with the train job's launcher; 0 when every rank exited 0.
    Their output goes to `work/ranks.log`."""
    from sgsbatch.scheduling.ranks import launch, layout_from_env

    work.mkdir(parents=True, exist_ok=True)
    saved = dict(os.environ)
    os.environ.update(env or {})
    try:
        with (work / "ranks.log").open("wb") as log:
            codes = launch([sys.executable, str(Path(__file__).resolve()), str(model_dir), str(work), *extra],
                           layout_from_env(os.environ, 1, ranks), 1, lambda: False, stdout=log)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return max(abs(c) for c in codes)


def weights(d: Path) -> dict[str, Any]:
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(d), dtype=torch.float32)
    return {k: v.detach().clone() for k, v in model.named_parameters()}


def close_weights(a: dict[str, Any], b: dict[str, Any], bound: float, what: str) -> None:
    """All entries within `bound` (AdamW's step bound) and 99.9 % within 1e-5."""
    total = near = 0
    worst = 0.0
    for k in a:
        d = (a[k] - b[k]).abs()
        worst = max(worst, float(d.max()))
        total += d.numel()
        near += int((d <= 1e-5).sum())
    assert worst <= bound, f"{what}: a weight differs by {worst:.3g} > {bound:.3g}"
    assert near >= 0.999 * total, f"{what}: only {near}/{total} weights within 1e-5"


def digest(named: Iterable[tuple[str, Any]]) -> str:
    """sha256 of (name, float32 bytes) of every parameter, in order."""
    h = hashlib.sha256()
    for name, p in named:
        h.update(name.encode())
        h.update(p.detach().float().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("model_dir", type=Path)
    ap.add_argument("work_dir", type=Path)
    ap.add_argument("--plain-only", action="store_true")
    ap.add_argument("--fault", default="")
    ap.add_argument("--carry", action="store_true")
    ap.add_argument("--collective-timeout-s", type=float, default=None)
    args = ap.parse_args()
    if args.fault:
        fault_main(args)
        return
    if args.carry:
        carry_main(args)
        return

    import torch

    if not torch.cuda.is_available():
        os.environ.setdefault("DS_ACCELERATOR", "cpu")  # as the trainer does (a CPU dry run of this script)
    import deepspeed
    import torch.distributed as dist

    engines: list[Any] = []
    real_initialize = deepspeed.initialize

    def capture(*a: Any, **kw: Any) -> Any:  # the trainer's own engine, to read its weights afterwards
        result = real_initialize(*a, **kw)
        engines.append(result[0])
        return result

    deepspeed.initialize = capture
    exs = examples(args.model_dir)
    report: dict[str, Any] = {"runs": {}}
    for case, kw in CASES.items():
        ref = {"kl_reference": str(args.model_dir)} if kw.get("kl_beta") else {}
        settings = TrainSettings(lr=LR, batch_size=4, micro_batch_size=1, zero_stage=2, seed=1, **kw, **ref)
        modes = ["plain"] if args.plain_only or case.startswith("bf16") else ["plain", "resumed"]
        for mode in modes:
            name = f"{case}-{mode}"
            interruptions = 0
            # the launcher's rank (the launcher sets RANK/WORLD_SIZE; a plain launch is rank 0 of 1)
            rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
            stop = mode == "resumed" and rank == world - 1

            def should_stop(stop: bool = stop) -> bool:
                return stop

            steps: list[dict[str, Any]] = []  # each optimizer step's TrainStep, less this rank's own wall time

            def on_step(step: Any, steps: list[dict[str, Any]] = steps) -> None:
                steps.append({k: v for k, v in step.__dict__.items() if k != "step_s"})

            while True:
                try:
                    res = train(args.model_dir, args.work_dir / name, exs, settings,
                                state_dir=args.work_dir / f"state-{name}", should_stop=should_stop, on_step=on_step)
                    break
                except TrainingInterrupted:
                    interruptions += 1
                    if interruptions > 10:
                        raise
            engine = engines[-1]
            report["runs"][name] = {"result": res.__dict__, "interruptions": interruptions, "steps": steps,
                                    "digest": digest(engine.module.named_parameters()), "device": str(engine.device)}
    rank, world = dist.get_rank(), dist.get_world_size()
    report.update(rank=rank, world=world, local_rank=int(os.environ.get("LOCAL_RANK", "0")),
                  cuda_device=torch.cuda.current_device() if torch.cuda.is_available() else None)
    out = args.work_dir / "ranks"
    out.mkdir(parents=True, exist_ok=True)
    (out / f"rank{rank}.json").write_text(json.dumps(report, indent=1) + "\n")
    dist.barrier()
    dist.destroy_process_group()


def carry_main(args: argparse.Namespace) -> None:
    """Two rounds with the optimizer state carried vs one uninterrupted call (`--carry`)."""
    import torch
    import torch.distributed as dist

    from sgsbatch.backends.batches import plan_steps

    exs = examples(args.model_dir)
    a, b = exs[:4], exs[4:]  # groups 0-1, groups 2-3: two optimizer steps each (a group a step)

    def settings(seed: int) -> TrainSettings:
        return TrainSettings(lr=LR, batch_size=2, micro_batch_size=1, zero_stage=2, seed=seed, objective="cispo")

    want = plan_steps(a, settings(1)) + [[4 + i for i in s] for s in plan_steps(b, settings(2))]
    joint_seed = next(s for s in range(10_000) if plan_steps(exs, settings(s)) == want)
    rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    w, digests = args.work_dir, {}
    train(args.model_dir, w / "joint", exs, settings(joint_seed), state_dir=w / "s-joint")
    train(args.model_dir, w / "round0", a, settings(1), state_dir=w / "s0", optimizer_out=w / "opt" / "r0000")
    train(w / "round0", w / "round1", b, settings(2), state_dir=w / "s1", optimizer_in=w / "opt" / "r0000",
          optimizer_out=w / "opt" / "r0001")
    interrupted = False
    try:  # the last rank asks to stop after the first step: the ranks agree, save, raise
        train(w / "round0", w / "round1-resumed", b, settings(2), state_dir=w / "s1r", optimizer_in=w / "opt" / "r0000",
              should_stop=lambda: rank == world - 1)
    except TrainingInterrupted:
        interrupted = True
        train(w / "round0", w / "round1-resumed", b, settings(2), state_dir=w / "s1r",
              optimizer_in=w / "opt" / "r0000")
    train(w / "round0", w / "round1-fresh", b, settings(2), state_dir=w / "s1f")
    from transformers import AutoModelForCausalLM

    for name in ("joint", "round0", "round1", "round1-resumed", "round1-fresh"):
        model = AutoModelForCausalLM.from_pretrained(str(w / name), dtype=torch.float32)
        digests[name] = digest(model.named_parameters())
    out = w / "ranks"
    out.mkdir(parents=True, exist_ok=True)
    (out / f"rank{rank}.json").write_text(json.dumps({"rank": rank, "world": world, "digests": digests,
                                                            "interrupted": interrupted}) + "\n")
    dist.barrier()
    dist.destroy_process_group()


def fault_main(args: argparse.Namespace) -> None:
    """One training in which rank RANK hangs or dies after optimizer step STEP (`--fault`)."""
    f_rank, f_step, mode = args.fault.split(":")
    rank = int(os.environ.get("RANK", "0"))

    def on_step(step: Any) -> None:
        if rank == int(f_rank) and step.step == int(f_step):
            print(f"rank {rank}: injected {mode} after optimizer step {step.step}", flush=True)
            if mode == "kill9":
                os.kill(os.getpid(), signal.SIGKILL)
            time.sleep(10**6)

    settings = TrainSettings(lr=LR, batch_size=1, micro_batch_size=1, zero_stage=2, seed=1)
    res = train(args.model_dir, args.work_dir / "fault", examples(args.model_dir), settings,
                state_dir=args.work_dir / "state-fault", on_step=on_step,
                collective_timeout_s=args.collective_timeout_s)
    out = args.work_dir / "ranks"
    out.mkdir(parents=True, exist_ok=True)
    (out / f"rank{rank}.json").write_text(json.dumps({"rank": rank, "result": res.__dict__}) + "\n")


if __name__ == "__main__":
    main()

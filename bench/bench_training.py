"""Training throughput on CPU ranks: the train phase's trainer against a plain DeepSpeed loop.

One tiny-random Llama (built offline; `--hidden`, `--layers`), `--examples` made-up sequences
(prompt `--prompt-tokens`, completion drawn from [completion/4, completion] tokens, so ranks get
uneven work), REINFORCE, batch `--batch` sequences per optimizer step, ZeRO-2, float32. Measured
in one run for 1 and for 2 ranks (gloo, started by the train job's launcher, scheduling/ranks.py):
  (a) floor: a plain DeepSpeed loop on the same engine settings: per step, each rank takes every
      world-th sequence of the step, forward + backward + `engine.step()` per sequence, no
      checkpointing, no logging, no loss bookkeeping;
  (b) sgsbatch: `backends.trainer.train` (step plan, token-balanced shares, stop agreement after
      every step, export of the weights at the end).
Reported: trained tokens (prompt + completion) per second of each and (b)/(a) (target >= 0.9);
and, for 1 rank, the seconds from a SIGUSR2 (sent mid-step) to the committed checkpoint.

    .venv/bin/python bench/bench_training.py                  # defaults
    .venv/bin/python bench/bench_training.py --examples 32 --quick

Not covered: GPUs, bf16, gradient checkpointing (see tests/gpu and docs/development.md).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def examples(n: int, prompt: int, completion: int, vocab: int, seed: int = 0) -> list[Any]:
    from sgsbatch.backends.batches import Example

    rng = random.Random(seed)
    return [Example([rng.randrange(10, vocab) for _ in range(prompt)],
                    [rng.randrange(10, vocab) for _ in range(rng.randrange(completion // 4, completion + 1))], 1.0)
            for _ in range(n)]


def plain_loop(model_dir: Path, exs: list[Any], settings: Any) -> float:
    """The floor: seconds for one epoch of a bare DeepSpeed loop (this rank's part of each step)."""
    import deepspeed
    import torch
    import torch.distributed as dist
    from transformers import AutoModelForCausalLM

    from sgsbatch.backends.trainer import _ds_config, _init_distributed, plan_steps

    _init_distributed(False)
    rank, world = dist.get_rank(), dist.get_world_size()
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
    model.config.use_cache = False
    opt = torch.optim.AdamW(model.parameters(), lr=settings.lr, betas=settings.betas)
    engine, *_ = deepspeed.initialize(model=model, optimizer=opt, config=_ds_config(settings, world))
    dist.barrier()
    t0 = time.perf_counter()
    for step in plan_steps(exs, settings):
        mine = step[rank::world]
        n = max(len(step[r::world]) for r in range(world))
        for m in range(n):
            ex = exs[mine[m] if m < len(mine) else step[0]]
            ids = torch.tensor([ex.prompt_ids + ex.completion_ids])
            logits = engine.module(input_ids=ids, use_cache=False).logits[0, len(ex.prompt_ids) - 1 : -1]
            loss = torch.nn.functional.cross_entropy(logits, ids[0, len(ex.prompt_ids):])
            if m >= len(mine):
                loss = loss * 0.0
            engine.set_gradient_accumulation_boundary(m == n - 1)
            engine.backward(loss, scale_wrt_gas=False)
            engine.step()
    dist.barrier()
    return time.perf_counter() - t0


def vocab(model_dir: Path) -> int:
    from transformers import AutoConfig

    return int(AutoConfig.from_pretrained(str(model_dir)).vocab_size)


def rank_main(args: argparse.Namespace) -> None:
    import torch.distributed as dist

    from sgsbatch.backends.trainer import TrainSettings, train

    torch_threads = int(os.environ.get("OMP_NUM_THREADS", "1"))
    settings = TrainSettings(lr=1e-4, batch_size=args.batch, zero_stage=2, seed=1, threads=torch_threads)
    exs = examples(args.examples, args.prompt_tokens, args.completion_tokens, vocab(Path(args.model)))
    work = Path(args.work)
    floor = plain_loop(Path(args.model), exs, settings)
    t0 = time.perf_counter()
    train(Path(args.model), work / f"out-{os.environ['WORLD_SIZE']}", exs, settings,
          state_dir=work / f"state-{os.environ['WORLD_SIZE']}")
    ours = time.perf_counter() - t0
    if dist.get_rank() == 0:
        tokens = sum(len(e.prompt_ids) + len(e.completion_ids) for e in exs)
        (work / f"result-{dist.get_world_size()}.json").write_text(json.dumps(
            {"ranks": dist.get_world_size(), "tokens": tokens, "floor_s": floor, "sgsbatch_s": ours}))


def stop_latency(model_dir: Path, work: Path, args: argparse.Namespace) -> float:
    """Seconds from a SIGUSR2 (handled as the worker does: a flag) to the committed checkpoint."""
    from sgsbatch.backends.trainer import TrainingInterrupted, TrainSettings, train

    flag: dict[str, float] = {}
    signal.signal(signal.SIGUSR2, lambda *_: flag.setdefault("at", time.perf_counter()))
    exs = examples(args.examples, args.prompt_tokens, args.completion_tokens, vocab(model_dir))
    timer = threading.Timer(args.signal_after_s, lambda: os.kill(os.getpid(), signal.SIGUSR2))
    timer.start()
    try:
        train(model_dir, work / "out-stop", exs, TrainSettings(lr=1e-4, batch_size=args.batch, seed=1, threads=1),
              state_dir=work / "state-stop", should_stop=lambda: "at" in flag)
    except TrainingInterrupted:
        return time.perf_counter() - flag["at"]
    raise SystemExit("training ended before the signal: raise --examples or lower --signal-after-s")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--examples", type=int, default=64)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--prompt-tokens", type=int, default=96)
    ap.add_argument("--completion-tokens", type=int, default=256)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--signal-after-s", type=float, default=3.0)
    ap.add_argument("--quick", action="store_true", help="smaller model (hidden 128, 2 layers)")
    ap.add_argument("--rank", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--model", help=argparse.SUPPRESS)
    ap.add_argument("--work", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.rank:
        rank_main(args)
        return
    if args.quick:
        args.hidden, args.layers = 128, 2
    os.environ.setdefault("DS_ACCELERATOR", "cpu")
    from sgsbatch.models.tiny import build_tiny_random
    from sgsbatch.scheduling.ranks import launch, layout_from_env

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        model = work / "model"
        build_tiny_random(model, seed=0, corpus=[f"theorem t{i} : {i} + 0 = {i} := by simp" for i in range(64)],
                          hidden_size=args.hidden, num_layers=args.layers, num_heads=4, max_positions=1024)
        rows = []
        for ranks in (1, 2):
            argv = [sys.executable, str(Path(__file__).resolve()), "--rank", "--model", str(model), "--work",
                    str(work), *[f"--{k.replace('_', '-')}={v}" for k, v in vars(args).items()
                                 if k not in ("rank", "model", "work", "quick")]]
            threads = max(1, (os.cpu_count() or 1) // ranks)
            codes = launch(argv, layout_from_env({}, 1, ranks), threads, lambda: False)
            assert codes == [0] * ranks, f"ranks exited with {codes}"
            r = json.loads((work / f"result-{ranks}.json").read_text())
            r.update(floor_tok_s=r["tokens"] / r["floor_s"], sgsbatch_tok_s=r["tokens"] / r["sgsbatch_s"],
                     ratio=r["floor_s"] / r["sgsbatch_s"])
            rows.append(r)
        latency = stop_latency(model, work, args)
    print(json.dumps({"machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}",
                      "model": {"hidden": args.hidden, "layers": args.layers}, "examples": args.examples,
                      "batch": args.batch, "rows": rows, "sigusr2_to_checkpoint_s": latency}, indent=1))
    print("\n| ranks | floor tok/s | sgsbatch tok/s | sgsbatch / floor |\n| --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['ranks']} | {r['floor_tok_s']:.0f} | {r['sgsbatch_tok_s']:.0f} | {r['ratio']:.2f} |")
    print(f"\nSIGUSR2 to committed checkpoint (1 rank): {latency:.2f} s")


if __name__ == "__main__":
    main()

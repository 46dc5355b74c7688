"""What the KL to a reference policy and recomputed old log-probs cost the trainer, on CPU (issue 40).

One tiny-random Llama (`--hidden`, `--layers`), `--examples` made-up sequences in groups of 8 with
advantages +-1, GRPO, batch `--batch`, ZeRO-2, float32, one rank; each configuration in its own process
(its peak RSS is its own), timed whole by `backends.trainer.train`:
  none       solver.kl_beta = 0, train.old_logprobs = "sampler" (the baseline)
  recompute  old_logprobs = "recompute": one scoring pass with the policy before the first update
  kl         kl_beta = 0.04 against another directory (later rounds): the reference is loaded, scores
             every example once, and is freed before the policy loads (what the trainer does)
  kl+shared  kl_beta = 0.04 and recompute with the reference = the starting weights (round 0): one pass
  kl-held    as kl, with a second copy of the reference held for the whole call (what a lazy, per
             micro-batch reference would keep resident; the same forwards, so its time is kl's)
Reported: the CPU seconds of the `train` call (one thread: the wall clock of a shared machine is noise),
over the baseline, and the process's peak RSS.

    .venv/bin/python bench/bench_kl.py                    # 64 sequences, hidden 256, 4 layers
    .venv/bin/python bench/bench_kl.py --quick

Not covered: GPUs, bf16, gradient checkpointing (a GPU's training step with it is ~4 forwards, so a scoring
pass is ~1/4 of a step's compute; on CPU float32 without checkpointing it is ~1/3).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
CONFIGS = ("none", "recompute", "kl", "kl+shared", "kl-held")


def examples(n: int, prompt: int, completion: int, vocab: int, seed: int = 0) -> list[Any]:
    from sgsbatch.backends.batches import Example

    rng = random.Random(seed)
    out = []
    for i in range(n):
        comp = [rng.randrange(10, vocab) for _ in range(rng.randrange(completion // 4, completion + 1))]
        out.append(Example([rng.randrange(10, vocab) for _ in range(prompt)], comp, (-1.0) ** i, group=i // 8,
                           sampler_logprobs=[-6.0] * len(comp)))
    return out


def one(args: argparse.Namespace) -> None:
    """Child process: train once under `args.config`; print seconds and peak RSS as JSON."""
    import dataclasses

    os.environ.setdefault("DS_ACCELERATOR", "cpu")
    from sgsbatch.backends.batches import TrainSettings
    from sgsbatch.backends.trainer import train

    work, model, ref = Path(args.work), Path(args.model), Path(args.ref)
    settings = TrainSettings(lr=1e-5, batch_size=args.batch, objective="grpo", zero_stage=2, threads=args.threads)
    c = args.config
    if c == "recompute":
        settings = dataclasses.replace(settings, old_logprobs="recompute")
    elif c in ("kl", "kl-held"):
        settings = dataclasses.replace(settings, kl_beta=0.04, kl_reference=str(ref))
    elif c == "kl+shared":
        settings = dataclasses.replace(settings, kl_beta=0.04, kl_reference=str(model), old_logprobs="recompute")
    held = None
    if c == "kl-held":
        from sgsbatch.backends.weights import load_for_training

        held = load_for_training(ref, settings, "cpu").eval()
    vocab = int(json.loads((model / "config.json").read_text())["vocab_size"])
    exs = examples(args.examples, args.prompt_tokens, args.completion_tokens, vocab)
    # first-call costs (DeepSpeed's ops, torch's kernels) paid before the timing, by a 2-sequence call
    train(model, work / f"warm-{c}", exs[:2], settings, state_dir=work / f"warm-state-{c}")
    t0 = time.process_time()
    train(model, work / f"out-{c}", exs, settings, state_dir=work / f"state-{c}")
    seconds = time.process_time() - t0  # CPU seconds: a shared machine's wall clock is noise
    del held
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"config": c, "seconds": seconds, "rss_mb": rss_mb,
                      "param_mb": sum(p.numel() for p in _params(model)) * 4 / 2**20}))


def _params(model_dir: Path) -> Any:
    from safetensors.torch import load_file

    return load_file(str(model_dir / "model.safetensors")).values()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--examples", type=int, default=64)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--prompt-tokens", type=int, default=96)
    ap.add_argument("--completion-tokens", type=int, default=256)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--config", choices=CONFIGS)
    ap.add_argument("--work")
    ap.add_argument("--model")
    ap.add_argument("--ref")
    args = ap.parse_args()
    if args.config:
        one(args)
        return
    if args.quick:
        args.hidden, args.layers, args.examples = 128, 2, 32
    import torch

    from sgsbatch.models.tiny import build_tiny_random

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        model, ref = work / "model", work / "ref"
        corpus = [f"theorem t{i} : {i} + 0 = {i} := by simp" for i in range(64)]
        build_tiny_random(model, seed=0, corpus=corpus, hidden_size=args.hidden, num_layers=args.layers,
                          num_heads=4, max_positions=1024)
        build_tiny_random(ref, seed=1, corpus=corpus, hidden_size=args.hidden, num_layers=args.layers,
                          num_heads=4, max_positions=1024)
        rows = {}
        for c in CONFIGS:
            argv = [sys.executable, __file__, "--config", c, "--work", str(work), "--model", str(model),
                    "--ref", str(ref), *[f"--{k.replace('_', '-')}={v}" for k, v in vars(args).items()
                                         if k in ("examples", "batch", "prompt_tokens", "completion_tokens",
                                                  "threads")]]
            proc = subprocess.run(argv, capture_output=True, text=True)
            if proc.returncode:
                raise SystemExit(f"{c} failed:\n{proc.stderr[-3000:]}")
            out = proc.stdout
            rows[c] = json.loads(out.strip().splitlines()[-1])
        base = rows["none"]["seconds"]
        print(f"torch {torch.__version__}, {os.cpu_count()} CPUs, hidden {args.hidden}, {args.layers} layers, "
              f"{args.examples} sequences, batch {args.batch}, weights {rows['none']['param_mb']:.1f} MB fp32")
        print("| configuration | CPU seconds | over baseline | peak RSS MB |")
        print("| --- | --- | --- | --- |")
        for c, row in rows.items():
            print(f"| {c} | {row['seconds']:.2f} | {row['seconds'] / base - 1:+.0%} | {row['rss_mb']:.0f} |")


if __name__ == "__main__":
    main()

"""Rollout regime (issue 40): a fresh vLLM engine per rollout step against an in-place weight update.

The GRPO family's papers alternate one rollout batch and one training step. On sgsbatch's Slurm chain
each rollout step would be a solve phase that starts vLLM again on the trainer's new weights (design
(a)); a colocated job would keep one engine and update its weights in memory (design (b)). Measured
in one run, on one tiny-random Llama (bench_generation.build_model; float32, so that both engines
compute the same numbers) and vLLM's CPU build here:
  (1) the weights' disk write (`save_pretrained` of the new weights, safetensors) and a fresh engine
      start on the new model directory (`make_generator("vllm", ...)`, enforce_eager, a fixed KV
      cache): what design (a) pays per rollout step, on top of the trainer's own reload;
  (2) the in-place update of the running engine to the same new weights, two ways through vLLM
      0.32's worker method `reload_weights` (vllm/v1/worker/gpu_worker.py, inherited by CPUWorker;
      `model.load_weights` under vLLM's layer-wise reload), called by `LLM.collective_rpc`, then
      `LLM.reset_prefix_cache()` (without it the old weights' KV blocks are reused: wrong samples):
      (2m) from memory: the trainer's state dict as one safetensors byte string, sent through
           collective_rpc (client -> engine core -> worker process) to a callable that gives it to
           `reload_weights(weights_iterator=...)` (on GPUs the same call is fed by NCCL or CUDA IPC,
           vllm/distributed/weight_transfer; not measurable here);
      (2d) from disk: `weights_path` = the new model directory (no restart, a re-read);
  (3) correctness: after each in-place update, seeded generations (token ids) equal those of the
      fresh engine started on the new weights, and differ from the old weights' (so the update did
      something).
Reported: the seconds of each, the ratio fresh start / in-place update, the parameter count and bytes.
Not covered: the trainer's side (DeepSpeed's load of the new weights in design (a), ZeRO-3 gathers in
(b)), GPUs, tensor parallelism, CUDA graphs (enforce_eager here), bf16.

    .venv/bin/python bench/bench_weight_update.py            # hidden 512, 6 layers (~20M parameters)
    .venv/bin/python bench/bench_weight_update.py --quick    # hidden 128, 2 layers: a code-path check
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_generation import build_model, save_report, targets  # noqa: E402

MAX_MODEL_LEN = 1024


def perturbed_weights(model_dir: Path, out_dir: Path, scale: float, seed: int) -> tuple[dict[str, Any], float, int]:
    """The same architecture with every parameter moved by Gaussian noise (`scale` x its std), saved to
    `out_dir` (tokenizer copied from `model_dir`). Returns the new state dict, the save's seconds and the
    parameter count (tied weights once)."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=gen) * scale * (float(p.std()) if p.numel() > 1 else 1.0))
    shutil.copytree(model_dir, out_dir)
    for f in out_dir.glob("*.safetensors"):
        f.unlink()
    t0 = time.perf_counter()
    model.save_pretrained(str(out_dir))
    secs = time.perf_counter() - t0
    n_params = sum(p.numel() for p in model.parameters())
    return {k: v.detach().clone() for k, v in model.state_dict().items()}, secs, n_params


def start(model_dir: Path) -> tuple[Any, float]:
    from sgsbatch.phases.sampling import make_generator

    t0 = time.perf_counter()
    gen = make_generator("vllm", model_dir, seed=0, max_model_len=MAX_MODEL_LEN, dtype="float32",
                         kv_cache_memory_bytes=256 << 20, enforce_eager=True)
    return gen, time.perf_counter() - t0


def seeded_tokens(gen: Any, prompts: list[list[int]], samples: int, max_tokens: int) -> list[list[int]]:
    """Token ids of `samples` seeded completions per prompt (temperature 1, seed = the prompt's index)."""
    from vllm import SamplingParams

    params = [SamplingParams(n=samples, temperature=1.0, seed=1000 + i, max_tokens=max_tokens, detokenize=False)
              for i in range(len(prompts))]
    outs = gen.llm.generate([{"prompt_token_ids": p} for p in prompts], params, use_tqdm=False)
    return [list(c.token_ids) for o in outs for c in o.outputs]


def _reload_from_bytes(worker: Any, payload: bytes) -> None:
    """Runs in the engine's worker process: the new weights, from a safetensors payload, into the model."""
    from safetensors.torch import load

    worker.reload_weights(weights_iterator=list(load(payload).items()))


def in_place(gen: Any, **kw: Any) -> float:
    """Seconds of one `reload_weights` on every worker of the running engine, from a model directory.

    Both in-place updates reset vLLM's prefix cache afterwards: without it the engine reuses the old
    weights' KV blocks for a prompt it has seen (found here: the generations then differ from a fresh
    engine's on the new weights)."""
    t0 = time.perf_counter()
    gen.llm.collective_rpc("reload_weights", kwargs=kw)
    assert gen.llm.reset_prefix_cache(), "the prefix cache was not reset (requests still running?)"
    return time.perf_counter() - t0


def in_place_from_memory(gen: Any, state: dict[str, Any]) -> float:
    """Seconds of one in-place update from the trainer's state dict in memory, serialization included.

    collective_rpc cannot carry tensors as arguments (vLLM's msgpack decoder gives an untyped tensor
    back as a list: "'list' object has no attribute 'dtype'" in reload_weights), so the state dict goes
    as one safetensors byte string and a callable (cloudpickled, hence VLLM_ALLOW_INSECURE_SERIALIZATION)
    rebuilds the tensors in the worker.
    """
    from safetensors.torch import save

    t0 = time.perf_counter()
    gen.llm.collective_rpc(_reload_from_bytes, args=(save(state),))
    assert gen.llm.reset_prefix_cache(), "the prefix cache was not reset (requests still running?)"
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--samples", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=3, help="in-place updates timed (best kept)")
    ap.add_argument("--noise", type=float, default=0.5, help="perturbation, in units of each parameter's std")
    ap.add_argument("--quick", action="store_true", help="a small model (hidden 128, 2 layers) for a code-path check")
    args = ap.parse_args()
    os.environ["VLLM_ALLOW_INSECURE_SERIALIZATION"] = "1"  # a callable through collective_rpc (in_place_from_memory)
    if args.quick:
        args.hidden, args.layers, args.repeats = 128, 2, 1
    from sgsbatch.backends.generation import chat_prompt_ids
    from sgsbatch.logic.prompts import solver_messages

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        old_dir = build_model(root, args.hidden, args.layers)
        new_dir = root / "model-new"
        new_state, save_s, n_params = perturbed_weights(old_dir, new_dir, args.noise, seed=1)
        n_bytes = n_params * 4  # float32
        disk_bytes = sum(f.stat().st_size for f in new_dir.glob("*.safetensors"))

        gen, start_old_s = start(old_dir)
        try:
            prompts = [chat_prompt_ids(gen.tokenizer, solver_messages(r[1], r[2]))[:MAX_MODEL_LEN // 2]
                       for r in targets(args.prompts)]
            old_tokens = seeded_tokens(gen, prompts, args.samples, args.max_tokens)
            mem_s: list[float] = []
            disk_s: list[float] = []
            for _ in range(args.repeats):
                mem_s.append(in_place_from_memory(gen, new_state))
                mem_tokens = seeded_tokens(gen, prompts, args.samples, args.max_tokens)
                in_place(gen, weights_path=str(old_dir))  # back to the old weights for the next update
                disk_s.append(in_place(gen, weights_path=str(new_dir)))
                disk_tokens = seeded_tokens(gen, prompts, args.samples, args.max_tokens)
                in_place(gen, weights_path=str(old_dir))
                back = seeded_tokens(gen, prompts, args.samples, args.max_tokens)
                assert back == old_tokens, "reloading the old weights did not give the old generations back"
        finally:
            gen.close()
        gen, start_new_s = start(new_dir)
        try:
            fresh_tokens = seeded_tokens(gen, prompts, args.samples, args.max_tokens)
        finally:
            gen.close()

    fresh_total = save_s + start_new_s
    report = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cpus, python {platform.python_version()}",
        "engine": f"vllm {__import__('vllm').__version__} (cpu build, enforce_eager, float32)",
        "hidden": args.hidden, "layers": args.layers, "parameters": n_params, "bytes_in_memory": n_bytes,
        "bytes_on_disk": disk_bytes, "generated_tokens": sum(len(t) for t in fresh_tokens),
        "save_pretrained_s": save_s, "engine_start_old_s": start_old_s, "engine_start_new_s": start_new_s,
        "in_place_from_memory_s": mem_s, "in_place_from_disk_s": disk_s,
        "ratio_fresh_over_in_place_memory": fresh_total / min(mem_s),
        "ratio_fresh_over_in_place_disk": fresh_total / min(disk_s),
        "in_place_memory_equals_fresh": mem_tokens == fresh_tokens,
        "in_place_disk_equals_fresh": disk_tokens == fresh_tokens,
        "new_weights_change_generations": fresh_tokens != old_tokens,
    }
    save_report("bench_weight_update", report)
    print(f"{n_params / 1e6:.1f}M parameters ({n_bytes / 2**20:.0f} MiB float32): design (a) save "
          f"{save_s:.2f} s + engine start {start_new_s:.1f} s = {fresh_total:.1f} s; design (b) in place from "
          f"memory {min(mem_s):.3f} s ({report['ratio_fresh_over_in_place_memory']:.0f}x less), from disk "
          f"{min(disk_s):.3f} s; token-identical to a fresh engine: memory {report['in_place_memory_equals_fresh']}, "
          f"disk {report['in_place_disk_equals_fresh']}; new weights change the samples: "
          f"{report['new_weights_change_generations']}")
    ok = report["in_place_memory_equals_fresh"] and report["in_place_disk_equals_fresh"]
    return 0 if ok and report["new_weights_change_generations"] else 1


if __name__ == "__main__":
    raise SystemExit(main())

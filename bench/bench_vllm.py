"""vLLM throughput: the solve phase's path on vLLM against vLLM's own offline `LLM.generate`, and
against the transformers backend, on the same prompts, sampling parameters and model.

One tiny-random Llama (bench_generation.build_model: ~20M parameters by default, head size 64) and
P Solver prompts from D_3k (or the embedded tiny targets), `--samples` completions each, at most
`--max-tokens` tokens, temperature 1. Every request carries the seed the solve phase gives it
(phases/sampling.request_for), so both vLLM paths sample the very same tokens. Measured in one run,
on one engine (vLLM's CPU build here; started once, its start-up reported apart), alternating
`--repeats` times:
  (a) floor: `LLM.generate` with all prompts at once (token-id prompts, one SamplingParams per prompt,
      the stream path's: token ids and logprobs back, each sample decoded once afterwards);
  (b) sgsbatch: `phases/sampling.stream_items` with `VllmGenerator` and a window of `--window`
      prompts (the engine's add/step/abort, the item log with an fsync per item, extraction);
then once (c) the same stream path with the transformers backend (window 32, float32).
Reported: generated tokens/s of each (best of the repeats), (b)/(a) (goal >= 0.95), (b)/(c).

    .venv/bin/python bench/bench_vllm.py                  # defaults: 96 prompts x 4 samples x 64 tokens
    .venv/bin/python bench/bench_vllm.py --quick          # hidden 128, 2 layers: a code-path check
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_generation import REPO, build_model, phase_path, save_report, targets  # noqa: E402


def _task(root: Path, window: int, max_model_len: int) -> Any:
    from sgsbatch.config.loading import load_config
    from sgsbatch.phases.task import Task
    from sgsbatch.run.paths import RunPaths
    from sgsbatch.run.shards import Shard

    cfg = load_config(REPO / "jobs" / "tiny-vllm.toml", [f"generation.max_in_flight={window}", "shards.solve=1",
                                                         f"generation.max_model_len={max_model_len}"])
    paths = RunPaths(root)
    return Task(cfg, paths, 0, "solve", Shard(paths.phase_dir(0, "solve"), 0), lambda: False)


def _requests(task: Any, rows: list[tuple[str, str, str]], samples: int, max_tokens: int) -> list[Any]:
    from sgsbatch.logic.prompts import solver_messages
    from sgsbatch.phases.sampling import request_for

    return [request_for(task, r[0], solver_messages(r[1], r[2]), samples, max_tokens=max_tokens, temperature=1.0)
            for r in rows]


def floor_llm_generate(gen: Any, requests: list[Any]) -> dict[str, float]:
    """vLLM's offline API on the same token ids and per-request sampling parameters."""
    from vllm import SamplingParams

    from sgsbatch.backends.generation import chat_prompt_ids, completion_budget, sample_text

    prompts, params = [], []
    for req in requests:
        ids = chat_prompt_ids(gen.tokenizer, req.messages)
        prompts.append({"prompt_token_ids": ids})
        params.append(SamplingParams(n=req.n, temperature=req.temperature, top_p=req.top_p, seed=req.seed,
                                     max_tokens=completion_budget(req.max_tokens, len(ids), gen.max_model_len),
                                     logprobs=0, detokenize=False))  # as VllmGenerator asks
    t0 = time.perf_counter()
    outs = gen.llm.generate(prompts, params, use_tqdm=False)
    texts = [sample_text(gen.tokenizer, list(c.token_ids), c.finish_reason != "length") for o in outs for c in o.outputs]
    secs = time.perf_counter() - t0  # with the same one decode per sample the stream path does
    assert len(texts) == sum(r.n for r in requests)
    tokens = sum(len(c.token_ids) for o in outs for c in o.outputs)
    return {"tokens": tokens, "seconds": secs, "tokens_per_s": tokens / secs}


def stream_path(gen: Any, task: Any, rows: list[tuple[str, str, str]], requests: list[Any]) -> dict[str, float]:
    from sgsbatch.backends.generation import Lent
    from sgsbatch.logic.extraction import extract_proof
    from sgsbatch.phases.sampling import extracted_samples, stream_items

    by_key = {r.key: r for r in requests}
    lent = Lent(gen)

    def record(row: tuple[str, str, str], out: Any) -> dict[str, Any]:
        return {"prompt_ids": out.prompt_ids, "samples": extracted_samples(out, extract_proof, "proof")}

    t0 = time.perf_counter()
    stream_items(task, rows, lambda row: by_key[row[0]], record, lambda: lent)
    secs = time.perf_counter() - t0
    st = lent.stats
    return {"tokens": st.generated_tokens, "seconds": secs, "tokens_per_s": st.generated_tokens / secs,
            "engine_tokens_per_s": st.generated_tokens / st.generate_s}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompts", type=int, default=96)
    ap.add_argument("--samples", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--window", type=int, default=512, help="generation.max_in_flight of the stream path")
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--dtype", default="float32", help="vLLM's dtype (float32 = the transformers backend's)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="the transformers backend's threads")
    ap.add_argument("--quick", action="store_true", help="a small model (hidden 128, 2 layers) for a code-path check")
    args = ap.parse_args()
    if args.quick:
        args.hidden, args.layers, args.repeats = 128, 2, 1
    from sgsbatch.phases.sampling import make_generator

    max_model_len = 2048
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        model_dir = build_model(root, args.hidden, args.layers)
        rows = targets(args.prompts)
        t0 = time.perf_counter()
        gen: Any = make_generator("vllm", model_dir, seed=0, max_model_len=max_model_len, dtype=args.dtype,
                                  kv_cache_memory_bytes=512 << 20, enforce_eager=True)
        startup = time.perf_counter() - t0
        engine = gen.stats.engine
        try:
            warm = _task(root / "warm", args.window, max_model_len)
            floor_llm_generate(gen, _requests(warm, rows[:4], 1, 8))  # first-call costs out of the figures
            floors, ours = [], []
            for i in range(args.repeats):
                task = _task(root / f"s{i}", args.window, max_model_len)
                reqs = _requests(task, rows, args.samples, args.max_tokens)
                floors.append(floor_llm_generate(gen, reqs))
                ours.append(stream_path(gen, task, rows, reqs))
        finally:
            gen.close()
        hf = phase_path(model_dir, rows, args.samples, args.max_tokens, 32, args.threads, root / "hf")
    best_floor = max(floors, key=lambda f: f["tokens_per_s"])
    best_ours = max(ours, key=lambda f: f["tokens_per_s"])
    report = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cpus, python {platform.python_version()}",
        "engine": engine, "dtype": args.dtype, "hidden": args.hidden, "layers": args.layers,
        "prompts": args.prompts, "samples": args.samples, "max_tokens": args.max_tokens, "window": args.window,
        "vllm_startup_s": startup, "floor_llm_generate": floors, "sgsbatch_stream": ours, "transformers_stream": hf,
        "ratio_vs_floor": best_ours["tokens_per_s"] / best_floor["tokens_per_s"],
        "ratio_vs_transformers": best_ours["tokens_per_s"] / hf["tokens_per_s"],
        "same_tokens": all(f["tokens"] == o["tokens"] for f, o in zip(floors, ours, strict=True)),
    }
    save_report("bench_vllm", report)
    print(f"tokens/s: LLM.generate {best_floor['tokens_per_s']:.0f}, sgsbatch stream on vLLM "
          f"{best_ours['tokens_per_s']:.0f} ({report['ratio_vs_floor']:.3f}x of the floor; goal >= 0.95), "
          f"transformers backend {hf['tokens_per_s']:.0f} (vLLM path {report['ratio_vs_transformers']:.2f}x); "
          f"engine start {startup:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

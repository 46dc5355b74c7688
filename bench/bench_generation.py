"""Generation throughput on CPU: the phases' windowed path against its floor and the per-item path.

One tiny-random Llama (about 20M parameters by default, built offline) and P Solver prompts from
the D_3k data (or the embedded tiny targets), `--samples` completions each of exactly
`--max-tokens` tokens (eos is suppressed in all three, so every path generates the same number of
tokens). Measured in one run, in this order, with the same threads:
  (a) floor: Hugging Face `model.generate` on left-padded batches of `--window` prompts
      (`num_return_sequences = samples`), the direct batched call the backend is held to;
  (b) sgsbatch: the solve phase's code path, `phases/sampling.stream_items` with the
      transformers backend and `generation.max_in_flight = --window` (item log, fsync per item);
  (c) per item: the same path with a window of 1 (how every phase sampled before).
Reported: generated tokens/s of each, (b)/(a) (target >= 0.8) and (b)/(c) (the speedup).

    .venv/bin/python bench/bench_generation.py                      # defaults: 192 prompts, window 32
    .venv/bin/python bench/bench_generation.py --prompts 64 --per-item-prompts 16 --quick

The per-item path is measured on `--per-item-prompts` prompts (it is slow) and compared per token.
Not covered: vLLM (GPU only; see tests/gpu and docs/development.md for what to run there).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path
from typing import Any

SHARED_SMALL = Path(__file__).resolve().parents[2] / "shared" / "data" / "d3k" / "D_3k_small_prover_dataset.json"
REPO = Path(__file__).resolve().parents[1]


def targets(n: int) -> list[tuple[str, str, str]]:
    if SHARED_SMALL.is_file():
        rows = list(json.loads(SHARED_SMALL.read_text())["target_statements"].values())
        out = [(r["id"], r["header"], r["theorem"]) for r in rows]
    else:
        out = []
        for line in (REPO / "sgsbatch" / "embedded" / "tiny_targets.jsonl").read_text().splitlines():
            r = json.loads(line)
            out.append((r["id"], r["header"], r["theorem"]))
    return [(f"{i:04d}-{t[0]}", t[1], t[2]) for i, t in enumerate((out * (n // len(out) + 1))[:n])]


def build_model(root: Path, hidden: int, layers: int) -> Path:
    from sgsbatch.models.tiny import build_tiny_random
    from sgsbatch.models.warmup import corpus_for_tokenizer

    out = root / "model"
    build_tiny_random(out, seed=0, corpus=corpus_for_tokenizer(targets(64)), hidden_size=hidden,
                      num_layers=layers, num_heads=max(4, hidden // 64), max_positions=2048)
    return out


def no_eos(model: Any, eos: int) -> None:
    """Every path generates exactly max_tokens: the eos logit is pushed to -inf by a bias on lm_head."""
    import torch

    with torch.no_grad():
        head = model.lm_head
        if head.bias is None:
            head.bias = torch.nn.Parameter(torch.zeros(head.out_features))
        head.bias[eos] = -1e9


def floor_hf(model_dir: Path, prompts: list[list[dict[str, str]]], samples: int, max_tokens: int, window: int,
             threads: int) -> dict[str, float]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from sgsbatch.backends.generation import chat_prompt_ids

    torch.set_num_threads(threads)
    tok = AutoTokenizer.from_pretrained(str(model_dir))
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32).eval()
    no_eos(model, tok.eos_token_id)
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    ids = [chat_prompt_ids(tok, m) for m in prompts]
    order = sorted(range(len(ids)), key=lambda i: (len(ids[i]), i))
    generated = 0
    t0 = time.perf_counter()
    for b in range(0, len(order), window):
        batch = [ids[i] for i in order[b:b + window]]
        width = max(map(len, batch))
        x = torch.tensor([[pad] * (width - len(p)) + p for p in batch])
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in batch])
        with torch.inference_mode():
            out = model.generate(input_ids=x, attention_mask=mask, do_sample=True, temperature=1.0, top_p=1.0,
                                 top_k=0, max_new_tokens=max_tokens, min_new_tokens=max_tokens,
                                 num_return_sequences=samples, pad_token_id=pad)
        generated += (out.shape[1] - width) * out.shape[0]
    secs = time.perf_counter() - t0
    return {"tokens": generated, "seconds": secs, "tokens_per_s": generated / secs}


def phase_path(model_dir: Path, rows: list[tuple[str, str, str]], samples: int, max_tokens: int, window: int,
               threads: int, run_root: Path) -> dict[str, float]:
    from sgsbatch.backends.generation import Generation, Request, TransformersGenerator
    from sgsbatch.config.loading import load_config
    from sgsbatch.logic.extraction import extract_proof
    from sgsbatch.logic.prompts import solver_messages
    from sgsbatch.phases.sampling import extracted_samples, request_for, stream_items
    from sgsbatch.phases.task import Task
    from sgsbatch.run.paths import RunPaths
    from sgsbatch.run.shards import Shard

    cfg = load_config(REPO / "jobs" / "tiny.toml", [f"generation.max_in_flight={window}", "shards.solve=1"])
    paths = RunPaths(run_root)
    task = Task(cfg, paths, 0, "solve", Shard(paths.phase_dir(0, "solve"), 0), lambda: False)
    gens: list[TransformersGenerator] = []

    def make() -> TransformersGenerator:
        g = TransformersGenerator(model_dir, threads=threads, max_model_len=cfg.generation.max_model_len)
        no_eos(g.model, g.eos_id)
        gens.append(g)
        return g

    def request(row: tuple[str, str, str]) -> Request:
        return request_for(task, row[0], solver_messages(row[1], row[2]), samples, max_tokens=max_tokens,
                           temperature=1.0)

    def record(row: tuple[str, str, str], out: Generation) -> dict[str, Any]:
        return {"prompt_ids": out.prompt_ids, "samples": extracted_samples(out, extract_proof, "proof")}

    t0 = time.perf_counter()
    stream_items(task, rows, request, record, make)
    total = time.perf_counter() - t0
    st = gens[0].stats
    return {"tokens": st.generated_tokens, "seconds": total, "tokens_per_s": st.generated_tokens / total,
            "engine_tokens_per_s": st.generated_tokens / st.generate_s, "startup_s": st.startup_s}


def save_report(name: str, report: dict[str, Any]) -> None:
    """Print the report and keep it as bench/out/<name>-<time>.json."""
    print(json.dumps(report, indent=1))
    out = REPO / "bench" / "out"
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}.json").write_text(json.dumps(report, indent=1))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompts", type=int, default=192)
    ap.add_argument("--per-item-prompts", type=int, default=24)
    ap.add_argument("--samples", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--window", type=int, default=32)
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--quick", action="store_true", help="a small model (hidden 128, 2 layers) for a code-path check")
    args = ap.parse_args()
    if args.quick:
        args.hidden, args.layers = 128, 2
    from sgsbatch.logic.prompts import solver_messages

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        model_dir = build_model(root, args.hidden, args.layers)
        params = sum(p.numel() for p in __import__("transformers").AutoModelForCausalLM.from_pretrained(
            str(model_dir)).parameters())
        rows = targets(args.prompts)
        prompts = [solver_messages(h, t) for _, h, t in rows]
        floor = floor_hf(model_dir, prompts, args.samples, args.max_tokens, args.window, args.threads)
        ours = phase_path(model_dir, rows, args.samples, args.max_tokens, args.window, args.threads, root / "w")
        single = phase_path(model_dir, rows[: args.per_item_prompts], args.samples, args.max_tokens, 1,
                            args.threads, root / "one")
    report = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cpus, python {platform.python_version()}",
        "model_parameters": params, "prompts": args.prompts, "samples": args.samples, "max_tokens": args.max_tokens,
        "window": args.window, "threads": args.threads, "floor_hf_generate": floor, "sgsbatch_window": ours,
        "sgsbatch_per_item": single, "ratio_vs_floor": ours["tokens_per_s"] / floor["tokens_per_s"],
        "speedup_vs_per_item": ours["tokens_per_s"] / single["tokens_per_s"],
    }
    save_report("bench_generation", report)
    print(f"tokens/s: floor {floor['tokens_per_s']:.0f}, sgsbatch {ours['tokens_per_s']:.0f} "
          f"({report['ratio_vs_floor']:.2f}x of the floor; target >= 0.8), per item {single['tokens_per_s']:.0f} "
          f"(speedup {report['speedup_vs_per_item']:.1f}x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Tactic-level search on vLLM: the search task's generated tokens/s against vLLM's own offline
`LLM.generate` of the same prompts, and its expansions/s against the Lean pool's capacity.

One tiny-random Llama (bench_generation.build_model; hidden 512, 6 layers by default) on vLLM's CPU
build, started once (its start-up reported apart). `--searches` D_3k statements (or the embedded
tiny targets), all live at once (`search.concurrent` = `--searches`), best-first, `--width`
tactics per expansion of at most `--tactic-tokens` tokens, `--max-expansions` per search, no time
limit, in the SIMULATED tactic environment (search/simulated.py: NOT Lean). A random model writes
no tactic the verifier's static checks allow, so every edge would fail and every search would end
after one expansion: the environment is handed, for each sampled tactic, one of eight allow-listed
non-closing tactics picked by the hash of its text (`LegalTactics`; the engine, the prompts and the
driver's distinct-tactic count see the model's own text), so the trees grow (a tactic is legal with
probability `search.simulated_branching`; eight stand-ins and three SIMULATED goal variants make
duplicates, so some searches run out of open nodes before their budget: `stops` counts them).
Measured, alternating `--repeats` times:
  (s) the search task: `search/driver.run_searches` with `VllmGenerator` (one engine call per wave
      across all live searches), wall clock from the first wave to the last outcome, tree and
      environment work included; every request it sent is recorded (wave by wave);
  (a) the floor: `LLM.generate` of every recorded request at once (the same token ids and
      SamplingParams the backend sends, seeds included: the same tokens come back, `same_tokens`);
  (w) the floor wave by wave: one `LLM.generate` per recorded wave (what a wave barrier costs
      vLLM itself, without sgsbatch's code).
Reported: generated tokens/s of each (best of the repeats), (s)/(a) (goal >= 0.8) and (s)/(w);
expansions/s of (s), distinct tactics per expansion (= Lean calls / expansions), and the Lean
pool's capacity `lean_processes / (distinct tactics per expansion x --tactic-s)` expansions/s,
with the Lean processes that would keep up with the measured rate.

    .venv/bin/python bench/bench_search.py            # 64 searches x 6 expansions x 4 tactics x <= 32 tokens, ~7 min on 2 cores
    .venv/bin/python bench/bench_search.py --quick    # hidden 128, 2 layers, 16 searches x 4 expansions, ~1 min

Not covered: real Lean (no tactic is run in Lean here: --tactic-s is an input, see bench/README.md
for its source), a GPU (the ratio on a GPU is what decides GPU-hours; only a GPU run shows it),
MCTS (its waves are the same one-call-per-wave shape).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_generation import build_model, save_report, targets  # noqa: E402

# Lean core-seconds per tactic: no Lean on this machine, so a published figure. Kimina-Prover Preview
# (arXiv 2504.11354, "Lean Server"; quoted in leanprover-community/repl issue 84): "up to 100 iterations
# per second on machines equipped with 64 CPU cores" = 0.64 core-seconds per REPL check of a proof. A
# tactic-mode step checks less than a whole proof, so this is a high estimate (the pool looks smaller
# than it is); the canary's measured tactic time replaces it on a site (--tactic-s).
DEFAULT_TACTIC_S = 0.64


# allow-listed (verification/checks.check_proof) and not closing (verification/simulated.CLOSER_WEIGHTS)
STAND_INS = ("intro x", "push_cast", "rw [mul_comm]", "rw [add_comm]", "constructor", "refine ⟨?_, ?_⟩",
             "rw [pow_two]", "intro h")


class LegalTactics:
    """The SIMULATED environment, each sampled tactic replaced by an allow-listed one (see above)."""

    def __init__(self, env: Any) -> None:
        self.env = env
        self.name = env.name

    def start_many(self, starts: Any) -> Any:
        return self.env.start_many(starts)

    def apply_many(self, calls: Any) -> Any:
        from sgsbatch.search.environment import Apply
        from sgsbatch.verification.simulated import stable_unit

        return self.env.apply_many([Apply(c.key, c.state, STAND_INS[int(stable_unit("bench", c.tactic) * 8)])
                                    for c in calls])

    def finish(self, key: str) -> None:
        self.env.finish(key)

    def close(self) -> None:
        self.env.close()


class Recorder:
    """The generator the driver sees: passes every call to vLLM's, recording each wave's requests."""

    def __init__(self, gen: Any) -> None:
        self.gen = gen
        self.waves: list[list[Any]] = []
        self.outputs: dict[str, Any] = {}
        self._open = False

    def add(self, request: Any) -> None:
        if not self._open:
            self.waves.append([])
            self._open = True
        self.waves[-1].append(request)
        self.gen.add(request)

    def step(self) -> list[tuple[Any, Any]]:
        self._open = False
        out = self.gen.step()
        for req, g in out:
            self.outputs[req.key] = g
        return list(out)


def search_config(args: argparse.Namespace) -> Any:
    from sgsbatch.config.schema import SearchConfig

    return dataclasses.replace(SearchConfig(), algorithm="best_first", environment="simulated", width=args.width,
                               max_expansions=args.max_expansions, time_limit_s=0.0,
                               tactic_max_tokens=args.tactic_tokens, concurrent=args.searches,
                               lean_processes=args.lean_processes)


def run_search_task(gen: Any, rows: list[tuple[str, str, str]], cfg: Any, seed: int) -> tuple[dict[str, Any], Recorder]:
    from sgsbatch.backends.generation import derive_seed
    from sgsbatch.search.driver import Outcome, SearchJob, run_searches
    from sgsbatch.search.simulated import SimulatedTacticEnvironment

    jobs = [SearchJob(f"{r[0]}#0", r[0], 0, r[1], r[2], derive_seed(seed, i)) for i, r in enumerate(rows)]
    env = LegalTactics(SimulatedTacticEnvironment(cfg.simulated_branching, cfg.simulated_depth))
    rec = Recorder(gen)
    outcomes: list[Outcome] = []
    t0 = time.perf_counter()
    stats = run_searches(jobs, env, rec, cfg, on_done=outcomes.append, check_stop=lambda: None)
    secs = time.perf_counter() - t0
    env.close()
    expansions = sum(int(o.stats["expansions"]) for o in outcomes)
    stops: dict[str, int] = {}
    for o in outcomes:
        stops[o.stop] = stops.get(o.stop, 0) + 1
    return {"tokens": stats.generated_tokens, "seconds": secs, "tokens_per_s": stats.generated_tokens / secs,
            "engine_s": stats.generate_s, "expansions": expansions, "expansions_per_s": expansions / secs,
            "distinct_tactics_per_expansion": stats.lean_calls / expansions if expansions else 0.0,
            "waves": stats.waves, "requests": stats.requests, "max_wave": stats.max_wave,
            "prompt_tokens": stats.prompt_tokens, "malformed": stats.malformed, "stops": stops}, rec


def _vllm_inputs(gen: Any, requests: list[Any]) -> tuple[list[dict[str, Any]], list[Any]]:
    """The token ids and SamplingParams VllmGenerator.add sends for each request."""
    from vllm import SamplingParams

    from sgsbatch.backends.generation import chat_prompt_ids, completion_budget

    prompts, params = [], []
    for req in requests:
        ids = chat_prompt_ids(gen.tokenizer, req.messages)
        prompts.append({"prompt_token_ids": ids})
        params.append(SamplingParams(n=req.n, temperature=req.temperature, top_p=req.top_p, seed=req.seed,
                                     max_tokens=completion_budget(req.max_tokens, len(ids), gen.max_model_len),
                                     logprobs=0, detokenize=False))
    return prompts, params


def floor(gen: Any, waves: list[list[Any]], outputs: dict[str, Any]) -> dict[str, Any]:
    """`LLM.generate` of the given waves, one call each (one wave = every request at once); the
    token ids are compared with what the search task got."""
    from sgsbatch.backends.generation import sample_text

    tokens, secs, same = 0, 0.0, True
    for wave in waves:
        prompts, params = _vllm_inputs(gen, wave)
        t0 = time.perf_counter()
        outs = gen.llm.generate(prompts, params, use_tqdm=False)
        for o in outs:  # each sample decoded once, as the backend does
            for c in o.outputs:
                sample_text(gen.tokenizer, list(c.token_ids), c.finish_reason != "length")
        secs += time.perf_counter() - t0
        for req, o in zip(wave, outs, strict=True):
            got = [list(c.token_ids) for c in o.outputs]
            tokens += sum(len(t) for t in got)
            same = same and sorted(got) == sorted(list(s.token_ids) for s in outputs[req.key].samples)
    return {"tokens": tokens, "seconds": secs, "tokens_per_s": tokens / secs, "calls": len(waves), "same_tokens": same}


def lean_capacity(expansions_per_s: float, distinct: float, tactic_s: float, processes: int) -> dict[str, float]:
    """The Lean pool's expansions/s: each expansion applies `distinct` tactics of `tactic_s` seconds
    each, `processes` at a time; and the processes that keep up with `expansions_per_s`."""
    capacity = processes / (distinct * tactic_s) if distinct and tactic_s else float("inf")
    return {"tactic_s": tactic_s, "lean_processes": processes, "capacity_expansions_per_s": capacity,
            "needed_expansions_per_s": expansions_per_s,
            "processes_to_keep_up": expansions_per_s * distinct * tactic_s,
            "pool_share_busy": expansions_per_s / capacity if capacity else 0.0}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--searches", type=int, default=64, help="searches, all live at once (search.concurrent)")
    ap.add_argument("--width", type=int, default=4, help="search.width: tactics sampled per expansion")
    ap.add_argument("--max-expansions", type=int, default=6)
    ap.add_argument("--tactic-tokens", type=int, default=32, help="search.tactic_max_tokens")
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--tactic-s", type=float, default=DEFAULT_TACTIC_S,
                    help="Lean seconds per tactic for the pool's capacity (bench/README.md: its source)")
    ap.add_argument("--lean-processes", type=int, default=4, help="search.lean_processes (its default)")
    ap.add_argument("--quick", action="store_true", help="hidden 128, 2 layers, 16 searches x 4 expansions, 1 repeat")
    args = ap.parse_args()
    if args.quick:
        args.hidden, args.layers, args.searches, args.max_expansions, args.repeats = 128, 2, 16, 4, 1
    from sgsbatch.phases.sampling import make_generator

    cfg = search_config(args)
    max_model_len = 2048
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = build_model(Path(tmp), args.hidden, args.layers)
        rows = targets(args.searches)
        t0 = time.perf_counter()
        gen: Any = make_generator("vllm", model_dir, seed=0, max_model_len=max_model_len, dtype=args.dtype,
                                  kv_cache_memory_bytes=512 << 20, enforce_eager=True)
        startup = time.perf_counter() - t0
        engine = gen.stats.engine
        try:
            warm, _ = run_search_task(gen, rows[:2], dataclasses.replace(cfg, max_expansions=1, concurrent=2), 99)
            searches, floors, wave_floors = [], [], []
            for i in range(args.repeats):
                s, rec = run_search_task(gen, rows, cfg, i)
                searches.append(s)
                floors.append(floor(gen, [[r for w in rec.waves for r in w]], rec.outputs))
                wave_floors.append(floor(gen, rec.waves, rec.outputs))
        finally:
            gen.close()
    best_s = max(searches, key=lambda f: f["tokens_per_s"])
    best_a = max(floors, key=lambda f: f["tokens_per_s"])
    best_w = max(wave_floors, key=lambda f: f["tokens_per_s"])
    lean = lean_capacity(best_s["expansions_per_s"], best_s["distinct_tactics_per_expansion"], args.tactic_s,
                         args.lean_processes)
    report = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cpus, python {platform.python_version()}",
        "engine": engine, "dtype": args.dtype, "hidden": args.hidden, "layers": args.layers,
        "searches": args.searches, "width": args.width, "max_expansions": args.max_expansions,
        "tactic_tokens": args.tactic_tokens, "vllm_startup_s": startup, "warm_up": warm,
        "search_task": searches, "floor_all_at_once": floors, "floor_per_wave": wave_floors,
        "ratio_vs_floor": best_s["tokens_per_s"] / best_a["tokens_per_s"],
        "ratio_vs_per_wave_floor": best_s["tokens_per_s"] / best_w["tokens_per_s"],
        "same_tokens": all(f["same_tokens"] for f in floors + wave_floors), "lean": lean,
    }
    save_report("bench_search", report)
    print(f"tokens/s: search task {best_s['tokens_per_s']:.0f}, LLM.generate all at once {best_a['tokens_per_s']:.0f} "
          f"({report['ratio_vs_floor']:.3f}x; goal >= 0.8), LLM.generate per wave {best_w['tokens_per_s']:.0f} "
          f"({report['ratio_vs_per_wave_floor']:.3f}x); same tokens: {report['same_tokens']}; engine start "
          f"{startup:.1f} s")
    print(f"expansions/s {best_s['expansions_per_s']:.2f} x {best_s['distinct_tactics_per_expansion']:.2f} distinct "
          f"tactics; Lean pool of {args.lean_processes} at {args.tactic_s} s/tactic: "
          f"{lean['capacity_expansions_per_s']:.2f} expansions/s ({lean['pool_share_busy']:.1%} busy; "
          f"{lean['processes_to_keep_up']:.2f} processes keep up)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

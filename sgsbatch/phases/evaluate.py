"""Held-out evaluation of one stored round: `eval.samples` Solver samples per problem of an evaluation set,
checked by the run's configured verifier, written under the run directory.

The weights are the Solver's after round r's training: what round r + 1 samples with
(round/checkpoints.weights_for; the base weights for a Solver that is never trained). The prompt is the
solve phase's (prompts.solver_messages, the run's `[prompts]`), the extraction its rule
(`extraction.declarations`), the sampling `solver.max_tokens`, `solver.temperature`, `generation.top_p`,
each problem seeded from `run.seed`, the round, the set and its id. A SIMULATED generation backend
samples as the run's solve phase would (no weights loaded); the files and metrics of such a run say
SIMULATED like everything else of it.

Files (run/paths.RunPaths.eval_dir): `results.jsonl` (one problem a line: id, and per sample the proof or
why none was extracted, the verdict and its reason), then `summary.json` (problems, samples, pass@k, the
weights, whether SIMULATED), then the `DONE` marker, each written atomically, the marker last: a set with
its marker is complete and is not evaluated again unless forced. Not covered: recording metrics (a phase
never writes the database: ops/evaluate.py does), submitting the evaluation as a job.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sgsbatch.backends.generation import Generation, Request
from sgsbatch.config.schema import Config
from sgsbatch.errors import DamagedFile
from sgsbatch.logic.data import Target
from sgsbatch.logic.evaluation import correct_counts, set_pass_at_k
from sgsbatch.logic.extraction import extract_proof
from sgsbatch.logic.prompts import load_prompts, solver_messages
from sgsbatch.phases.sampling import in_window, role_generator
from sgsbatch.phases.task import phase_seed, phase_threads
from sgsbatch.round.checkpoints import weights_for
from sgsbatch.run.paths import RunPaths
from sgsbatch.run.shards import atomic_write_json, atomic_write_text, read_json
from sgsbatch.verification.verdict import ProofJob
from sgsbatch.verification.verifier import make_verifier

RESULTS, SUMMARY = "results.jsonl", "summary.json"
UNEXTRACTED = "unextracted"


def is_evaluated(paths: RunPaths, r: int, name: str) -> bool:
    """Set `name`'s evaluation after round r is complete (its marker, RunPaths.eval_done, written last)."""
    return paths.eval_done(r, name).is_file()


def read_summary(out: Path) -> dict[str, Any]:
    """A set's summary.json; a damaged one (or one without its pass@k) is a DamagedFile naming it."""
    summary = read_json(out / SUMMARY)
    if not isinstance(summary, dict) or not isinstance(summary.get("pass_at_k"), dict):
        raise DamagedFile(out / SUMMARY, "no pass_at_k object")
    return summary


def solver_weights(cfg: Config, paths: RunPaths, r: int) -> str:
    """The Solver's weights after round r (what round r + 1 samples with); a FileNotFoundError naming the
    checkpoint when retention deleted it or it was never published."""
    if cfg.generation.backend == "simulated":
        return "SIMULATED (no weights loaded)"
    try:
        return weights_for(cfg, paths, "solver", r + 1)
    except FileNotFoundError:
        raise FileNotFoundError(f"the Solver's weights after round {r} are missing or incomplete at "
                                f"{paths.checkpoint(r, 'solver')} (never published, or deleted by retention: "
                                f"checkpoints.keep_last / keep_every); evaluate a round whose checkpoint is kept") from None


def generate(cfg: Config, paths: RunPaths, r: int, name: str, targets: Sequence[Target],
             samples: int) -> dict[str, Generation]:
    """`samples` Solver samples of each target, `generation.max_in_flight` requests at a time (the solve
    phase's window, phases/sampling.in_window), with the generator round r + 1 samples with."""
    prompts = load_prompts(cfg.prompts)
    s = cfg.solver
    requests = [Request(t.id, solver_messages(t.header, t.theorem, prompts), samples,
                        phase_seed(cfg, r, "eval", f"{name}:{t.id}"), s.max_tokens, s.temperature, cfg.generation.top_p)
                for t in targets]
    gen = role_generator(cfg, "solver", r + 1, "solve", lambda: Path(solver_weights(cfg, paths, r)),
                         phase_threads(cfg, "solve"))
    try:
        return {req.key: done for req, done in in_window(gen, requests, cfg.generation.max_in_flight)}
    finally:
        gen.close()


def evaluate_set(cfg: Config, paths: RunPaths, r: int, name: str, targets: Sequence[Target], *, samples: int,
                 ks: Sequence[int], processes: int) -> dict[str, Any]:
    """Evaluate set `name` with the Solver's weights after round r; returns its summary (see the module
    docstring for the files). `processes`: the verifier's REPL processes."""
    assert targets, f"evaluation set {name} has no problems"
    started = time.time()
    weights = solver_weights(cfg, paths, r)
    outs = generate(cfg, paths, r, name, targets, samples)
    rows: dict[str, list[dict[str, Any]]] = {}
    jobs: list[ProofJob] = []
    for t in targets:
        rows[t.id] = []
        for k, sample in enumerate(outs[t.id].samples):
            ex = extract_proof(sample.text, cfg.extraction.declarations)
            rows[t.id].append({"proof": ex.value if ex.ok else None, "n_tokens": len(sample.token_ids),
                               "finish_reason": sample.finish_reason,
                               **({} if ex.ok else {"verdict": UNEXTRACTED, "verify_reason": ex.reason})})
            if ex.ok and ex.value is not None:
                jobs.append(ProofJob(f"{t.id}\t{k}", t.header, t.theorem, ex.value))
    verifier = make_verifier(cfg, processes=processes)
    try:
        for job, verdict, secs in verifier.verify_stream(jobs):
            pid, index = job.key.rsplit("\t", 1)
            rows[pid][int(index)].update(verdict=verdict.verdict, verify_reason=verdict.reason, time_s=round(secs, 4))
    finally:
        verifier.close()
    assert all("verdict" in x for v in rows.values() for x in v), "every sample gets a verdict"
    counts = correct_counts({pid: [x["verdict"] for x in v] for pid, v in rows.items()})
    passes = set_pass_at_k(counts, ks)
    out = paths.eval_dir(r, name)
    out.mkdir(parents=True, exist_ok=True)
    paths.eval_done(r, name).unlink(missing_ok=True)  # an evaluation again: incomplete until its new marker
    simulated = cfg.simulated_label()
    lines = [json.dumps({"problem_id": t.id, "samples": rows[t.id], "verified": sum(
        1 for x in rows[t.id] if x["verdict"] == "verified"), **({"simulated": simulated} if simulated else {})},
        ensure_ascii=False, sort_keys=True) for t in targets]
    atomic_write_text(out / RESULTS, "".join(line + "\n" for line in lines))
    summary = {"set": name, "round": r, "problems": len(targets), "samples": samples, "weights": weights,
               "pass_at_k": {str(k): v for k, v in passes.items()}, "simulated": simulated,
               "solved": sum(1 for _, c in counts if c), "seconds": round(time.time() - started, 3)}
    atomic_write_json(out / SUMMARY, summary)
    atomic_write_text(paths.eval_done(r, name), f"{time.time()}\n")
    return summary

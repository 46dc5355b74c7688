"""Solve phase: `solver.samples` Solver samples for every target and every conjecture of the round.

With `solver.mode = "search"` the phase is tactic-level search instead (phases/search.py).
Extraction happens here so verify only sees extracted proofs; the file Lean sees is always the
dataset header + dataset statement + extracted proof (extraction.solver_file).
"""

from __future__ import annotations

from typing import Any

from sgsbatch.backends.generation import Generation, Request
from sgsbatch.logic.extraction import Extraction, extract_proof
from sgsbatch.logic.prompts import load_prompts, solver_messages
from sgsbatch.phases.sampling import extracted_samples, generator_for, request_for, stream_items
from sgsbatch.phases.task import Task
from sgsbatch.round.results import Problem, solve_problems


def run(task: Task) -> None:
    if task.cfg.solver.mode == "search":  # tactic-level search (phases/search.py)
        from sgsbatch.phases import search

        search.run(task)
        return
    cfg = task.cfg.solver
    rule = task.cfg.extraction.declarations

    def extract(reply: str) -> Extraction:
        return extract_proof(reply, rule)

    prompts = load_prompts(task.cfg.prompts)

    def request(p: Problem) -> Request:
        return request_for(task, p.problem_id, solver_messages(p.header, p.theorem, prompts), cfg.samples,
                           max_tokens=cfg.max_tokens, temperature=cfg.temperature)

    def record(p: Problem, out: Generation) -> dict[str, Any]:
        return {"problem_id": p.problem_id, "is_target": p.is_target,
                "samples": extracted_samples(out, extract, "proof")}

    stream_items(task, solve_problems(task.cfg, task.paths, task.round), request, record,
                 lambda: generator_for(task, "solver"))

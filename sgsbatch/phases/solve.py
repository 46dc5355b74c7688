"""Solve phase: `solver.samples` Solver samples for every target and every conjecture of the round.

Extraction happens here so verify only sees extracted proofs; the file Lean sees is always the
dataset header + dataset statement + extracted proof (extraction.solver_file).
"""

from __future__ import annotations

from typing import Any

from sgsbatch.backends.generation import Generator
from sgsbatch.extraction import extract_proof
from sgsbatch.phases.models import generator_for, sample_record
from sgsbatch.phases.task import Task, run_items
from sgsbatch.prompts import solver_messages
from sgsbatch.round_data import Problem, solve_problems


def run(task: Task) -> None:
    cfg = task.cfg.solver
    items = solve_problems(task.cfg, task.paths, task.round)
    gen: list[Generator] = []

    def process(p: Problem) -> dict[str, Any]:
        (out,) = gen[0].generate([solver_messages(p.header, p.theorem)], cfg.samples, seed=task.seed(p.problem_id),
                                 max_tokens=cfg.max_tokens, temperature=cfg.temperature,
                                 top_p=task.cfg.generation.top_p)
        samples = []
        for s in out.samples:
            ex = extract_proof(s.text)
            samples.append({**sample_record(s), "ok": ex.ok, "proof": ex.value, "reason": ex.reason})
        return {"problem_id": p.problem_id, "is_target": p.is_target, "prompt_ids": out.prompt_ids,
                "samples": samples}

    run_items(task, items, lambda p: p.problem_id, process, lambda: gen.append(generator_for(task, "solver")))

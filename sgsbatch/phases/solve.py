"""Solve phase: `solver.samples` Solver samples for every target and every conjecture of the round.

Extraction happens here so verify only sees extracted proofs; the file Lean sees is always the
dataset header + dataset statement + extracted proof (extraction.solver_file).
"""

from __future__ import annotations

from typing import Any

from sgsbatch.backends.generation import Generator
from sgsbatch.extraction import extract_proof
from sgsbatch.phases.sampling import generator_for, sample_and_extract
from sgsbatch.phases.task import Task, run_items
from sgsbatch.prompts import solver_messages
from sgsbatch.round.results import Problem, solve_problems


def run(task: Task) -> None:
    cfg = task.cfg.solver
    items = solve_problems(task.cfg, task.paths, task.round)
    gen: list[Generator] = []

    def process(p: Problem) -> dict[str, Any]:
        prompt_ids, samples = sample_and_extract(task, gen[0], solver_messages(p.header, p.theorem), p.problem_id,
                                                 cfg.samples, max_tokens=cfg.max_tokens,
                                                 temperature=cfg.temperature, extract=extract_proof, field="proof")
        return {"problem_id": p.problem_id, "is_target": p.is_target, "prompt_ids": prompt_ids, "samples": samples}

    run_items(task, items, lambda p: p.problem_id, process, lambda: gen.append(generator_for(task, "solver")))

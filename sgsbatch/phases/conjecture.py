"""Conjecture phase: one Conjecturer sample per unsolved target, extracted strictly.

Deduplication needs the whole round, so it happens where the conjectures are read back
(round/results.round_conjectures). Not covered: checking conjectures in Lean (they count as valid
only once a Solver proof of them verifies).
"""

from __future__ import annotations

from typing import Any

from sgsbatch.backends.generation import Generator
from sgsbatch.extraction import extract_conjecture
from sgsbatch.phases.sampling import generator_for, sample_and_extract
from sgsbatch.phases.task import Task, run_items
from sgsbatch.prompts import conjecturer_messages
from sgsbatch.round.results import Problem, round_inputs, run_targets


def run(task: Task) -> None:
    cfg = task.cfg.conjecturer
    by_id = {t.problem_id: t for t in run_targets(task.paths)}
    items = [by_id[i] for i in round_inputs(task.paths, task.round)["unsolved"]]
    gen: list[Generator] = []

    def process(target: Problem) -> dict[str, Any]:
        msgs = conjecturer_messages(target.header, target.theorem, conditioned=cfg.conditioned)
        prompt_ids, samples = sample_and_extract(task, gen[0], msgs, target.problem_id, cfg.samples_per_target,
                                                 max_tokens=cfg.max_tokens, temperature=cfg.temperature,
                                                 extract=extract_conjecture, field="statement")
        return {"target_id": target.problem_id, "prompt_ids": prompt_ids, "samples": samples}

    run_items(task, items, lambda t: t.problem_id, process, lambda: gen.append(generator_for(task, "conjecturer")))

"""Conjecture phase: one Conjecturer request per unsolved target, its samples extracted strictly.

Deduplication needs the whole round, so it happens where the conjectures are read back
(round/results.round_conjectures). Not covered: checking conjectures in Lean (they count as valid
only once a Solver proof of them verifies).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from sgsbatch.backends.generation import Generation, Request
from sgsbatch.config.schema import ExtractionConfig
from sgsbatch.extraction import Extraction, extract_conjecture
from sgsbatch.phases.sampling import extracted_samples, generator_for, request_for, stream_items
from sgsbatch.phases.task import Task
from sgsbatch.prompts import conjecturer_messages, load_prompts
from sgsbatch.round.results import Problem, round_inputs, run_targets


def extractor(ex: ExtractionConfig) -> Callable[[str], Extraction]:
    """The Conjecturer's extraction under `extraction.conjecture` and `extraction.conjecture_imports`."""
    return partial(extract_conjecture, rule=ex.conjecture, imports=ex.conjecture_imports)


def run(task: Task) -> None:
    cfg = task.cfg.conjecturer
    prompts = load_prompts(task.cfg.prompts)
    by_id = {t.problem_id: t for t in run_targets(task.paths)}
    items = [by_id[i] for i in round_inputs(task.paths, task.round)["unsolved"]]

    def request(target: Problem) -> Request:
        msgs = conjecturer_messages(target.header, target.theorem, conditioned=cfg.conditioned, prompts=prompts)
        return request_for(task, target.problem_id, msgs, cfg.samples_per_target, max_tokens=cfg.max_tokens,
                           temperature=cfg.temperature)

    def record(target: Problem, out: Generation) -> dict[str, Any]:
        return {"target_id": target.problem_id, "prompt_ids": out.prompt_ids,
                "samples": extracted_samples(out, extractor(task.cfg.extraction), "statement")}

    stream_items(task, items, request, record, lambda: generator_for(task, "conjecturer"))

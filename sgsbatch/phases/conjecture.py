"""Conjecture phase: the round's Conjecturer prompts (`conjecturer.setup`), their samples extracted strictly.

Prompts per `conjecturer.setup` (the reference's ConjecturerSetup, sgs/pipeline/step1_data_gen.py:
303-375): "target_statement_only_unsolved" (SGS) one per unsolved target, "target_statement" one per
target, "seed_statement" (STP) the seeds round/lifecycle.prepare_round chose (a solved target and one
of its stored proofs, with its count of samples). Deduplication needs the whole round, so it happens
where the conjectures are read back (round/results.round_conjectures). Not covered: checking
conjectures in Lean (they count as valid only once a Solver proof of them verifies).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from sgsbatch.backends.generation import Generation, Request
from sgsbatch.config.schema import ExtractionConfig
from sgsbatch.logic.extraction import Extraction, extract_conjecture
from sgsbatch.logic.prompts import conjecturer_messages, load_prompts, seeded_conjecturer_messages
from sgsbatch.phases.sampling import extracted_samples, generator_for, request_for, stream_items
from sgsbatch.phases.task import Task
from sgsbatch.round.results import Problem, round_inputs, run_targets


@dataclass(frozen=True)
class ConjecturePrompt:
    """One Conjecturer request: its item key, the target it shows (or seeds from), its samples and,
    seeded, the stored proof (slot and text) it shows."""

    key: str
    target: Problem
    samples: int
    slot: int | None = None
    proof: str | None = None


def extractor(ex: ExtractionConfig) -> Callable[[str], Extraction]:
    """The Conjecturer's extraction under `extraction.conjecture` and `extraction.conjecture_imports`."""
    return partial(extract_conjecture, rule=ex.conjecture, imports=ex.conjecture_imports)


def round_prompts(task: Task) -> list[ConjecturePrompt]:
    """The round's Conjecturer requests under `conjecturer.setup`, in target order (seeds: as prepared)."""
    cfg = task.cfg.conjecturer
    targets = run_targets(task.paths)
    by_id = {t.problem_id: t for t in targets}
    inputs = round_inputs(task.paths, task.round)
    if cfg.setup == "seed_statement":
        return [ConjecturePrompt(f"{s['target_id']}:{s['slot']}", by_id[s["target_id"]], s["samples"], s["slot"],
                                 s["proof"]) for s in inputs.get("seeds", [])]
    ids = [t.problem_id for t in targets] if cfg.setup == "target_statement" else inputs["unsolved"]
    return [ConjecturePrompt(i, by_id[i], cfg.samples_per_target) for i in ids]


def run(task: Task) -> None:
    cfg = task.cfg.conjecturer
    prompts = load_prompts(task.cfg.prompts)

    def request(item: ConjecturePrompt) -> Request:
        t = item.target
        if item.proof is None:
            msgs = conjecturer_messages(t.header, t.theorem, conditioned=cfg.conditioned, prompts=prompts)
        else:
            msgs = seeded_conjecturer_messages(t.header, t.theorem, item.proof, conditioned=cfg.conditioned,
                                               prompts=prompts)
        return request_for(task, item.key, msgs, item.samples, max_tokens=cfg.max_tokens,
                           temperature=cfg.temperature)

    def record(item: ConjecturePrompt, out: Generation) -> dict[str, Any]:
        rec: dict[str, Any] = {"target_id": item.target.problem_id,
                               "samples": extracted_samples(out, extractor(task.cfg.extraction), "statement")}
        if item.slot is not None:
            rec["seed_slot"] = item.slot
        return rec

    stream_items(task, round_prompts(task), request, record, lambda: generator_for(task, "conjecturer"))

"""Guide phase: the frozen Guide reviews each in-band conjecture once (temperature 1.0).

The band needs every solve rate of the round, so each task derives it from the verify shards
(round/results.verify_rates: no solve sample is read) and takes its slice. Prompt and tags come from `[prompts]`; parsing
(logic/review.py, as the reference) reads each score between the last begin tag and the last end tag;
failed parses are filled with the round's mean when the train phase reads them.
"""

from __future__ import annotations

from typing import Any

from sgsbatch.backends.generation import Generation, Request
from sgsbatch.logic.prompts import guide_messages, load_prompts
from sgsbatch.logic.review import parse_review
from sgsbatch.phases.sampling import generator_for, request_for, sample_record, stream_items
from sgsbatch.phases.task import Task
from sgsbatch.round.examples import band_of_rates
from sgsbatch.round.results import Problem, run_targets, solve_problems, verify_rates


def run(task: Task) -> None:
    cfg = task.cfg.guide
    prompts = load_prompts(task.cfg.prompts)
    problems = {p.problem_id: p for p in solve_problems(task.cfg, task.paths, task.round)}
    rates = verify_rates(task.cfg, task.paths, task.round)
    targets = {t.problem_id: t for t in run_targets(task.paths)}
    items = [problems[k] for k in sorted(band_of_rates(task.cfg, {k: v for k, v in rates.items()
                                                                  if not problems[k].is_target}))]

    def request(p: Problem) -> Request:
        msgs = guide_messages(targets[p.target_id].theorem, p.theorem, prompts)
        return request_for(task, p.problem_id, msgs, 1, max_tokens=cfg.max_tokens, temperature=cfg.temperature)

    def record(p: Problem, out: Generation) -> dict[str, Any]:
        s = out.samples[0]
        review = parse_review(s.text, prompts.guide_tags)
        return {"conjecture_id": p.problem_id, **sample_record(s), "ok": review.ok,
                "reason": review.reason, "relevance": review.relevance, "redundant": review.redundant,
                "complexity": review.complexity}

    stream_items(task, items, request, record, lambda: generator_for(task, "guide"))

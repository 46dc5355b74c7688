"""Guide phase: the frozen Guide reviews each in-band conjecture once (temperature 1.0).

The band needs every solve rate of the round, so each task derives it from the verify shards
(round/results.round_results) and takes its slice. Prompt and tags come from `[prompts]`; parsing
(review.py, as the reference) reads each score between the last begin tag and the last end tag;
failed parses are filled with the round's mean when the train phase reads them.
"""

from __future__ import annotations

from typing import Any

from sgsbatch.backends.generation import Generation, Request
from sgsbatch.phases.sampling import generator_for, request_for, sample_record, stream_items
from sgsbatch.phases.task import Task
from sgsbatch.prompts import guide_messages, load_prompts
from sgsbatch.review import parse_review
from sgsbatch.round.examples import in_band_conjectures
from sgsbatch.round.results import ProblemResult, round_results, run_targets


def run(task: Task) -> None:
    cfg = task.cfg.guide
    prompts = load_prompts(task.cfg.prompts)
    results = round_results(task.cfg, task.paths, task.round)
    targets = {t.problem_id: t for t in run_targets(task.paths)}
    items = [results[k] for k in sorted(in_band_conjectures(task.cfg, results))]

    def request(res: ProblemResult) -> Request:
        msgs = guide_messages(targets[res.problem.target_id].theorem, res.problem.theorem, prompts)
        return request_for(task, res.problem.problem_id, msgs, 1, max_tokens=cfg.max_tokens,
                           temperature=cfg.temperature)

    def record(res: ProblemResult, out: Generation) -> dict[str, Any]:
        s = out.samples[0]
        review = parse_review(s.text, prompts.guide_tags)
        return {"conjecture_id": res.problem.problem_id, **sample_record(s), "ok": review.ok,
                "reason": review.reason, "relevance": review.relevance, "redundant": review.redundant,
                "complexity": review.complexity}

    stream_items(task, items, request, record, lambda: generator_for(task, "guide"))

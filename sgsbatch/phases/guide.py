"""Guide phase: the frozen Guide reviews each in-band conjecture once (temperature 1.0).

The band needs every solve rate of the round, so each task derives it from the verify shards
(round/results.round_results) and takes its slice. Parsing keeps the number between the last pair
of each tag; failed parses are filled with the round's mean when the train phase reads them.
"""

from __future__ import annotations

from typing import Any

from sgsbatch.backends.generation import Generator
from sgsbatch.phases.sampling import generator_for, sample_record
from sgsbatch.phases.task import Task, run_items
from sgsbatch.prompts import guide_messages
from sgsbatch.review import parse_review
from sgsbatch.round.examples import in_band_conjectures
from sgsbatch.round.results import ProblemResult, round_results, run_targets


def run(task: Task) -> None:
    cfg = task.cfg.guide
    results = round_results(task.cfg, task.paths, task.round)
    targets = {t.problem_id: t for t in run_targets(task.paths)}
    band = in_band_conjectures(task.cfg, results)
    items = [results[k] for k in sorted(band)]
    gen: list[Generator] = []

    def process(res: ProblemResult) -> dict[str, Any]:
        msgs = guide_messages(targets[res.problem.target_id].theorem, res.problem.theorem)
        (out,) = gen[0].generate([msgs], 1, seed=task.seed(res.problem.problem_id), max_tokens=cfg.max_tokens,
                                 temperature=cfg.temperature, top_p=task.cfg.generation.top_p)
        s = out.samples[0]
        review = parse_review(s.text)
        return {"conjecture_id": res.problem.problem_id, **sample_record(s), "ok": review.ok, "reason": review.reason,
                "relevance": review.relevance, "redundant": review.redundant, "complexity": review.complexity}

    run_items(task, items, lambda r: r.problem.problem_id, process, lambda: gen.append(generator_for(task, "guide")))

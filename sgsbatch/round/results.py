"""Reading a round back from its shard files, the same way in every phase and at ingestion.

Later phases (solve needs the conjectures, guide and train need solve rates, train the reviews)
and ingestion all derive what they need from the finished shard files with these functions, so
the derivation (deduplication, ids, solve rates, filled reviews) is written once and is
deterministic. Not covered: selection thresholds and rewards (logic/selection.py, logic/rewards.py).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any

from sgsbatch.config.schema import Config
from sgsbatch.errors import DamagedFile
from sgsbatch.logic.review import Review, fill_failed
from sgsbatch.logic.selection import solve_rate
from sgsbatch.round.compaction import token_count
from sgsbatch.run.amendments import shards_at
from sgsbatch.run.paths import RunPaths
from sgsbatch.run.quarantine import quarantined_in
from sgsbatch.run.shards import (
    CorruptShard,
    atomic_write_text,
    jsonl_text,
    read_json,
    read_output,
    read_phase,
    read_phase_arrays,
)
from sgsbatch.run.token_arrays import RecordArrays
from sgsbatch.verification.verdict import VERIFIED


@dataclass(frozen=True)
class Problem:
    problem_id: str
    header: str
    theorem: str
    is_target: bool
    target_id: str  # the target itself, or the target a conjecture was made for


@dataclass
class ProblemResult:
    problem: Problem
    arrays: RecordArrays  # its prompt ids and each sample's token ids and logprobs, read when asked for
    samples: list[dict[str, Any]]  # solve sample + its verdict under "verdict"
    verified: int = 0
    rate: float = 0.0


@dataclass
class ConjectureFunnel:
    generated: int = 0
    well_formed: int = 0
    unique: int = 0
    rejected: dict[str, int] = field(default_factory=dict)


def run_targets(paths: RunPaths) -> list[Problem]:
    """The run's targets as frozen at launch (`targets.jsonl`), in file order."""
    out, n = [], 0
    with paths.targets.open(encoding="utf-8") as f:
        try:
            for line in f:
                n += 1
                row = json.loads(line)
                out.append(Problem(row["id"], row["header"], row["theorem"], True, row["id"]))
        except (ValueError, KeyError, TypeError) as e:  # JSON and UTF-8 errors, a row without its fields
            where = "" if isinstance(e, UnicodeDecodeError) else f"line {n}: "  # decoded in blocks: no line
            raise DamagedFile(paths.targets, f"{where}{type(e).__name__}: {e}") from None
    return out


def round_inputs(paths: RunPaths, r: int) -> dict[str, Any]:
    data: dict[str, Any] = read_json(paths.round_inputs(r))
    return data


def conjecture_id(r: int, statement: str) -> str:
    return f"c{r}-" + hashlib.sha256(statement.encode()).hexdigest()[:12]


def dedup_key(statement: str, rule: str = "exact") -> str:
    """The string two conjectures must share to be duplicates: the statement itself ("exact", the
    reference: `if conjecture.conjecture not in conjecture_str_set`, sgs/pipeline/step1_data_gen.py:449)
    or with runs of whitespace collapsed to one space ("whitespace")."""
    if rule == "exact":
        return statement
    if rule == "whitespace":
        return " ".join(statement.split())
    raise ValueError(f"dedup_key: rule must be 'exact' or 'whitespace', got {rule!r}")


def round_conjectures(
    cfg: Config, paths: RunPaths, r: int, targets: list[Problem]
) -> tuple[list[Problem], list[dict[str, Any]], ConjectureFunnel]:
    """(unique conjectures as problems, one status row per conjecture sample, funnel counts).

    Duplicates (`conjecturer.dedup`: exact string equality by default, as the reference) are dropped
    against every target and every earlier conjecture of the round, in target order then sample
    order. A conjecture inherits its target's header.
    """
    funnel = ConjectureFunnel()
    if "conjecture" not in cfg.phases_of_round(r):
        return [], [], funnel
    by_id = {t.problem_id: t for t in targets}
    rule = cfg.conjecturer.dedup
    seen = {dedup_key(t.theorem, rule) for t in targets}
    problems: list[Problem] = []
    rows: list[dict[str, Any]] = []
    for item in read_phase(paths.phase_dir(r, "conjecture"), shards_at(cfg, paths, r, "conjecture")):
        target = by_id[item["target_id"]]
        for k, s in enumerate(item["samples"]):
            funnel.generated += 1
            row = {"target_id": target.problem_id, "sample": k, "statement": s.get("statement"),
                   "tokens": token_count(s), "conjecture_id": None}
            if not s["ok"]:
                funnel.rejected[s["reason"]] = funnel.rejected.get(s["reason"], 0) + 1
                rows.append({**row, "status": "malformed", "reason": s["reason"]})
                continue
            funnel.well_formed += 1
            norm = dedup_key(s["statement"], rule)
            if norm in seen:
                rows.append({**row, "status": "duplicate", "reason": "duplicate"})
                continue
            seen.add(norm)
            funnel.unique += 1
            cid = conjecture_id(r, s["statement"])
            problems.append(Problem(cid, target.header, s["statement"], False, target.problem_id))
            rows.append({**row, "status": "ok", "reason": None, "conjecture_id": cid})
    return problems, rows, funnel


def conjecture_problems(cfg: Config, paths: RunPaths, r: int, targets: list[Problem]) -> list[Problem]:
    """The round's unique conjectures as problems (`round_conjectures`), derived once: the first reader
    after the conjecture phase writes them to `rounds/rNNNN/conjectures.jsonl` (atomically; every
    reader derives the same list), later readers (8 solve and 64 verify tasks, the train job) read
    that small file instead of parsing every conjecture sample with its token ids again."""
    if "conjecture" not in cfg.phases_of_round(r):
        return []
    cache = paths.round_dir(r) / "conjectures.jsonl"
    if cache.is_file():
        try:  # read whole or not at all: a damaged cache is derived again below, never half-read
            return [Problem(**row) for row in read_output(cache, compressed=False)]
        except (CorruptShard, TypeError):
            pass
    problems, _, _ = round_conjectures(cfg, paths, r, targets)
    atomic_write_text(cache, jsonl_text(asdict(p) for p in problems))
    return problems


def solve_problems(cfg: Config, paths: RunPaths, r: int) -> list[Problem]:
    """Every problem the Solver samples this round: the round's targets, then its conjectures."""
    targets = run_targets(paths)
    wanted = set(round_inputs(paths, r)["solve_targets"])
    return [t for t in targets if t.problem_id in wanted] + conjecture_problems(cfg, paths, r, targets)


def verify_rates(cfg: Config, paths: RunPaths, r: int) -> dict[str, float]:
    """Each problem's solve rate from the verify shards alone (the same rates as `round_results`,
    without reading the solve shards' samples)."""
    out = {}
    for v in read_phase(paths.phase_dir(r, "verify"), shards_at(cfg, paths, r, "verify")):
        verdicts = v["verdicts"]
        verified = sum(1 for x in verdicts if x["verdict"] == VERIFIED)
        out[v["key"]] = solve_rate(verified, len(verdicts)) if verdicts else 0.0
    return out


def round_results(cfg: Config, paths: RunPaths, r: int) -> dict[str, ProblemResult]:
    """Solve samples joined with their verdicts, with verified counts and solve rates; token arrays are
    read only where `ProblemResult.arrays` is asked (the train job's examples). In a round with a
    quarantined file, a solve item without its verdicts or its problem is left out (lost with the file)."""
    problems = {p.problem_id: p for p in solve_problems(cfg, paths, r)}
    verdicts = {v["key"]: v["verdicts"] for v in read_phase(paths.phase_dir(r, "verify"), shards_at(cfg, paths, r, "verify"))}
    out: dict[str, ProblemResult] = {}
    lost = None  # a solve item whose verdicts or problem went with a quarantined file (run/quarantine.py) is dropped
    for item, arrays in read_phase_arrays(paths.phase_dir(r, "solve"), shards_at(cfg, paths, r, "solve")):
        if item["key"] not in verdicts or item["key"] not in problems:
            lost = quarantined_in(paths, r) if lost is None else lost
            if lost:
                continue
        samples = [{**s, **v} for s, v in zip(item["samples"], verdicts[item["key"]], strict=True)]
        verified = sum(1 for s in samples if s["verdict"] == VERIFIED)
        # a compacted round (round/compaction.py) has prompt and sample token counts, no arrays
        out[item["key"]] = ProblemResult(problems[item["key"]], arrays, samples, verified,
                                         solve_rate(verified, len(samples)) if samples else 0.0)
    return out


def guide_reviews(cfg: Config, paths: RunPaths, r: int) -> dict[str, dict[str, Any]]:
    """Guide rows by conjecture id, failed parses filled with the round's mean (score under 'score')."""
    if "guide" not in cfg.phases_of_round(r):
        return {}
    rows = read_phase(paths.phase_dir(r, "guide"), shards_at(cfg, paths, r, "guide"))
    parsed = [Review(x["relevance"], x["redundant"], x["complexity"], x["ok"], x["reason"]) for x in rows]
    filled = fill_failed(parsed)
    return {x["conjecture_id"]: {**x, "score": f.score, "relevance": f.relevance, "redundant": f.redundant,
                                 "complexity": f.complexity, "filled": f.filled} for x, f in zip(rows, filled, strict=True)}

"""Verifier refusals: proofs the verifier's own rules refused, counted by reason, with what set them off.

The point: see at once when the verifier refuses an honest prover style by the thousand.
A *refusal* is a `failed` verdict that one of the verifier's own rules gave:

* a static check (verification/checks.py, `lean.static_verdict`): its first message is the static
  checks' note (`verdict.STATIC_NOTE`), so a check added later (`unknown_tactic`) counts without a
  list here; or, in a record without the note, its reason is a code of `vocabulary.REASONS`
  (`config`, `io`, `set_option`, `run_tac`, ...) that the verdict rules (rules.REASONS) do not share;
* the kernel re-check (recheck.py): reason `recheck_<code>` (`recheck_forbidden_constant`,
  `recheck_kernel_rejected`, ...); its system reasons are `error`, never counted.

Not refusals: Lean's own failures (`lean_error`, `failed_warning`, the audit's `axioms`,
`statement_missing`, `statement_changed`: the proof is wrong in Lean), timeouts, errors and
unextracted samples. One code is shared: `sorry` is the static check's (the proof's own `sorry`,
counted) and Lean's (a sorry in Lean's reply, rules.SORRY: Lean's failure, not counted).

The *item* of a refusal is what set it off, parsed from its message: the first `...` span of a
static check's detail (a tactic name such as `run_conv`, a name such as `IO.FS.readFile`, the
option of `set_option maxRecDepth`, the argument name of a `config`'s `(b := ...)`), or the constant
a re-check refusal names (`... mentions X`, `... the unsafe constant X`); None when it names none.

Where the counts go: each verify task's completion marker (`refusals`: `tally` over all of its
shard's proofs, a requeued task's earlier ones included), which `round_refusals` sums over the
round's finished shards for `status`, `watch` and the alarm (`alerts/verify_refusals`,
round/alarms.py); and the round's metrics at ingestion (`refusal_metrics`, from the attempts):
`verify/refused/<reason>` for every reason that occurred, `verify/refused_rate` (refusals over the
proofs that reached the verifier) and `verify/refused_items/<reason>/<item>` for the
`alerts.refused_items` most frequent items of each reason, which TensorBoard shows as scalars and
the report as a figure and a table. Not covered: why a rule refused (the verdict's messages, `sgsbatch proofs`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from sgsbatch.config.schema import Config
from sgsbatch.round import metrics as M
from sgsbatch.run.amendments import shards_at
from sgsbatch.run.paths import RunPaths
from sgsbatch.run.shards import shards
from sgsbatch.verification.rules import REASONS as LEAN_REASONS
from sgsbatch.verification.verdict import FAILED, STATIC_NOTE
from sgsbatch.verification.vocabulary import REASONS as STATIC_REASONS

RECHECK = "recheck_"  # pool.py reports a re-check refusal as `recheck_<code>` (recheck.REASONS)
RECHECK_NOTE = "kernel re-check: "  # pool.py's message before the checker's detail
ITEM_CHARS = 40  # an item longer than this is cut (the checks cut their tokens at 40 too)
_SPAN = re.compile(r"`([^`\n]+)`")
_CONFIG = re.compile(r"^\(\s*([^\s:=()]+)\s*:=")  # `(b := y - 1)` -> b
_RECHECK_ITEM = re.compile(r"\bmentions (\S+?)[,.;]?(?:\s|$)|\b(?:unsafe|partial) constant (\S+?)[,.;]?(?:\s|$)")
_METRIC_UNSAFE = re.compile(r"[^\w.\-]")  # TensorBoard tags keep letters, digits, _ . - (and / between parts)


def _static(reason: str, messages: list[Any]) -> bool:
    if messages and str(messages[0]).startswith(STATIC_NOTE):
        return True
    return reason in STATIC_REASONS and reason not in LEAN_REASONS


def item_of(reason: str, messages: Iterable[Any]) -> str | None:
    """What set refusal `reason` off, from the verdict's messages (module docstring); None if none is named."""
    texts = [str(m) for m in messages]
    if reason.startswith(RECHECK):
        for text in texts:
            if text.startswith(RECHECK_NOTE):
                m = _RECHECK_ITEM.search(text)
                return None if m is None else _cut(m.group(1) or m.group(2))
        return None
    note = next((t for t in texts if t.startswith(STATIC_NOTE)), texts[0] if texts else "")
    m = _SPAN.search(note)
    if m is None:
        return None
    span = " ".join(m.group(1).split())
    config = _CONFIG.match(span)
    if config is not None:
        return _cut(config.group(1))
    if span.startswith("set_option ") and len(span.split()) > 1:
        return _cut(span.split()[1])
    return _cut(span)


def _cut(text: str) -> str:
    return text if len(text) <= ITEM_CHARS else text[:ITEM_CHARS] + "..."


def refusal(verdict: Mapping[str, Any]) -> tuple[str, str | None] | None:
    """(reason, item) if `verdict` (a verify record's verdict: `verdict`, `verify_reason`, `messages`)
    is a refusal of the verifier's own rules, else None."""
    reason = verdict.get("verify_reason")
    if verdict.get("verdict") != FAILED or not reason:
        return None
    messages = list(verdict.get("messages") or [])
    if not (reason.startswith(RECHECK) or _static(reason, messages)):
        return None
    return reason, item_of(reason, messages)


def tally(verdicts: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """{"proofs": verdicts that reached the verifier (not `unextracted`), "refused": refusals,
    "by_reason": {reason: n}, "items": {reason: {item: n}}} over `verdicts`."""
    proofs = refused = 0
    by_reason: dict[str, int] = {}
    items: dict[str, dict[str, int]] = {}
    for v in verdicts:
        if v.get("verdict") == "unextracted":
            continue
        proofs += 1
        r = refusal(v)
        if r is None:
            continue
        refused += 1
        reason, item = r
        by_reason[reason] = by_reason.get(reason, 0) + 1
        if item is not None:
            per = items.setdefault(reason, {})
            per[item] = per.get(item, 0) + 1
    return {"proofs": proofs, "refused": refused, "by_reason": by_reason, "items": items}


def merge(tallies: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The sum of several `tally` results (a round's shards)."""
    out: dict[str, Any] = {"proofs": 0, "refused": 0, "by_reason": {}, "items": {}}
    for t in tallies:
        out["proofs"] += int(t["proofs"])
        out["refused"] += int(t["refused"])
        for reason, n in t["by_reason"].items():
            out["by_reason"][reason] = out["by_reason"].get(reason, 0) + int(n)
        for reason, per in t["items"].items():
            mine = out["items"].setdefault(reason, {})
            for item, n in per.items():
                mine[item] = mine.get(item, 0) + int(n)
    return out


def top_items(per: Mapping[str, int], k: int) -> list[tuple[str, int]]:
    """The k most frequent items, most frequent first (ties by name)."""
    return sorted(per.items(), key=lambda x: (-x[1], x[0]))[:k]


def metric_item(item: str) -> str:
    """An item as the last part of a metric name: characters TensorBoard drops from a tag become `_`."""
    return _METRIC_UNSAFE.sub("_", item)


def refusal_metrics(t: Mapping[str, Any], k: int) -> dict[str, float]:
    """A round's refusal metrics from its `tally` (module docstring); `k` items per reason."""
    out: dict[str, float] = {M.VERIFY_REFUSED_RATE: t["refused"] / t["proofs"] if t["proofs"] else 0.0}
    for reason, n in t["by_reason"].items():
        out[M.verify_refused(reason)] = float(n)
    for reason, per in t["items"].items():
        for item, n in top_items(per, k):
            name = M.verify_refused_item(reason, metric_item(item))
            out[name] = out.get(name, 0.0) + float(n)
    return out


def from_metrics(metrics: Mapping[str, float]) -> dict[str, Any]:
    """A round's refusals as stored in its metrics: {"rate", "by_reason", "items": {reason: [(item, n)]}}
    (the items as `metric_item` wrote them, most frequent first)."""
    by_reason = {name[len(M.REFUSED_PREFIX):]: int(v) for name, v in metrics.items()
                 if name.startswith(M.REFUSED_PREFIX)}
    items: dict[str, list[tuple[str, int]]] = {}
    for name, v in metrics.items():
        if name.startswith(M.REFUSED_ITEMS_PREFIX):
            reason, _, item = name[len(M.REFUSED_ITEMS_PREFIX):].partition("/")
            items.setdefault(reason, []).append((item, int(v)))
    return {"rate": metrics.get(M.VERIFY_REFUSED_RATE), "by_reason": by_reason,
            "items": {r: sorted(x, key=lambda p: (-p[1], p[0])) for r, x in items.items()}}


def round_refusals(cfg: Config, paths: RunPaths, r: int) -> dict[str, Any] | None:
    """Round r's refusals over its finished verify shards (their markers' `refusals`), with "round",
    "shards_done" (finished shards that counted) and "shards"; None when no finished shard counted
    (none finished yet, or shards written before the markers held the counts)."""
    count = shards_at(cfg, paths, r, "verify")
    found = [m["refusals"] for m in (s.meta() for s in shards(paths.phase_dir(r, "verify"), count) if s.is_done())
             if "refusals" in m]
    if not found:
        return None
    return {**merge(found), "round": r, "shards_done": len(found), "shards": count}


def summary_text(s: Mapping[str, Any], k: int) -> str:
    """One line: `4 of 120 proofs (3.3%): unknown_tactic 3 (run_conv x 2, foo x 1), io 1`; the
    reasons most frequent first, each with its k most frequent items."""
    if not s["refused"]:
        return f"none of {s['proofs']:,} proofs"
    parts = []
    for reason, n in sorted(s["by_reason"].items(), key=lambda x: (-x[1], x[0])):
        shown = top_items(s["items"].get(reason, {}), k)
        parts.append(f"{reason} {n:,}" + (f" ({', '.join(f'{i} x {c:,}' for i, c in shown)})" if shown else ""))
    return f"{s['refused']:,} of {s['proofs']:,} proofs ({s['refused'] / max(s['proofs'], 1):.1%}): " + ", ".join(parts)

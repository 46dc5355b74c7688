"""The report's section on a search Solver (solver.mode = "search"): its `search/*` metrics per round.

One table row per round with any: searches, found in tactic mode, verified by the verify phase, found
but not verified (tactic mode is not the verdict), expansions, mean depth of found proofs, Lean seconds,
generated tokens, engine calls (waves) and generated tokens per call. Not covered: figures (the
TensorBoard scalars have every `search/*` metric), runs without a search Solver (no section).
"""

from __future__ import annotations

from typing import Any

from sgsbatch.round import metrics as M

COLUMNS = (("searches", "searches", "{:,.0f}"), ("found", "found", "{:,.0f}"), ("verified", "verified", "{:,.0f}"),
           ("tactic_mode_rejected", "found, not verified", "{:,.0f}"), ("expansions", "expansions", "{:,.0f}"),
           ("depth_mean", "mean depth", "{:.2f}"), ("lean_cpu_s", "Lean s", "{:,.1f}"),
           ("generated_tokens", "generated tokens", "{:,.0f}"), ("waves", "engine calls", "{:,.0f}"),
           ("tokens_per_call", "tokens per call", "{:,.1f}"))


def search_section(metrics: dict[int, dict[str, float]]) -> tuple[str, dict[int, dict[str, float]]]:
    """The section's HTML ("" without search metrics) and its data: {round: {stat: value}}."""
    data = {r: {k: m[M.search(k)] for k, _, _ in COLUMNS if M.search(k) in m}
            for r, m in sorted(metrics.items()) if M.search("searches") in m}
    if not data:
        return "", data
    head = "".join(f"<th>{label}</th>" for _, label, _ in COLUMNS)

    def cell(row: dict[str, Any], key: str, fmt: str) -> str:
        return fmt.format(row[key]) if key in row else "not recorded"

    body = "".join(f"<tr><td>{r}</td>" + "".join(f"<td>{cell(row, k, f)}</td>" for k, _, f in COLUMNS) + "</tr>"
                   for r, row in data.items())
    return ("<h3>Tactic-level search per round</h3>"
            '<p class="note">Found proofs are judged by the verify phase; "found, not verified" counts the ones '
            "tactic mode accepted and verify did not.</p>"
            f"<table><tr><th>round</th>{head}</tr>{body}</table>"), data

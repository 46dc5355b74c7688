"""The report's section on held-out evaluation (`sgsbatch eval`, ops/evaluate.py): `eval/<set>/pass@<k>` per round.

One table row per evaluated round, one column per metric (sets and k in name order). Not covered: figures
(TensorBoard's tb/eval has every point), the per-problem results (`<run>/eval/r000N/<set>/results.jsonl`).
"""

from __future__ import annotations

from html import escape

from sgsbatch.round import metrics as M


def eval_section(metrics: dict[int, dict[str, float]]) -> tuple[str, dict[int, dict[str, float]]]:
    """The section's HTML ("" when no round was evaluated) and its data: {round: {metric: value}}."""
    data = {r: {k: v for k, v in sorted(m.items()) if k.startswith(M.EVAL_PREFIX)} for r, m in sorted(metrics.items())}
    data = {r: row for r, row in data.items() if row}
    if not data:
        return "", data
    names = sorted({k for row in data.values() for k in row})
    head = "".join(f"<th>{escape(n[len(M.EVAL_PREFIX):])}</th>" for n in names)
    body = "".join(f"<tr><td>{r}</td>" + "".join(f"<td>{row[n]:.3f}</td>" if n in row else "<td>not evaluated</td>"
                                                 for n in names) + "</tr>" for r, row in data.items())
    return ("<h3>Held-out evaluation (pass@k of the Solver after the round)</h3>"
            '<p class="note">Sets the run never trains on (eval.sets), checked by the run\'s verifier; '
            "`sgsbatch eval RUN --round N` adds a round.</p>"
            f"<table><tr><th>round</th>{head}</tr>{body}</table>"), data

"""One canary check's outcome (`Row`) and the table that ends `sgsbatch canary`: pure logic."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class Row:
    """What one check found: `fix` names the key or site setting to change when `ok` is false."""

    component: str  # environment | generation:<role> | guide | verification | training | slurm
    check: str
    ok: bool
    figure: str = ""  # the measured figure, in words with units
    fix: str = ""
    shape: str = ""  # the job shape it ran on (shapes.JobShape.label)
    # the figure's numbers a projection reads (views/plan.py: canary_figures), e.g. {"model_load_s": 95.2}
    measures: dict[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def from_dict(d: dict[str, Any]) -> Row:
        return Row(**{k: d.get(k, "") for k in ("component", "check", "figure", "fix", "shape")},
                   ok=bool(d.get("ok")), measures={k: float(v) for k, v in (d.get("measures") or {}).items()})


def failed(component: str, check: str, error: BaseException | str, fix: str) -> Row:
    """A check that could not run at all: its error's last line as the figure."""
    text = str(error).strip().splitlines()[-1:] if str(error).strip() else [type(error).__name__]
    name = f"{type(error).__name__}: " if isinstance(error, BaseException) else ""
    return Row(component, check, False, (name + text[0])[:400], fix)


def table(rows: Sequence[Row]) -> str:
    """The rows as an aligned text table, failures with their fix on the line below."""
    head = ("component", "check", "result", "figure")
    body = [(r.component, r.check, "ok" if r.ok else "FAIL", r.figure) for r in rows]
    widths = [min(max(len(x[i]) for x in [head, *body]), 48) for i in range(3)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(head[:3], widths, strict=True)) + "  " + head[3]]
    for r, cells in zip(rows, body, strict=True):
        lines.append("  ".join(c.ljust(w) for c, w in zip(cells[:3], widths, strict=True)) + "  " + cells[3])
        if not r.ok and r.fix:
            lines.append(" " * (sum(widths) + 6) + "-> change: " + r.fix)
    n_bad = sum(not r.ok for r in rows)
    lines.append(f"canary {'passed' if n_bad == 0 and rows else 'FAILED'}: {len(rows) - n_bad} of {len(rows)} "
                 "checks ok")
    return "\n".join(lines)

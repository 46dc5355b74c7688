"""What a pre-flight found: problems (each with the key to change) and what it checked, in one report.

Shared by the site's limits (preflight.py) and this machine's local checks (local_checks.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sgsbatch.config.schema import Config


@dataclass(frozen=True)
class Problem:
    key: str  # the config key to change (or "site" for what only the site can change)
    message: str

    def __str__(self) -> str:
        return f"{self.key}: {self.message}"


@dataclass
class Report:
    checked: list[str] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def text(self) -> str:
        if self.ok:
            return "pre-flight passed:\n" + "\n".join(f"  ok  {c}" for c in self.checked)
        return (f"pre-flight found {len(self.problems)} problem(s); nothing was submitted:\n"
                + "\n".join(f"  {p}" for p in self.problems))


def round_phases(cfg: Config) -> list[str]:
    """Every phase a round can have (round 0 and the later ones), in order."""
    out: list[str] = []
    for r in (0, 1):
        out += [p for p in cfg.phases_of_round(r) if p not in out]
    return out

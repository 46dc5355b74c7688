"""Reading the README and docs/ for their tests: the files, their prose without code blocks, the
repository paths and links they name, GitHub's heading anchors, and the README's "On your cluster"
sequence (the bash block between `<!-- cluster-sequence -->` markers)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
DOCS = REPO / "docs"
SEQUENCE_BEGIN, SEQUENCE_END = "<!-- cluster-sequence -->", "<!-- /cluster-sequence -->"
# trailing comments that mark a sequence line the local test does not run
INSTALL, SERVER = "# install", "# server"

TOP_DIRS = ("sgsbatch", "jobs", "tests", "bench", "docs", "slurm", "lean", "requirements", ".ci")
SUBPACKAGES = ("backends", "canary", "config", "models", "ops", "phases", "round", "run", "scheduling", "state",
               "verification")
# a path from the repository root: `jobs/sgs.toml`, tests/unit/test_x.py, sgsbatch/run/lock.py
ROOT_PATH = re.compile(r"(?<![\w./~$-])((?:" + "|".join(re.escape(d) for d in TOP_DIRS) + r")/[\w./-]*)")
# a module of the package named from its subpackage, with or without an attribute:
# round/compaction.py, run/amendments.config_at
PACKAGE_PATH = re.compile(r"(?<![\w./~$-])((?:" + "|".join(SUBPACKAGES) + r")/\w+\.\w+)")
PLACEHOLDER = re.compile(r"[<>*{}]|NNNN|XXXXX|\.\.\.")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def doc_files() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md"))]


def without_code_blocks(text: str) -> str:
    """The text with fenced code blocks blanked (their lines kept empty, so line numbers hold)."""
    out, fenced = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            out.append("")
            continue
        out.append("" if fenced else line)
    return "\n".join(out)


def named_paths(text: str) -> set[str]:
    """Repository paths a text names (code blocks included), placeholders (`<run>`, `rNNNN`) left out."""
    found = set()
    for rx in (ROOT_PATH, PACKAGE_PATH):
        for m in rx.finditer(text):
            token = m.group(1).rstrip(".,:;")
            if not PLACEHOLDER.search(text[m.start():m.end() + 1]) and token:
                found.add(token)
    return found


def path_problem(token: str) -> str | None:
    """Why `token` names nothing in the repository (None when it does)."""
    for base in (REPO, REPO / "sgsbatch"):
        if (base / token).exists():
            return None
    m = re.fullmatch(r"(.+)\.(\w+)", token)  # module.attribute
    if m:
        for base in (REPO, REPO / "sgsbatch"):
            module = base / f"{m.group(1)}.py"
            if module.is_file():
                src = module.read_text(encoding="utf-8")
                attr = re.escape(m.group(2))
                if re.search(rf"^\s*(def|class)\s+{attr}\b|^{attr}\s*[:=]", src, re.M):
                    return None
                return f"{module.relative_to(REPO)} defines no {m.group(2)}"
    return "no such file or directory"


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = without_code_blocks(path.read_text(encoding="utf-8"))
    return {slug(m.group(1)) for m in re.finditer(r"^#{1,6} (.+)$", text, re.M)}


def links(path: Path) -> list[str]:
    return [m.group(1) for m in LINK.finditer(without_code_blocks(path.read_text(encoding="utf-8")))]


@dataclass(frozen=True)
class Sequence:
    """The README's cluster sequence: its variables (the assignments at its top), its lines."""

    variables: dict[str, str]
    lines: list[str]  # every line of the block, comments and blank lines included

    def commands(self) -> list[str]:
        """The lines that run something, in order (comment-only and blank lines dropped)."""
        return [line for line in self.lines if line.strip() and not line.lstrip().startswith("#")]


ASSIGNMENT = re.compile(r"^(?:export )?([A-Z_][A-Z0-9_]*)=(\S*)")


def cluster_sequence(readme: Path = README) -> Sequence:
    text = readme.read_text(encoding="utf-8")
    assert text.count(SEQUENCE_BEGIN) == 1 and text.count(SEQUENCE_END) == 1, "one marked cluster sequence"
    block = text.split(SEQUENCE_BEGIN, 1)[1].split(SEQUENCE_END, 1)[0].strip().splitlines()
    assert block[0] == "```bash" and block[-1] == "```", "the sequence is one ```bash block between its markers"
    lines = block[1:-1]
    variables = {}
    for line in lines:
        m = ASSIGNMENT.match(line)
        if m:
            variables[m.group(1)] = m.group(2)
    return Sequence(variables, lines)


def marked(line: str, marker: str) -> bool:
    return line.rstrip().endswith(marker)

"""Every function of the package is at most MAX_LINES long (its body from `def` to its last line, decorators
not counted); ruff's C901 holds their complexity to 15 (pyproject.toml). A longer function is split into
named steps, not waved through here."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[2] / "sgsbatch"
MAX_LINES = 80


def long_functions(root: Path, limit: int = MAX_LINES) -> list[str]:
    """`path:line name (N lines)` of every function or method over `limit` lines under `root`."""
    out = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                n = (node.end_lineno or node.lineno) - node.lineno + 1
                if n > limit:
                    out.append(f"{path.relative_to(root.parent)}:{node.lineno} {node.name} ({n} lines)")
    return out


def test_no_function_is_over_the_limit() -> None:
    assert long_functions(PKG) == []


def test_the_check_finds_a_long_function(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_LINES))
    (pkg / "m.py").write_text(f"def short():\n    return 1\n\n\ndef long():\n{body}\n")
    assert long_functions(pkg) == [f"pkg/m.py:5 long ({MAX_LINES + 1} lines)"]

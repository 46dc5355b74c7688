"""The package's layering: no import cycles, no upward imports, the state store a leaf.

Every `import` and `from ... import` of an `sgsbatch` module counts, at module level or inside a
function (a lazy import is still a dependency). `LAYERS` lists the layers, lowest first: a module
may import its own layer and the ones below it. docs/design.md describes the same.
"""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[2] / "sgsbatch"

LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors", "checkout"),  # foundations
    ("config", "logic"),  # config + the pure SGS logic (sgsbatch/logic/)
    ("state",),  # the state store: a leaf
    ("run",),  # run directory, shard files, the run handle, checkpoint protocol
    ("backends", "models", "verification", "search"),  # generation/training engines, tiny models, Lean, tactic search
    ("round",),  # what happens between phases
    ("phases",),  # one module per phase
    ("scheduling",),  # worker, supervisor, executors, the chain
    ("canary",),  # the site canary: every real component, in jobs of the run's own shapes
    ("views",),  # the read side: status, plan, report, logs ... (reads a run, changes nothing)
    ("ops",),  # operator commands that change a run
    ("cli",),  # every click command, and only there
)
PURE = ("logic",)
# a phase neither writes the database nor submits jobs
PHASE_FORBIDDEN = ("sgsbatch.state.db", "sgsbatch.state.ingest", "sgsbatch.round.lifecycle")


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def import_graph(root: Path) -> dict[str, set[str]]:
    """{module: the package modules it imports}; `from pkg import mod` resolves to the submodule."""
    pkg = root.name
    files = {module_name(p, root): p for p in root.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for mod, path in files.items():
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                deps.update(a.name for a in node.names if a.name.split(".")[0] == pkg)
            elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == pkg:
                for a in node.names:
                    sub = f"{node.module}.{a.name}"
                    deps.add(sub if sub in files else node.module)
        graph[mod] = {d for d in deps if d != mod and not mod.startswith(d + ".")}  # a package's own __init__
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def layer_of(mod: str) -> int:
    top = mod.split(".")[1] if "." in mod else ""
    for i, names in enumerate(LAYERS):
        if top in names:
            return i
    raise AssertionError(f"{mod}: not in any layer of tests/unit/test_layers.py; add its top-level name there")


def violations(graph: dict[str, set[str]]) -> list[str]:
    bad = []
    for mod, deps in sorted(graph.items()):
        if mod == "sgsbatch":
            continue
        top = mod.split(".")[1]
        for dep in sorted(deps):
            if dep == "sgsbatch":
                continue
            if layer_of(dep) > layer_of(mod):
                bad.append(f"{mod} imports {dep} (a higher layer)")
            if top == "state" and not dep.startswith("sgsbatch.state"):
                bad.append(f"{mod} imports {dep} (the state store imports nothing of the package)")
            if top in PURE and dep.split(".")[1] not in (*PURE, "errors"):
                bad.append(f"{mod} imports {dep} (pure SGS logic imports only pure logic and errors)")
            if top == "phases" and dep.startswith(PHASE_FORBIDDEN):
                bad.append(f"{mod} imports {dep} (a phase never writes the database or ends a round)")
    return bad


def test_the_package_has_no_import_cycle() -> None:
    assert cycles(import_graph(PKG)) == []


def test_no_module_imports_a_higher_layer() -> None:
    graph = import_graph(PKG)
    assert {m.split(".")[1] for m in graph if "." in m} <= {n for layer in LAYERS for n in layer} | {"__main__"}
    assert violations(graph) == []


def test_the_checker_finds_cycles_and_upward_imports(tmp_path: Path) -> None:
    """The checks above can fail: a small package with one cycle and two wrong-way imports."""
    pkg = tmp_path / "sgsbatch"
    for rel, body in {
        "__init__.py": "",
        "state/__init__.py": "",
        "state/db.py": "from sgsbatch.round import lifecycle\n",  # the leaf reaches up
        "round/__init__.py": "",
        "round/lifecycle.py": "def f():\n    from sgsbatch.round.results import x\n",
        "round/results.py": "import sgsbatch.round.lifecycle\nx = 1\n",  # cycle with lifecycle (lazy import)
        "phases/__init__.py": "",
        "phases/solve.py": "from sgsbatch.views import status\n",  # upward
        "ops/__init__.py": "",
        "views/status.py": "",
    }.items():
        (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
        (pkg / rel).write_text(body)
    graph = import_graph(pkg)
    assert cycles(graph) == [["sgsbatch.round.lifecycle", "sgsbatch.round.results"]]
    bad = violations(graph)
    assert "sgsbatch.state.db imports sgsbatch.round.lifecycle (a higher layer)" in bad
    assert any(b.startswith("sgsbatch.state.db imports sgsbatch.round.lifecycle (the state store") for b in bad)
    assert "sgsbatch.phases.solve imports sgsbatch.views.status (a higher layer)" in bad


def test_click_is_imported_only_by_the_command_line_package() -> None:
    """The CLI is one package (sgsbatch/cli/): the read side and the operator commands take callbacks and
    return text or data; they never import click."""
    users = sorted(str(p.relative_to(PKG.parent)) for p in PKG.rglob("*.py")
                   if any(isinstance(n, ast.Import | ast.ImportFrom)
                          and "click" in ([a.name.split(".")[0] for a in n.names] if isinstance(n, ast.Import)
                                          else [(n.module or "").split(".")[0]])
                          for n in ast.walk(ast.parse(p.read_text(encoding="utf-8")))))
    assert users and all(u.startswith("sgsbatch/cli/") for u in users), users

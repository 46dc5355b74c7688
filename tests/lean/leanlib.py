"""Shared pieces of the Lean verifier tests: the stand-in REPL, the transcripts' place, pool settings.

A module of its own (not conftest.py) so test files can import it by a unique name.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from sgsbatch.config.schema import VerificationConfig
from sgsbatch.verification.lean import resolve_project_dir
from sgsbatch.verification.pool import PoolSettings, ReplPool
from sgsbatch.verification.verdict import ProofJob

HERE = Path(__file__).resolve().parent
FAKE = HERE / "fake_repl.py"
FAKE_CHECKER = HERE / "fake_checker.py"
TRANSCRIPTS = Path(__file__).resolve().parents[2].parent / "shared" / "lean-repl-v4.15.0"
FAKE_COMMAND = (sys.executable, str(FAKE))
FAKE_CHECKER_COMMAND = (sys.executable, str(FAKE_CHECKER))
# Where `./setup.sh --lean` builds the real REPL and the kernel checker (the default config's paths).
_CFG = VerificationConfig()
REAL_REPL = resolve_project_dir(_CFG.project_dir) / _CFG.repl_command[-1]
REAL_CHECKER = resolve_project_dir(_CFG.project_dir) / _CFG.checker_command[-1]


def need_real_lean(checker: bool = False) -> None:
    """Skip, saying what is missing, unless `lake`, the built REPL (and with `checker` the kernel checker) exist."""
    if shutil.which("lake") is None:
        pytest.skip("real Lean tests need `lake` on PATH: install with ./setup.sh --lean")
    if not REAL_REPL.exists():
        pytest.skip(f"real Lean tests need the REPL built at {REAL_REPL}: run ./setup.sh --lean")
    if checker and not REAL_CHECKER.exists():
        pytest.skip(f"the kernel re-check is not built at {REAL_CHECKER}: run ./setup.sh --lean")


def settings(tmp_path: Path, **kw: object) -> PoolSettings:
    base: dict[str, object] = dict(command=FAKE_COMMAND, project_dir=tmp_path, processes=2, timeout_s=1.5,
                                   header_timeout_s=10.0, memory_limit_mb=0, max_proofs=200, retries=1,
                                   kernel_recheck=True, checker_command=FAKE_CHECKER_COMMAND)
    base.update(kw)
    return PoolSettings(**base)  # type: ignore[arg-type]


def run_pool(tmp_path: Path, jobs: list[ProofJob], **kw: object) -> dict[str, tuple[str, str | None, list[str]]]:
    """Every job through a pool of the stand-ins: key -> (verdict, reason, messages)."""
    pool = ReplPool(settings(tmp_path, **kw))
    try:
        return {j.key: (v.verdict, v.reason, v.messages) for j, v, _ in pool.run(jobs)}
    finally:
        pool.close()

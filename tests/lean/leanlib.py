"""Shared pieces of the Lean verifier tests: the stand-in REPL, the transcripts' place, pool settings.

A module of its own (not conftest.py) so test files can import it by a unique name.
"""

from __future__ import annotations

import sys
from pathlib import Path

from sgsbatch.verification.pool import PoolSettings, ReplPool
from sgsbatch.verification.verdict import ProofJob

HERE = Path(__file__).resolve().parent
FAKE = HERE / "fake_repl.py"
FAKE_CHECKER = HERE / "fake_checker.py"
TRANSCRIPTS = Path(__file__).resolve().parents[2].parent / "shared" / "lean-repl-v4.15.0"
FAKE_COMMAND = (sys.executable, str(FAKE))
FAKE_CHECKER_COMMAND = (sys.executable, str(FAKE_CHECKER))


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

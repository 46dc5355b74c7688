"""Issue 26, classes 3 and 6: the REPL's process tree is hostile after it has seen a proof.

Real parts: the seccomp filter (process_filter.py) installed by the real kernel, the real
bubblewrap, real processes. The stand-in REPL (fake_repl.py) plays a proof whose code starts a
process (FAKE_DAEMON), leaves a writer that rewrites every pickle it finds (FAKE_LEAVE_WRITER), or
prints replies of its own (FAKE_FORGE_TWO). Each test also runs the attack without the defence,
to show that it works there (the test can fail).
"""

from __future__ import annotations

import platform
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from leanlib import settings
from test_lean_sandbox import Attack, _probes, _run, _wait_gone, attack, needs_bwrap

from sgsbatch.verification import process_filter as F
from sgsbatch.verification.pool import ReplPool
from sgsbatch.verification.verdict import ERROR, VERIFIED, ProofJob

__all__ = ["attack"]  # the fixture, shared with test_lean_sandbox.py
needs_filter = pytest.mark.skipif(platform.machine() not in F.ARCHES,
                                  reason=f"no process filter for {platform.machine()}")
PROBE = """
import os, subprocess, threading
t = threading.Thread(target=lambda: print("thread: done")); t.start(); t.join()
for what, act in [("spawn", lambda: subprocess.run(["true"])), ("fork", os.fork),
                  ("exec", lambda: os.execv("/bin/true", ["true"]))]:
    try:
        act(); print(what + ": done")
    except OSError as e:
        print(what + ": blocked", e.errno)
"""


@needs_filter
def test_the_filter_allows_threads_and_denies_processes_for_real() -> None:
    argv = F.filtered([sys.executable, "-c", PROBE])
    out = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=60).stdout.split("\n")
    assert "thread: done" in out and "spawn: blocked 1" in out and "fork: blocked 1" in out, out
    assert "exec: blocked 1" in out, out  # only the launcher's own exec passes
    plain = subprocess.run([sys.executable, "-c", PROBE.replace('("exec"', '("no-exec"')], capture_output=True,
                           text=True, check=True, timeout=60).stdout
    assert "spawn: done" in plain, plain  # the same probe without the filter


def test_the_program_judges_clone_by_its_flags() -> None:
    code = F.program("x86_64", 0x1234_5678_9ABC)
    ops = [struct.unpack("<HBBI", code[i : i + 8]) for i in range(0, len(code), 8)]
    assert [o[0] for o in ops if o[3] == F.CLONE_THREAD] == [0x45], "clone passes only with CLONE_THREAD set"
    assert any(o[3] == F.RET_ERRNO | F.ENOSYS for o in ops), "clone3 answers ENOSYS (glibc falls back to clone)"
    assert any(o[3] == 0x56789ABC and o[0] == 0x15 for o in ops) and any(o[3] == 0x1234 for o in ops)
    with pytest.raises(F.FilterUnavailable, match="'s390x'.*verification.process_filter = false"):
        F.program("s390x", 0)


def test_the_launcher_goes_after_lake_env() -> None:
    assert F.filtered(["lake", "env", "repl"], python="py")[:4] == ["lake", "env", "py", F.__file__]
    assert F.filtered(["/x/repl"], python="py") == ["py", F.__file__, "/x/repl"]


@needs_bwrap
@needs_filter
@pytest.mark.parametrize("process_filter", [True, False])
def test_a_proof_leaves_no_process_behind(attack: Attack, process_filter: bool) -> None:
    # Proof 1 leaves a writer that rewrites every pickle under the scratch; proof 2 is honest.
    pool = ReplPool(attack.pool_settings("bwrap", process_filter=process_filter, kernel_recheck=True))
    try:
        first, second = _run(pool, "FAKE_LEAVE_WRITER FAKE_DAEMON", "simp")
    finally:
        pool.close()
    probes = _probes(first)
    if process_filter:
        assert probes["writer"].startswith("blocked (PermissionError") and probes["daemon"].startswith("blocked")
        assert second.verdict == VERIFIED, second
    else:  # the attack is real: both processes started, and the writer races the next proof's pickle
        assert probes["writer"] == "done" and probes["daemon"] == "done", probes
    assert _wait_gone(attack.token) == []


def test_pickles_go_to_unpredictable_paths_and_reach_the_checker_as_private_copies(
        tmp_path: Path, fake_env: Path) -> None:
    jobs = [ProofJob(f"p{i}", "import Mathlib", f"theorem t{i} (x : ℕ) : x + 0 = x := by", "\n  simp")
            for i in range(3)]
    pool = ReplPool(settings(tmp_path, processes=1))
    try:
        assert all(v.verdict == VERIFIED for _, v, _ in pool.run(jobs))
        slot = pool._slots[0]  # noqa: SLF001 (white box: where the files went)
        scratch, checker_dir = slot.scratch, slot.checker_dir
        assert scratch is not None and checker_dir is not None
        assert list(scratch.iterdir()) == [] and list(checker_dir.iterdir()) == []  # nothing left after use
    finally:
        pool.close()
    paths = [Path(line.split(" ", 2)[2]) for line in fake_env.read_text().splitlines() if line.startswith("pickle ")]
    assert len(paths) == 3 and len({p.parent.name for p in paths}) == 3
    assert all(p.parent.parent == scratch and len(p.parent.name) == 32 for p in paths), paths
    assert not checker_dir.is_relative_to(scratch)


def test_surplus_output_is_described_not_quoted(tmp_path: Path) -> None:
    job = ProofJob("forge", "import Mathlib", "theorem secret_t (x : ℕ) : x + 0 = x := by", "\n  simp -- FAKE_FORGE_TWO")
    pool = ReplPool(settings(tmp_path, processes=1, retries=0))
    try:
        ((_, verdict, _),) = list(pool.run([job]))
    finally:
        pool.close()
    assert verdict.verdict == ERROR, verdict
    text = " ".join(verdict.messages)
    assert "bytes, sha256" in text and "depends on axioms" not in text and "secret_t" not in text, text


def test_the_config_turns_the_filter_on(tmp_path: Path) -> None:
    from sgsbatch.config.schema import VerificationConfig

    assert VerificationConfig().process_filter is True
    argv = settings(tmp_path, process_filter=True).make_sandbox().wrap(["lake", "env", "repl"], cwd=tmp_path,
                                                                        scratch=tmp_path)
    assert argv[:4] == ["lake", "env", sys.executable, F.__file__]


def test_the_verifier_refuses_to_start_where_no_filter_exists(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from sgsbatch.config.schema import VerificationConfig
    from sgsbatch.verification.lean import LeanVerifier

    monkeypatch.setattr(platform, "machine", lambda: "s390x")
    vcfg = VerificationConfig(repl_command=(sys.executable, "-c", "pass"), project_dir=str(tmp_path),
                              kernel_recheck=False, sandbox="none")
    with pytest.raises(ValueError, match="'s390x' architecture.*verification.process_filter = false"):
        LeanVerifier(vcfg, processes=1)
    LeanVerifier(VerificationConfig(repl_command=(sys.executable, "-c", "pass"), project_dir=str(tmp_path),
                                    kernel_recheck=False, sandbox="none", process_filter=False), processes=1).close()

"""Issue 26, resources per slot: the scratch's size cap, the file-size, CPU and task limits (limits.py).

Real parts: bubblewrap, the kernel's tmpfs and rlimits, the process filter. The stand-in REPL
(fake_repl.py) plays a proof that fills its scratch (FAKE_FILL), writes one big file
(FAKE_BIG_FILE) or floods stderr (FAKE_STDERR_FLOOD), spins the CPU (FAKE_BURN), starts threads
(FAKE_THREADS) or mounts an uncapped tmpfs in a namespace of its own (FAKE_USERNS). Each attack
also runs without the limit, to show that it works there. No test depends on how long anything takes.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest
from leanlib import FAKE
from test_lean_sandbox import PASS, Attack, _probes, _run, _wait_gone, attack, needs_bwrap

from sgsbatch.config.loading import from_toml_text
from sgsbatch.config.schema import Config, VerificationConfig
from sgsbatch.config.validation import semantic_errors
from sgsbatch.errors import ConfigError
from sgsbatch.verification import limits as L
from sgsbatch.verification import process_filter as F
from sgsbatch.verification.pool import PoolSettings, ReplPool
from sgsbatch.verification.sandbox import Sandbox, probe
from sgsbatch.verification.verdict import ERROR, FAILED, VERIFIED

__all__ = ["attack"]  # the fixture, shared with test_lean_sandbox.py
needs_filter = pytest.mark.skipif(platform.machine() not in F.ARCHES,
                                  reason=f"no process filter for {platform.machine()}")
LIMIT_PASS = (*PASS, "FAKE_FILL_MB", "FAKE_THREADS_N")


def _host_bytes(root: Path) -> int:
    """Bytes of the regular files under `root` on the host (what a proof left on the host disk)."""
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file() and not p.is_symlink())


@needs_bwrap
@pytest.mark.parametrize("capped", [True, False])
def test_the_scratch_cap_keeps_a_proof_off_the_host_disk(attack: Attack, capped: bool,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    # Proof 1 writes 1 MB files until a write fails; proof 2 is honest and needs its pickle written
    # and read back through the sandbox (the kernel re-check).
    monkeypatch.setenv("FAKE_FILL_MB", "24")
    pool = ReplPool(attack.pool_settings("bwrap", scratch_mb=8 if capped else 0, sandbox_pass_env=LIMIT_PASS))
    try:
        fill, honest = _run(pool, "FAKE_FILL", "simp")
        on_host = _host_bytes(attack.scratch_parent)  # while the processes still live
    finally:
        pool.close()
    if capped:
        assert (fill.verdict, fill.reason) == (FAILED, "lean_error"), fill
        assert "No space left on device after" in _probes(fill)["fill"], fill
        assert int(_probes(fill)["fill"].rsplit("after ", 1)[1].split()[0]) <= 8
        assert on_host == 0, "nothing of the proof's files is on the host disk"
    else:  # the attack is real: 24 MB on the host disk
        assert _probes(fill)["fill"] == "done", fill
        assert on_host >= 24 << 20
    assert honest.verdict == VERIFIED, honest  # a full scratch costs the next proof a retry at most
    assert list(attack.scratch_parent.iterdir()) == [] and _wait_gone(attack.token) == []


@needs_bwrap
def test_pickles_go_through_the_sandboxed_scratch(attack: Attack) -> None:
    # The pickle is written in the scratch tmpfs, read through /proc, checked by the stand-in checker.
    pool = ReplPool(attack.pool_settings("bwrap", scratch_mb=8, sandbox_pass_env=LIMIT_PASS))
    try:
        verdicts = _run(pool, "simp FAKE_SCRATCH", "simp FAKE_LIST_SCRATCH")
        slot = pool._slots[0]  # noqa: SLF001 (white box: where the files went)
        assert slot.scratch is not None and list(slot.scratch.iterdir()) == [], "the host directory stays empty"
    finally:
        pool.close()
    assert [v.verdict for v in verdicts] == [VERIFIED, VERIFIED], verdicts
    assert _probes(verdicts[1])["scratch holds"] == "probe.txt", "the first pickle's directory is gone after use"
    assert all("kernel re-check: ok" in " ".join(v.messages) for v in verdicts), verdicts


@needs_bwrap
@pytest.mark.parametrize("limited", [True, False])
def test_the_file_size_limit_bounds_stderr_on_the_host(attack: Attack, limited: bool,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    # The REPL's stderr is a file of the pool on the host disk, outside every tmpfs cap.
    monkeypatch.setenv("FAKE_FILL_MB", "24")
    pool = ReplPool(attack.pool_settings("bwrap", scratch_mb=4 if limited else 0, retries=0, kernel_recheck=False,
                                         sandbox_pass_env=LIMIT_PASS))
    try:
        (verdict,) = _run(pool, "FAKE_STDERR_FLOOD")
    finally:
        pool.close()
    if limited:
        assert (verdict.verdict, verdict.reason) == (ERROR, L.FILE_SIZE), verdict
        assert "verification.scratch_mb" in " ".join(verdict.messages)
    else:
        assert _probes(verdict)["stderr"] == "done", verdict
    assert _wait_gone(attack.token) == []


@pytest.mark.parametrize("limited", [True, False])
def test_without_a_sandbox_the_file_size_limit_bounds_each_file(attack: Attack, limited: bool,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_FILL_MB", "24")
    pool = ReplPool(attack.pool_settings("none", scratch_mb=4 if limited else 0, retries=0, kernel_recheck=False))
    try:
        (verdict,) = _run(pool, "FAKE_BIG_FILE")
        on_host = _host_bytes(attack.scratch_parent)
    finally:
        pool.close()
    if limited:
        assert (verdict.verdict, verdict.reason) == (ERROR, L.FILE_SIZE), verdict
        assert on_host <= 4 << 20
    else:
        assert _probes(verdict)["big file"] == "done" and on_host >= 24 << 20


@needs_bwrap
def test_the_cpu_limit_ends_a_spinning_proof(attack: Attack) -> None:
    # RLIMIT_CPU = ceil(0.02 * (10 + 1 * 60)) = 2 CPU seconds; the wall-clock timeout (60 s) is only a safety net.
    s = attack.pool_settings("bwrap", cpu_time_factor=0.02, header_timeout_s=10.0, timeout_s=60.0, max_proofs=1,
                             retries=0, kernel_recheck=False)
    assert s.limits().cpu_s == 2
    pool = ReplPool(s)
    try:
        (verdict,) = _run(pool, "FAKE_BURN")
    finally:
        pool.close()
    assert (verdict.verdict, verdict.reason) == (ERROR, L.CPU), verdict
    assert "verification.cpu_time_factor" in " ".join(verdict.messages)
    assert _wait_gone(attack.token) == []


@needs_bwrap
@needs_filter
@pytest.mark.parametrize("process_filter", [True, False])
def test_no_namespace_of_its_own_for_an_uncapped_tmpfs(attack: Attack, process_filter: bool) -> None:
    pool = ReplPool(attack.pool_settings("bwrap", scratch_mb=8, process_filter=process_filter, kernel_recheck=False))
    try:
        (verdict,) = _run(pool, "FAKE_USERNS")
    finally:
        pool.close()
    probe = _probes(verdict)["userns"]
    if process_filter:
        assert probe.startswith("blocked (PermissionError: [Errno 1] unshare"), probe
    else:  # the hole the filter closes: a tmpfs without the cap, mounted over the scratch
        assert probe == "done", probe


NPROC_SCRIPT = """
import json, os, sys
from pathlib import Path
from sgsbatch.verification.pool import PoolSettings, ReplPool
from sgsbatch.verification.verdict import ProofJob
work = Path(sys.argv[1])
s = PoolSettings(command=(sys.executable, sys.argv[2]), project_dir=work, processes=1, timeout_s=60.0,
                 sandbox="bwrap", process_filter=True, process_limit=int(sys.argv[3]),
                 sandbox_pass_env=("FAKE_THREADS_N",), scratch_parent=work / "scratch")
pool = ReplPool(s)
try:
    ((_, v, _),) = list(pool.run([ProofJob("t", "import Mathlib", "theorem t : True := by", "\\n  FAKE_THREADS")]))
finally:
    pool.close()
print(json.dumps([v.verdict, v.messages]))
"""


def _nproc_problem() -> str | None:
    if os.getuid() != 0 or shutil.which("setpriv") is None:
        return "needs root and setpriv (to run the pool as an unprivileged user: the kernel exempts root)"
    return L.nproc_applies("bwrap", True, uid=65534)


@needs_bwrap
@needs_filter
@pytest.mark.skipif(_nproc_problem() is not None, reason=f"RLIMIT_NPROC cannot be shown here: {_nproc_problem()}")
@pytest.mark.parametrize("limit", [16, 0])
def test_the_task_limit_counts_the_sandbox_only(limit: int) -> None:
    # The pool runs as uid 65534 (a user the kernel does not exempt); in the sandbox the launcher
    # sets RLIMIT_NPROC, counted in the sandbox's own user namespace: the proof's threads stop there.
    python = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
    work = Path(tempfile.mkdtemp(prefix="sgsbatch-nproc-", dir="/var/tmp"))
    try:
        work.chmod(0o777)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "FAKE_THREADS_N": "64",
               "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
        out = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", python, "-c",
                              textwrap.dedent(NPROC_SCRIPT), str(work), str(FAKE), str(limit)],
                             capture_output=True, text=True, env=env, check=False, timeout=300)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    assert out.returncode == 0, out.stderr[-2000:]
    verdict, messages = json.loads(out.stdout.strip().splitlines()[-1])
    started = int(next(m for m in messages if "probe threads:" in m).split("probe threads: ")[1].split()[0])
    if limit:
        assert 0 < started < limit, messages
    else:
        assert started == 64, messages


# ------------------------------------------------------------------ the pieces, without processes
def test_wrap_puts_a_capped_tmpfs_on_the_scratch(tmp_path: Path) -> None:
    scratch = tmp_path / "s"
    argv = " ".join(Sandbox("bwrap", scratch_mb=8).wrap(["repl"], cwd=tmp_path, scratch=scratch, environ={}))
    assert f"--size {8 << 20} --tmpfs {scratch}" in argv and f"--bind {scratch}" not in argv
    checker = " ".join(Sandbox("bwrap", scratch_mb=8).wrap(["c"], cwd=tmp_path, scratch=scratch, writable=False,
                                                           environ={}))
    assert f"--ro-bind {scratch} {scratch}" in checker, "the checker reads the pool's own directory"
    assert Sandbox("bwrap").scratch_view(1, scratch) == scratch and Sandbox("none", scratch_mb=8).scratch_view(
        1, scratch) == scratch


def test_the_launcher_sets_the_task_limit_inside(tmp_path: Path) -> None:
    wrapped = Sandbox("bwrap", process_limit=16).wrap(["lake", "env", "repl"], cwd=tmp_path, scratch=tmp_path,
                                                      environ={})
    assert wrapped[wrapped.index("--") + 1 :] == ["lake", "env", sys.executable, F.__file__, "--nproc=16",
                                                  "--no-filter", "repl"], wrapped
    assert Sandbox("bwrap", process_limit=16, user_namespace=False).nproc == 0
    assert Sandbox("none", process_limit=16).wrap(["repl"], cwd=tmp_path, scratch=tmp_path) == ["repl"]
    assert F._options(["--nproc=5", "--no-filter", "repl", "--x"]) == (5, False, ["repl", "--x"])  # noqa: SLF001
    with pytest.raises(F.FilterUnavailable, match="unknown launcher option"):
        F._options(["--bogus", "repl"])  # noqa: SLF001


def test_the_filter_denies_unshare() -> None:
    for machine, (_, numbers, _) in F.ARCHES.items():
        code = F.program(machine, 0)
        ops = [code[i : i + 8] for i in range(0, len(code), 8)]
        assert any(int.from_bytes(o[4:], "little") == numbers["unshare"] and o[0] == 0x15 for o in ops), machine


def test_limits_and_their_derivation() -> None:
    import resource

    assert L.Limits().rlimits() == [(resource.RLIMIT_CORE, 0)], "no core dumps, whatever the keys"
    assert dict(L.Limits(memory_mb=1, file_mb=2, cpu_s=3).rlimits()) == {
        resource.RLIMIT_CORE: 0, resource.RLIMIT_AS: 1 << 20, resource.RLIMIT_FSIZE: 2 << 20, resource.RLIMIT_CPU: 3}
    assert L.cpu_seconds(2.0, 600, 200, 200) == 2 * (600 + 200 * 200) and L.cpu_seconds(0, 600, 200, 200) == 0
    assert L.limit_hit(-25) == L.limit_hit(128 + 25) == (L.FILE_SIZE, "verification.scratch_mb")
    assert L.limit_hit(-24) == (L.CPU, "verification.cpu_time_factor") and L.limit_hit(-9) is None
    assert L.limit_hit(None) is None and L.limit_hit(0) is None
    s = PoolSettings(command=("x",), project_dir=Path("/"), scratch_mb=8, cpu_time_factor=1.0, header_timeout_s=10,
                     timeout_s=5, max_proofs=2, memory_limit_mb=100)
    assert s.limits() == L.Limits(memory_mb=100, file_mb=8, cpu_s=20)
    with pytest.raises(ValueError, match=r"verification\.process_limit must be >= 0"):
        PoolSettings(command=("x",), project_dir=Path("/"), process_limit=-1)


def test_where_the_task_limit_holds() -> None:
    assert L.nproc_applies("bwrap", True, "6.1.0-18-amd64", uid=1000) is None
    assert "5.14" in str(L.nproc_applies("bwrap", True, "5.10.0", uid=1000))
    assert "root" in str(L.nproc_applies("bwrap", True, "6.1.0", uid=0))
    assert "user namespace" in str(L.nproc_applies("bwrap", False, "6.1.0", uid=1000))
    assert "user namespace" in str(L.nproc_applies("none", True, "6.1.0", uid=1000))


def test_the_cgroup_note_says_what_bounds_the_task(tmp_path: Path) -> None:
    job = tmp_path / "system.slice" / "job_7" / "step_0"
    job.mkdir(parents=True)
    (job / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    v2 = L.cgroup_note("0::/system.slice/job_7/step_0\n", {"SLURM_JOB_ID": "7"}, root=tmp_path)
    assert v2.startswith("Slurm job 7: the cgroup controllers cpuset (/system.slice/job_7/step_0)") and "pids" in v2
    v1 = L.cgroup_note("4:memory:/slurm/uid_1/job_8\n3:cpuset:/\n0::/\n", {}, root=tmp_path)
    assert v1.startswith("no Slurm job: the cgroup controllers memory (/slurm/uid_1/job_8)") and "cpuset" not in v1
    none = L.cgroup_note("0::/\n", {}, root=tmp_path)
    assert none.startswith("no Slurm job, no cgroup limits this process: nothing bounds how many cores")


def test_the_keys_are_validated_with_their_names() -> None:
    v = VerificationConfig()
    assert (v.scratch_mb, v.cpu_time_factor, v.process_limit) == (512, 2.0, 1024)
    for key, value in (("scratch_mb", -1), ("cpu_time_factor", -0.5), ("process_limit", -2)):
        errors = dict(semantic_errors(Config(verification=VerificationConfig(**{key: value}))))
        assert errors[f"verification.{key}"].startswith("must be >= 0"), errors
    with pytest.raises(ConfigError, match=r"verification\.scratch_mb.*integer"):
        from_toml_text('[run]\nname = "x"\n[verification]\nscratch_mb = "big"\n', "test.toml")


@needs_bwrap
def test_probe_keeps_the_scratch_tmpfs_where_it_can_be_read_and_falls_back_where_not(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    import sgsbatch.verification.sandbox as S

    base = Sandbox("bwrap", scratch_mb=8, tmpfs_mb=8)
    assert probe(base).scratch_mb == 8, "here bwrap has --size and its processes can be looked into"
    monkeypatch.setattr(S, "_in_other_mount_namespace", lambda pid: None)  # a sandbox one cannot look into
    with caplog.at_level("WARNING"):
        fallback = probe(base)
    assert (fallback.scratch_mb, fallback.tmpfs_mb) == (0, 8)
    assert "the scratch is on the host disk" in caplog.text and "no process of the sandbox" in caplog.text


def test_the_pickle_is_read_without_following_symlinks(tmp_path: Path) -> None:
    from sgsbatch.verification.slot import _read_no_symlinks

    (tmp_path / "secret").write_text("hidden from the sandbox")
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "env.olean").symlink_to(tmp_path / "secret")
    (tmp_path / "link").symlink_to(tmp_path / "d")
    with pytest.raises(OSError, match="Too many levels of symbolic links"):
        _read_no_symlinks(tmp_path / "d", "env.olean")
    (tmp_path / "d" / "env.olean").unlink()
    (tmp_path / "d" / "env.olean").write_bytes(b"pickle")
    assert _read_no_symlinks(tmp_path / "d", "env.olean") == b"pickle"
    with pytest.raises(OSError):
        _read_no_symlinks(tmp_path / "link", "env.olean")

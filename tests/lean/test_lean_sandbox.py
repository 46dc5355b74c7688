"""The sandbox (verification/sandbox.py) with the stand-in REPL run under the real bubblewrap.

The stand-in's sandbox probes (fake_repl.py: FAKE_WRITE_OUTSIDE, FAKE_SOCKET, FAKE_SIGNAL,
FAKE_DAEMON, FAKE_SCRATCH) do what a proof's code could do at elaboration time. Under "bwrap"
each must fail (checked from outside: no file, no connection, the target alive) while the
scratch write works; under "none" the same probes succeed, which shows the tests can fail.
Tests that need bwrap are skipped, with the reason, where it is missing or cannot create namespaces.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from leanlib import FAKE, FAKE_CHECKER_COMMAND, settings

from sgsbatch.config.loading import from_toml_text
from sgsbatch.config.schema import VerificationConfig
from sgsbatch.errors import ConfigError
from sgsbatch.verification.lean import LeanVerifier
from sgsbatch.verification.pool import PoolSettings, ReplPool
from sgsbatch.verification.sandbox import Sandbox, probe
from sgsbatch.verification.verdict import ERROR, TIMEOUT, VERIFIED, ProofJob, Verdict


def _bwrap_problem() -> tuple[str | None, Sandbox | None]:
    try:
        return None, probe(Sandbox("bwrap"))
    except ValueError as e:
        return str(e), None


PROBLEM, PROBED = _bwrap_problem()
needs_bwrap = pytest.mark.skipif(PROBLEM is not None, reason=f"bubblewrap cannot sandbox here: {PROBLEM}")
PASS = ("FAKE_TARGETS", "FAKE_PORT", "FAKE_UNIX_SOCKET", "FAKE_SIGNAL_PID", "FAKE_TOKEN")
THEOREM = "theorem t{i} (x : ℝ) : x ^ 2 ≥ 0 := by"


class Listener:
    """A TCP server on 127.0.0.1 (and a Unix socket server) outside the sandbox, counting connections."""

    def __init__(self, unix_path: Path) -> None:
        self.connections = 0
        self.tcp = socket.create_server(("127.0.0.1", 0))
        self.unix = socket.socket(socket.AF_UNIX)
        self.unix.bind(str(unix_path))
        self.port = self.tcp.getsockname()[1]
        self._stop = threading.Event()
        self.threads = [threading.Thread(target=self._serve, args=(s,), daemon=True) for s in (self.tcp, self.unix)]
        for s, t in zip((self.tcp, self.unix), self.threads, strict=True):
            s.listen(8)
            s.settimeout(0.1)
            t.start()

    def _serve(self, server: socket.socket) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        for t in self.threads:
            t.join(timeout=5)
        self.tcp.close()
        self.unix.close()


@dataclass
class Attack:
    project: Path  # the REPL's cwd, like lean/: read-only in the sandbox
    olean: Path  # a Mathlib-like build output in it
    outside: Path  # a directory outside /tmp that the sandbox does not hide
    listener: Listener
    victim: subprocess.Popen[bytes]  # a process the proof tries to signal
    token: str  # in the argv of every stand-in process and of its daemon
    scratch_parent: Path

    def pool_settings(self, sandbox: str, **kw: object) -> PoolSettings:
        user_ns = PROBED.user_namespace if PROBED is not None else True
        base: dict[str, object] = dict(command=(sys.executable, str(FAKE), self.token), project_dir=self.project,
                                       processes=1, sandbox=sandbox, sandbox_user_namespace=user_ns,
                                       sandbox_pass_env=PASS, scratch_parent=self.scratch_parent,
                                       checker_command=(*FAKE_CHECKER_COMMAND, self.token))
        base.update(kw)
        return settings(self.project, **base)


@pytest.fixture
def attack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Attack]:
    project = tmp_path / "project"
    olean = project / ".lake" / "packages" / "mathlib" / ".lake" / "build" / "lib" / "Mathlib.olean"
    olean.parent.mkdir(parents=True)
    olean.write_text("original")
    outside = Path(tempfile.mkdtemp(prefix="sgsbatch-sandbox-test-", dir="/var/tmp"))
    listener = Listener(tmp_path / "agent.sock")
    victim = subprocess.Popen(["sleep", "300"])
    token = f"sandbox-test-{uuid.uuid4().hex}"
    targets = [outside / "planted.txt", project / "planted.txt", olean, tmp_path / "planted.txt"]
    monkeypatch.setenv("FAKE_TARGETS", os.pathsep.join(map(str, targets)))
    monkeypatch.setenv("FAKE_PORT", str(listener.port))
    monkeypatch.setenv("FAKE_UNIX_SOCKET", str(tmp_path / "agent.sock"))
    monkeypatch.setenv("FAKE_SIGNAL_PID", str(victim.pid))
    monkeypatch.setenv("FAKE_TOKEN", token)
    try:
        yield Attack(project, olean, outside, listener, victim, token, tmp_path / "scratch")
    finally:
        listener.close()
        victim.kill()
        victim.wait()
        for pid in _pids_with(token):  # only processes this test started carry its token
            with contextlib.suppress(ProcessLookupError):  # it may end between the listing and the kill
                os.kill(pid, signal.SIGKILL)
        subprocess.run(["rm", "-rf", str(outside)], check=False)


def _pids_with(token: str) -> list[int]:
    """Live processes whose argv carries `token` (found through /proc, zombies left out)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if token.encode() in argv and state != "Z":
            found.append(int(entry.name))
    return found


def _wait_gone(token: str, seconds: float = 5.0) -> list[int]:
    deadline = time.monotonic() + seconds
    while (left := _pids_with(token)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def _run(pool: ReplPool, *proofs: str) -> list[Verdict]:
    jobs = [ProofJob(f"j{i}", "import Mathlib", THEOREM.format(i=i), f"\n  {p}") for i, p in enumerate(proofs)]
    by_key = {job.key: verdict for job, verdict, _ in pool.run(jobs)}
    return [by_key[job.key] for job in jobs]


def _probes(verdict: Verdict) -> dict[str, str]:
    out = {}
    for m in verdict.messages:
        if "probe " in m:
            what, _, result = m.split("probe ", 1)[1].partition(": ")
            out[what] = result
    return out


@needs_bwrap
def test_bwrap_blocks_writes_sockets_and_signals(attack: Attack) -> None:
    pool = ReplPool(attack.pool_settings("bwrap"))
    try:
        (verdict,) = _run(pool, "FAKE_WRITE_OUTSIDE FAKE_SOCKET FAKE_SIGNAL FAKE_SCRATCH")
        assert list(attack.scratch_parent.iterdir()), "the pool's scratch directory exists while it runs"
    finally:
        pool.close()
    probes = _probes(verdict)
    assert verdict.verdict == VERIFIED, verdict  # the kernel re-check read the pickle from the scratch
    assert probes["scratch"] == "done", probes
    assert probes[f"write {attack.outside / 'planted.txt'}"].startswith("blocked (OSError: [Errno 30] Read-only")
    assert probes[f"write {attack.project / 'planted.txt'}"].startswith("blocked (OSError: [Errno 30] Read-only")
    assert probes[f"write {attack.olean}"].startswith("blocked"), probes
    assert not (attack.outside / "planted.txt").exists() and not (attack.project / "planted.txt").exists()
    assert not (attack.project.parent / "planted.txt").exists(), "a /tmp write lands in a private tmpfs"
    assert attack.olean.read_text() == "original"
    assert probes["tcp"].startswith("blocked") and probes["unix"].startswith("blocked"), probes
    time.sleep(0.2)
    assert attack.listener.connections == 0
    assert probes["signal"].startswith("blocked (ProcessLookupError"), probes
    assert attack.victim.poll() is None, "the process outside the sandbox was not signalled"
    assert list(attack.scratch_parent.iterdir()) == [], "close() removes every scratch directory"


def test_without_a_sandbox_the_attack_works(attack: Attack) -> None:
    # The demonstration that the probes are real: with sandbox = "none" every one of them succeeds.
    pool = ReplPool(attack.pool_settings("none"))
    try:
        (verdict,) = _run(pool, "FAKE_WRITE_OUTSIDE FAKE_SOCKET FAKE_SIGNAL FAKE_SCRATCH")
    finally:
        pool.close()
    probes = _probes(verdict)
    assert set(probes.values()) == {"done"}, probes
    assert (attack.outside / "planted.txt").exists() and (attack.project / "planted.txt").exists()
    assert attack.olean.read_text() == "written by a proof\n", "a Mathlib .olean overwritten"
    deadline = time.monotonic() + 5
    while attack.listener.connections < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert attack.listener.connections == 2
    assert attack.victim.wait(timeout=5) == -signal.SIGTERM
    assert list(attack.scratch_parent.iterdir()) == []


@pytest.mark.parametrize("sandbox", [pytest.param("bwrap", marks=needs_bwrap), "none"])
def test_killing_the_group_leaves_nothing_running(attack: Attack, sandbox: str) -> None:
    # A proof starts a child in a session of its own (out of the REPL's process group), then the
    # next proof hangs: the timeout kills the REPL's group. Under bwrap the pid namespace dies with
    # it; without a sandbox the escaped child survives (the reason for --unshare-pid).
    pool = ReplPool(attack.pool_settings(sandbox, timeout_s=1.0, kernel_recheck=False))
    try:
        verdicts = _run(pool, "FAKE_DAEMON", "FAKE_HANG")
        started = pool.started_pids
    finally:
        pool.close()
    assert _probes(verdicts[0])["daemon"] == "done"
    assert verdicts[1].verdict == TIMEOUT
    assert len(started) == 1 and attack.victim.poll() is None
    left = _wait_gone(attack.token)
    if sandbox == "bwrap":
        assert left == [], f"processes left running after the kill: {left}"
    else:
        assert len(left) == 1, "without a sandbox the daemon escapes the group kill"


@needs_bwrap
def test_memory_limit_holds_inside_the_sandbox(attack: Attack) -> None:
    pool = ReplPool(attack.pool_settings("bwrap", memory_limit_mb=400, retries=0))
    try:
        (verdict,) = _run(pool, "FAKE_MEMORY")
    finally:
        pool.close()
    assert (verdict.verdict, verdict.reason) == (ERROR, "memory_limit"), verdict
    assert _wait_gone(attack.token) == []


@needs_bwrap
def test_lean_verifier_runs_sandboxed(attack: Attack) -> None:
    vcfg = VerificationConfig(repl_command=(sys.executable, str(FAKE), attack.token), project_dir=str(attack.project),
                              checker_command=FAKE_CHECKER_COMMAND, memory_limit_mb=0, timeout_s=5.0,
                              scratch_dir=str(attack.scratch_parent))
    verifier = LeanVerifier(vcfg, processes=1)
    assert verifier.settings.sandbox == "bwrap"
    try:
        verdicts = [v for _, v, _ in verifier.verify_stream([ProofJob("a", "", THEOREM.format(i=1), "\n  simp")])]
    finally:
        verifier.close()
    assert [v.verdict for v in verdicts] == [VERIFIED]
    assert list(attack.scratch_parent.iterdir()) == [] and _wait_gone(attack.token) == []


def test_preflight_without_bwrap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    vcfg = VerificationConfig(repl_command=(sys.executable, str(FAKE)), project_dir=str(tmp_path), kernel_recheck=False)
    with pytest.raises(ValueError, match=r"'bwrap' is not on PATH: install it \(`apt-get install bubblewrap`\) "
                                         r"or set verification.sandbox = \"none\""):
        LeanVerifier(vcfg, processes=1)
    LeanVerifier(VerificationConfig(repl_command=(sys.executable, str(FAKE)), project_dir=str(tmp_path),
                                    kernel_recheck=False, sandbox="none"), processes=1).close()


def test_preflight_when_bwrap_cannot_create_namespaces(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake_bwrap = bin_dir / "bwrap"
    fake_bwrap.write_text("#!/bin/sh\necho 'bwrap: No permissions to creating new namespace' >&2\nexit 1\n")
    fake_bwrap.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    vcfg = VerificationConfig(repl_command=(sys.executable, str(FAKE)), project_dir=str(tmp_path), kernel_recheck=False)
    with pytest.raises(ValueError, match=r"cannot create its namespaces.*No permissions to creating new namespace"
                                         r".*apt-get install bubblewrap.*verification.sandbox = \"none\""):
        LeanVerifier(vcfg, processes=1)


def test_sandbox_choice_is_validated(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"verification\.sandbox.*one of 'bwrap', 'none'.*'docker'"):
        from_toml_text('[run]\nname = "x"\n[verification]\nsandbox = "docker"\n', "test.toml")
    with pytest.raises(ValueError, match=r"verification\.sandbox must be one of 'bwrap', 'none', got 'docker'"):
        PoolSettings(command=("x",), project_dir=tmp_path, sandbox="docker")
    assert VerificationConfig().sandbox == "bwrap" and PoolSettings(command=("x",), project_dir=tmp_path).sandbox == "none"


def test_wrap_argv(tmp_path: Path) -> None:
    scratch = tmp_path / "s"
    env = {"PATH": "/usr/bin", "HF_TOKEN": "secret", "LEAN_PATH": "/lean", "HOME": str(tmp_path)}
    argv = Sandbox("bwrap", tmpfs_mb=8).wrap(["lake", "env", "repl"], cwd=tmp_path, scratch=scratch, environ=env)
    joined = " ".join(argv)
    for part in ("--unshare-net", "--unshare-pid", "--die-with-parent", "--new-session", "--cap-drop ALL",
                 "--unshare-user --uid 65534 --gid 65534", "--ro-bind / /", f"--size {8 << 20} --tmpfs /tmp",
                 f"--bind {scratch} {scratch}", f"--chdir {tmp_path}", "--clearenv", "--setenv LEAN_PATH /lean",
                 f"--setenv HOME {scratch}", f"--setenv SGSBATCH_SCRATCH {scratch}"):
        assert part in joined, part
    assert "HF_TOKEN" not in joined and argv[-4:] == ["--", "lake", "env", "repl"]
    assert joined.index("--tmpfs /tmp") < joined.index(f"--bind {scratch}"), "the scratch is bound after /tmp is hidden"
    checker = Sandbox("bwrap").wrap(["c"], cwd=tmp_path, scratch=scratch, writable=False, environ=env)
    assert f"--ro-bind {scratch} {scratch}" in " ".join(checker)
    assert Sandbox("none").wrap(["lake"], cwd=tmp_path, scratch=scratch) == ["lake"]


@needs_bwrap
def test_known_gap_unix_sockets_on_visible_paths(attack: Attack, monkeypatch: pytest.MonkeyPatch) -> None:
    # Documents a limit (sandbox.py): a read-only mount does not stop connect() on a Unix socket,
    # so sockets outside the hidden /tmp, /run, /var/run, /dev/shm stay reachable. If this starts
    # failing, the gap was closed: update sandbox.py's docstring and lean/README.md.
    path = attack.outside / "visible.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen(1)
    monkeypatch.setenv("FAKE_UNIX_SOCKET", str(path))
    pool = ReplPool(attack.pool_settings("bwrap", kernel_recheck=False))
    try:
        (verdict,) = _run(pool, "FAKE_SOCKET")
    finally:
        pool.close()
        server.close()
    assert _probes(verdict)["unix"] == "done"

"""The sandbox Lean runs in: the REPL's argv, wrapped in bubblewrap (`verification.sandbox`).

Proofs come from the policy being trained, and Lean runs code at elaboration time (`#eval`,
`run_cmd`, macros, `initialize`), so a proof can do whatever its process may. With
`verification.sandbox = "bwrap"` (the default) every REPL and kernel re-check process is started
as `bwrap ... -- <repl_command>`, which gives it:

- the whole filesystem read-only (`--ro-bind / /`): the Lean toolchain, Mathlib's `.olean`s,
  the project and the run directory cannot be written (no persistent compromise of the node);
- one writable directory, the process's scratch (`$SGSBATCH_SCRATCH` and `$HOME`; REPL pickles go
  there): with `scratch_mb` (`verification.scratch_mb`, bwrap 0.7+) a tmpfs of that size mounted
  on the scratch's path inside the sandbox, so a proof that writes files fills RAM up to the cap
  (the write then fails, ENOSPC) and never the host disk; the pool reaches it from outside through
  `/proc/<pid>/root` of a process in the sandbox (`scratch_view`). Without the cap (0, or a bwrap
  that refuses `--size`, or one whose processes the verify user cannot look into: `probe` falls
  back with a warning) the scratch is the pool's directory on the host disk, bound in, and only
  RLIMIT_FSIZE (limits.py) bounds each file, not their total. A scratch a proof filled stays full
  for the rest of its process: the next proof's pickle then fails, a system error retried on a
  fresh process. The checker gets its own directory (the pool's, on the host, written by the pool
  only) read-only;
- private, empty tmpfs on `/tmp`, `/run` (and `/var/run`, `/dev/shm`): other users' files and the
  Unix sockets there (munge, dbus, docker, ssh/gpg agents) are hidden; a Unix socket elsewhere on
  the read-only filesystem can still be connected to (a read-only mount does not stop that);
- no network (`--unshare-net`: only a loopback of its own), its own pid namespace
  (`--unshare-pid`: no other process can be seen or signalled), `--die-with-parent`,
  `--new-session` (no terminal injection), no capabilities (`--cap-drop ALL`: a root process
  could otherwise remount `/` read-write), and with `user_namespace` uid/gid 65534 in a user
  namespace of its own (`--unshare-user`; where namespaces are refused, `probe` falls back to
  none, with a warning: then only the read-only mounts and `--cap-drop ALL` hold the files);
- an environment of its own (`--clearenv`): PATH, locale, the Lean/elan/lake variables that
  are set (ELAN_HOME defaults to the real ~/.elan, since HOME becomes the scratch), nothing else
  (no tokens or credentials from the caller's environment).

With `process_filter` (`verification.process_filter`, on by default) the program runs under the
seccomp filter of process_filter.py: no process can be created inside (nor a file written outside its scratch),
and no namespace (`unshare`: else a user namespace of its own could mount a tmpfs of no cap).
With `process_limit` (`verification.process_limit`) the same launcher sets RLIMIT_NPROC inside,
where with a user namespace of its own the kernel counts only the sandbox's tasks (limits.py
says where it holds). The rlimits of limits.py (address space, file size, lifetime CPU, no
cores) are set before bwrap is exec'd and inherited by everything in it.
Not covered: the RAM of the tmpfs mounts (scratch, /tmp, /run, /dev/shm: each capped with
`--size`, but outside RLIMIT_AS; a cgroup's memory limit counts them), how many cores a process
uses at one moment (a cgroup's; limits.py), reading: everything readable on the node stays
readable (a proof can read files, though it can send them nowhere but its reply); kernel exploits.
`verification.sandbox = "none"` runs the command as is (the caller's environment plus
`$SGSBATCH_SCRATCH`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from sgsbatch.verification.limits import nproc_applies
from sgsbatch.verification.process_filter import filtered

log = logging.getLogger(__name__)

SANDBOXES: tuple[str, ...] = ("bwrap", "none")
SCRATCH_ENV = "SGSBATCH_SCRATCH"
NOBODY = 65534
# Passed into the sandbox when set (HOME, TMPDIR and $SGSBATCH_SCRATCH are set by the sandbox).
PASS_ENV: tuple[str, ...] = (
    "PATH", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "TZ",
    "ELAN_HOME", "ELAN_TOOLCHAIN", "LAKE_HOME", "LEAN_PATH", "LEAN_SRC_PATH", "LEAN_SYSROOT", "LEAN_CC",
    "LEAN_NUM_THREADS", "LEAN_ABORT_ON_PANIC",
)
HIDDEN: tuple[str, ...] = ("/tmp", "/run", "/var/run", "/dev/shm")  # fresh empty tmpfs in the sandbox
INSTALL_HINT = "install it (`apt-get install bubblewrap`) or set verification.sandbox = \"none\""


def check_choice(value: str, key: str = "verification.sandbox") -> str:
    """`value` if it is a known sandbox, else a ValueError naming the key and the choices."""
    if value not in SANDBOXES:
        raise ValueError(f"{key} must be one of {', '.join(repr(s) for s in SANDBOXES)}, got {value!r}")
    return value


@dataclass(frozen=True)
class Sandbox:
    """How to wrap a command; `kind` is one of SANDBOXES."""

    kind: str = "none"
    user_namespace: bool = True  # run as uid/gid 65534 in a user namespace of its own
    tmpfs_mb: int = 0  # cap on each private tmpfs (`--size`, bwrap 0.7+); 0 = bwrap's default
    scratch_mb: int = 0  # the writable scratch is a tmpfs of this size (`--size`); 0 = the host directory
    process_limit: int = 0  # RLIMIT_NPROC set inside (with a user namespace of its own only); 0 = none
    pass_env: tuple[str, ...] = ()  # more variable names passed through (tests: the stand-in's)
    program: str = "bwrap"
    process_filter: bool = False  # no process creation inside (process_filter.py); the config's default is on

    def __post_init__(self) -> None:
        check_choice(self.kind)

    def wrap(self, argv: Sequence[str], *, cwd: Path, scratch: Path, writable: bool = True,
             environ: Mapping[str, str] | None = None) -> list[str]:
        """The argv that runs `argv` in `cwd` in this sandbox, with `scratch` its one writable
        directory (read-only if not `writable`). For "none": `argv` unchanged. With
        `process_filter`, the program runs under the seccomp filter of process_filter.py; with
        `process_limit` (and a user namespace), under that RLIMIT_NPROC."""
        if self.process_filter or self.nproc:
            argv = filtered(argv, nproc=self.nproc, seccomp=self.process_filter)
        if self.kind == "none":
            return list(argv)
        env = self._environment(scratch, os.environ if environ is None else environ)
        out = [self.program, "--die-with-parent", "--new-session", "--unshare-pid", "--unshare-net",
               "--unshare-ipc", "--unshare-uts", "--cap-drop", "ALL"]
        if self.user_namespace:
            out += ["--unshare-user", "--uid", str(NOBODY), "--gid", str(NOBODY)]
        out += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
        for path in HIDDEN:
            if path != "/dev/shm" and (not os.path.isdir(path) or os.path.islink(path)):
                continue  # /var/run is usually a link to /run, hidden with it
            if self.tmpfs_mb > 0:
                out += ["--size", str(self.tmpfs_mb * 1024 * 1024)]
            out += ["--tmpfs", path]
        out += ["--remount-ro", "/dev"]  # bwrap's /dev is an uncapped tmpfs; its devices stay usable
        # the project (and so the REPL's cwd) may lie under a hidden path, e.g. a test's /tmp
        out += ["--ro-bind", str(cwd), str(cwd)]
        if writable and self.scratch_mb > 0:
            out += ["--size", str(self.scratch_mb * 1024 * 1024), "--tmpfs", str(scratch)]
        else:
            out += ["--bind" if writable else "--ro-bind", str(scratch), str(scratch)]
        out += ["--chdir", str(cwd), "--clearenv"]
        for name, value in env.items():
            out += ["--setenv", name, value]
        return [*out, "--", *argv]

    @property
    def nproc(self) -> int:
        """The RLIMIT_NPROC the launcher sets inside: `process_limit` under bwrap with a user namespace, else 0."""
        return self.process_limit if self.kind == "bwrap" and self.user_namespace else 0

    @property
    def scratch_in_sandbox(self) -> bool:
        """True when a writable scratch is a size-capped tmpfs inside the sandbox, not the host directory."""
        return self.kind == "bwrap" and self.scratch_mb > 0

    def scratch_view(self, pid: int, scratch: Path) -> Path:
        """Where the host reaches the writable `scratch` of the sandbox started as process `pid`:
        `scratch` itself when it is the host directory, else the path through `/proc/<p>/root`
        of the first process below `pid` in another mount namespace (bwrap's, or the program's).
        An OSError when there is none (the sandbox is gone) or it cannot be looked into."""
        if not self.scratch_in_sandbox:
            return scratch
        inside = _in_other_mount_namespace(pid)
        if inside is None:
            raise FileNotFoundError(f"no process of the sandbox {pid} is left to read its scratch through")
        return Path(f"/proc/{inside}/root") / scratch.relative_to("/")

    def env(self, scratch: Path, environ: Mapping[str, str] | None = None) -> dict[str, str] | None:
        """The environment to start the wrapped command with: None (inherit) under bwrap, whose
        argv sets it; the caller's plus $SGSBATCH_SCRATCH for "none"."""
        if self.kind != "none":
            return None
        return {**(os.environ if environ is None else environ), SCRATCH_ENV: str(scratch)}

    def _environment(self, scratch: Path, environ: Mapping[str, str]) -> dict[str, str]:
        env = {k: environ[k] for k in (*PASS_ENV, *self.pass_env) if k in environ}
        env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
        env.setdefault("LANG", "C.UTF-8")
        if "ELAN_HOME" not in env:  # elan looks under $HOME/.elan, and HOME becomes the scratch
            elan = Path(environ.get("HOME", str(Path.home()))) / ".elan"
            if elan.is_dir():
                env["ELAN_HOME"] = str(elan)
        env.update({"HOME": str(scratch), "TMPDIR": "/tmp", SCRATCH_ENV: str(scratch)})
        return env


def _children(pid: int) -> list[int]:
    """The processes whose parent is `pid` (from /proc/*/stat: /proc/PID/task/*/children needs
    CONFIG_PROC_CHILDREN, which not every kernel has)."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid:
            out.append(int(entry))
    return out


def _in_other_mount_namespace(pid: int) -> int | None:
    """The first process at or below `pid` (breadth first) whose mount namespace is not ours."""
    ours = os.readlink("/proc/self/ns/mnt")
    todo = [pid]
    while todo:
        p = todo.pop(0)
        with contextlib.suppress(OSError):
            if os.readlink(f"/proc/{p}/ns/mnt") != ours:
                return p
        todo += _children(p)
    return None


_PROBE_SCRATCH = ("import os, sys\n"
                  "open(os.path.join(os.environ['SGSBATCH_SCRATCH'], 'probe'), 'w').write('written inside')\n"
                  "print('ready', flush=True)\n"
                  "sys.stdin.read()\n")


def _try_scratch_view(sandbox: Sandbox, scratch: Path,
                      environ: Mapping[str, str] | None) -> subprocess.CompletedProcess[str]:
    """A program in `sandbox` writes into its scratch tmpfs; the file must be readable from here."""
    argv = sandbox.wrap([sys.executable, "-c", _PROBE_SCRATCH], cwd=scratch, scratch=scratch, environ=environ)
    with subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, start_new_session=True) as proc:
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        try:
            if proc.stdout.readline().strip() != "ready":
                proc.stdin.close()
                return subprocess.CompletedProcess(argv, proc.wait(timeout=30) or 1, "", proc.stderr.read())
            try:
                seen = (sandbox.scratch_view(proc.pid, scratch) / "probe").read_text()
            except OSError as e:
                seen = f"the scratch cannot be read from outside the sandbox: {e}"
            return subprocess.CompletedProcess(argv, 0 if seen == "written inside" else 1, "", seen)
        finally:
            with contextlib.suppress(OSError):
                proc.stdin.close()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, 9)  # the probe's own group, not yet reaped


def _try(sandbox: Sandbox, environ: Mapping[str, str] | None) -> subprocess.CompletedProcess[str]:
    scratch = Path(tempfile.mkdtemp(prefix="sgsbatch-probe-"))
    try:
        if sandbox.scratch_in_sandbox:
            return _try_scratch_view(sandbox, scratch, environ)
        argv = sandbox.wrap(["true"], cwd=scratch, scratch=scratch, environ=environ)
        return subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        return subprocess.CompletedProcess(e.args, 1, "", str(e))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _candidates(first: Sandbox) -> list[Sandbox]:
    """`first`, then with less of it: the scratch on the host, then no `--size` at all, then each
    of those without the user namespace; no repeats."""
    out = [first]
    if first.scratch_mb > 0:
        out.append(replace(first, scratch_mb=0))
    if first.tmpfs_mb > 0:
        out.append(replace(first, tmpfs_mb=0, scratch_mb=0))
    if first.user_namespace:
        out += [replace(c, user_namespace=False) for c in list(out)]
    return list(dict.fromkeys(out))


def probe(sandbox: Sandbox, environ: Mapping[str, str] | None = None) -> Sandbox:
    """The sandbox to use on this machine: the first of `sandbox`, then it with the scratch on the
    host disk (a bwrap whose processes cannot be looked into), then without any tmpfs cap
    (bubblewrap < 0.7, or setuid), then without the user namespace (refused here), with which a
    probe runs (`bwrap ... true`, or for a scratch tmpfs, a file written inside and read from
    here); a logged warning when it is not `sandbox` itself. `process_limit` is dropped, with a
    warning, where RLIMIT_NPROC would not count the sandbox's tasks only (limits.nproc_applies).
    A ValueError (what to install or set) when bwrap is missing or cannot run at all. "none" is
    returned as is."""
    if sandbox.kind == "none":
        return sandbox
    path = (environ if environ is not None else os.environ).get("PATH")
    program = shutil.which(sandbox.program, path=path)
    if program is None:
        raise ValueError(f"verification.sandbox = \"bwrap\", but the program {sandbox.program!r} is not on PATH: "
                         + INSTALL_HINT)
    first = replace(sandbox, program=program)
    errors: list[str] = []
    for candidate in _candidates(first):
        result = _try(candidate, environ)
        if result.returncode == 0:
            if candidate != first:
                log.warning("bwrap refused part of the sandbox here (%s): running with user_namespace=%s, "
                            "tmpfs_mb=%d, scratch_mb=%d instead%s", errors[0][:300], candidate.user_namespace,
                            candidate.tmpfs_mb, candidate.scratch_mb,
                            "" if candidate.scratch_mb or not first.scratch_mb else
                            " (the scratch is on the host disk: RLIMIT_FSIZE bounds each file, not their total)")
            return _with_nproc(candidate)
        errors.append(f"exit code {result.returncode}: {result.stderr.strip()[:300]}")
    raise ValueError(f"verification.sandbox = \"bwrap\", but {program} cannot create its namespaces on this "
                     f"machine ({errors[0]}): {INSTALL_HINT} (bubblewrap 0.5 or newer), allow unprivileged user "
                     "namespaces (e.g. sysctl kernel.unprivileged_userns_clone=1), or run where it can")


def _with_nproc(sandbox: Sandbox) -> Sandbox:
    """`sandbox`, without its process limit (and a warning) where it would not count the sandbox's tasks only."""
    if sandbox.process_limit <= 0:
        return sandbox
    why = nproc_applies(sandbox.kind, sandbox.user_namespace)
    if why is None:
        return sandbox
    log.warning("verification.process_limit = %d is not set here: %s", sandbox.process_limit, why)
    return replace(sandbox, process_limit=0)

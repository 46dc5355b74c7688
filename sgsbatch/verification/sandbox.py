"""The sandbox Lean runs in: the REPL's argv, wrapped in bubblewrap (`verification.sandbox`).

Proofs come from the policy being trained, and Lean runs code at elaboration time (`#eval`,
`run_cmd`, macros, `initialize`), so a proof can do whatever its process may. With
`verification.sandbox = "bwrap"` (the default) every REPL and kernel re-check process is started
as `bwrap ... -- <repl_command>`, which gives it:

- the whole filesystem read-only (`--ro-bind / /`): the Lean toolchain, Mathlib's `.olean`s,
  the project and the run directory cannot be written (no persistent compromise of the node);
- one writable directory, the process's scratch (created and removed by the pool, given as
  `$SGSBATCH_SCRATCH` and `$HOME`; REPL pickles go there); the checker gets it read-only;
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
seccomp filter of process_filter.py: no process can be created inside (issue 26, classes 3, 6).
Not covered: CPU and memory abuse beyond RLIMIT_AS (set before bwrap is exec'd, inherited) and
the per-proof timeout; tmpfs and scratch writes use RAM/disk outside RLIMIT_AS (tmpfs is capped
with `--size` where bwrap has it, 0.7+); reading: everything readable on the node stays readable
(a proof can read files, though it can send them nowhere but its reply); kernel exploits.
`verification.sandbox = "none"` runs the command as is (the caller's environment plus
`$SGSBATCH_SCRATCH`).
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

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
    pass_env: tuple[str, ...] = ()  # more variable names passed through (tests: the stand-in's)
    program: str = "bwrap"
    process_filter: bool = False  # no process creation inside (process_filter.py); the config's default is on

    def __post_init__(self) -> None:
        check_choice(self.kind)

    def wrap(self, argv: Sequence[str], *, cwd: Path, scratch: Path, writable: bool = True,
             environ: Mapping[str, str] | None = None) -> list[str]:
        """The argv that runs `argv` in `cwd` in this sandbox, with `scratch` its one writable
        directory (read-only if not `writable`). For "none": `argv` unchanged. With
        `process_filter`, the program runs under the seccomp filter of process_filter.py."""
        if self.process_filter:
            argv = filtered(argv)
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
        out += ["--bind" if writable else "--ro-bind", str(scratch), str(scratch), "--chdir", str(cwd), "--clearenv"]
        for name, value in env.items():
            out += ["--setenv", name, value]
        return [*out, "--", *argv]

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


def _try(sandbox: Sandbox, environ: Mapping[str, str] | None) -> subprocess.CompletedProcess[str]:
    scratch = Path(tempfile.mkdtemp(prefix="sgsbatch-probe-"))
    try:
        argv = sandbox.wrap(["true"], cwd=scratch, scratch=scratch, environ=environ)
        return subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        return subprocess.CompletedProcess(e.args, 1, "", str(e))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def probe(sandbox: Sandbox, environ: Mapping[str, str] | None = None) -> Sandbox:
    """The sandbox to use on this machine: the first of `sandbox`, then it without the tmpfs cap
    (bubblewrap < 0.7, or setuid), then without the user namespace (refused here), with which
    `bwrap ... true` runs; a logged warning when it is not `sandbox` itself. A ValueError (what
    to install or set) when bwrap is missing or cannot run at all. "none" is returned as is."""
    if sandbox.kind == "none":
        return sandbox
    path = (environ if environ is not None else os.environ).get("PATH")
    program = shutil.which(sandbox.program, path=path)
    if program is None:
        raise ValueError(f"verification.sandbox = \"bwrap\", but the program {sandbox.program!r} is not on PATH: "
                         + INSTALL_HINT)
    first = replace(sandbox, program=program)
    candidates = [first]
    if first.tmpfs_mb > 0:
        candidates.append(replace(first, tmpfs_mb=0))
    if first.user_namespace:
        candidates += [replace(c, user_namespace=False) for c in list(candidates)]
    errors: list[str] = []
    for candidate in candidates:
        result = _try(candidate, environ)
        if result.returncode == 0:
            if candidate != first:
                log.warning("bwrap refused part of the sandbox here (%s): running with user_namespace=%s, "
                            "tmpfs_mb=%d instead", errors[0][:300], candidate.user_namespace, candidate.tmpfs_mb)
            return candidate
        errors.append(f"exit code {result.returncode}: {result.stderr.strip()[:300]}")
    raise ValueError(f"verification.sandbox = \"bwrap\", but {program} cannot create its namespaces on this "
                     f"machine ({errors[0]}): {INSTALL_HINT} (bubblewrap 0.5 or newer), allow unprivileged user "
                     "namespaces (e.g. sysctl kernel.unprivileged_userns_clone=1), or run where it can")

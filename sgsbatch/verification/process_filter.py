"""The process filter: a seccomp program that lets the REPL run threads but create no process.

Lean needs threads only (`Task`s run on pthreads: `clone` with `CLONE_THREAD`), so a proof's code
that starts a process (a background writer, a process that answers on the reply channel or
replaces the next proof's pickle, a CPU burner that outlives the proof) is what this closes
(no process created by a proof, no file written outside its scratch). The filter, a classic BPF program built here byte by byte, returns:

- `EPERM` for `fork`, `vfork`, `execveat`, `clone` without `CLONE_THREAD` (what `posix_spawn`,
  `fork()` and `subprocess` use), and for every system call of another ABI (i386 through
  `int 0x80`, x32 numbers on x86_64), whose numbers the table below does not cover;
- `EPERM` for `unshare`: a user namespace of its own would give the proof's code the
  capabilities to mount a tmpfs of no size cap over its scratch (RAM the caps of sandbox.py do
  not bound), or anything else a fresh mount namespace allows;
- `ENOSYS` for `clone3`, whose flags sit in memory a filter cannot read: glibc (2.34+) then
  falls back to `clone`, which is judged by its flags;
- `EPERM` for `execve` unless its filename is the launcher's own buffer (one address, fixed
  before the filter is installed): the launcher's one exec of the REPL passes, an exec by the
  proof's code (which cannot put its path at that address before the exec replaced the image)
  fails.

Run as `python process_filter.py [--nproc=N] [--no-filter] PROGRAM ARGS...` (stdlib only, so it
runs from its path inside the sandbox): sets RLIMIT_NPROC to N when given (inside the sandbox's
user namespace the kernel then counts only the sandbox's own tasks: limits.py), sets
`no_new_privs`, installs the filter with `prctl(PR_SET_SECCOMP)` (unless `--no-filter`), then
execs PROGRAM, which keeps the filter and the limit, as do its threads. `sandbox.Sandbox.wrap` puts it right before
the REPL and the checker (after `lake env`, which has to start the REPL as a process of its own).
Covered architectures: x86_64 and aarch64 (`ARCHES`); elsewhere `FilterUnavailable` names the
machine and `verification.process_filter = false` is what to set.
Not covered: what the process does with its own threads and files (the sandbox, sandbox.py).
"""

from __future__ import annotations

import ctypes
import os
import platform
import resource
import shutil
import signal
import struct
import sys
from collections.abc import Sequence

# linux/audit.h, asm/unistd.h: (AUDIT_ARCH, {syscall: number}, first number of a foreign ABI or 0)
ARCHES: dict[str, tuple[int, dict[str, int], int]] = {
    "x86_64": (0xC000003E, {"fork": 57, "vfork": 58, "clone": 56, "clone3": 435, "execve": 59, "execveat": 322,
                            "unshare": 272}, 0x40000000),
    "aarch64": (0xC00000B7, {"clone": 220, "clone3": 435, "execve": 221, "execveat": 281, "unshare": 97}, 0),
}
CLONE_THREAD = 0x00010000
EPERM, ENOSYS = 1, 38
RET_ALLOW, RET_ERRNO = 0x7FFF0000, 0x00050000
_LD_ABS, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_NR, _ARCH, _ARG0_LO, _ARG0_HI = 0, 4, 16, 20  # offsets in struct seccomp_data (little-endian)
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2


class FilterUnavailable(RuntimeError):
    """The filter cannot be built or installed on this machine."""


def program(machine: str, exec_filename: int) -> bytes:
    """The filter for `machine` (`platform.machine()`), allowing `execve` only with `exec_filename`."""
    if machine not in ARCHES:
        raise FilterUnavailable(f"no seccomp process filter for the {machine!r} architecture (only "
                                f"{', '.join(ARCHES)}): set verification.process_filter = false")
    arch, nr, foreign = ARCHES[machine]
    code: list[tuple[int, object, object, int]] = []  # (op, jump-if-true, jump-if-false, k); jumps are labels

    def op(opcode: int, k: int, jt: object = 0, jf: object = 0) -> None:
        code.append((opcode, jt, jf, k))

    op(_LD_ABS, _ARCH)
    op(_JEQ, arch, 0, "deny")
    op(_LD_ABS, _NR)
    if foreign:
        op(_JGE, foreign, "deny", 0)
    for name in ("fork", "vfork", "execveat", "unshare"):
        if name in nr:
            op(_JEQ, nr[name], "deny", 0)
    op(_JEQ, nr["clone3"], "enosys", 0)
    op(_JEQ, nr["clone"], "clone", 0)
    op(_JEQ, nr["execve"], "exec", 0)
    op(_RET, RET_ALLOW)
    labels = {"clone": len(code)}
    op(_LD_ABS, _ARG0_LO)
    op(_JSET, CLONE_THREAD, "allow", "deny")
    labels["exec"] = len(code)
    op(_LD_ABS, _ARG0_LO)
    op(_JEQ, exec_filename & 0xFFFFFFFF, 0, "deny")
    op(_LD_ABS, _ARG0_HI)
    op(_JEQ, exec_filename >> 32, "allow", "deny")
    labels["deny"] = len(code)
    op(_RET, RET_ERRNO | EPERM)
    labels["enosys"] = len(code)
    op(_RET, RET_ERRNO | ENOSYS)
    labels["allow"] = len(code)
    op(_RET, RET_ALLOW)

    def jump(at: int, target: object) -> int:
        if isinstance(target, int):
            return target
        offset = labels[str(target)] - at - 1
        assert 0 <= offset < 256, f"jump to {target} out of range"
        return offset

    return b"".join(struct.pack("<HBBI", opcode, jump(i, jt), jump(i, jf), k)
                    for i, (opcode, jt, jf, k) in enumerate(code))


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def exec_filtered(argv: list[str], *, nproc: int = 0, seccomp: bool = True) -> None:
    """Set RLIMIT_NPROC to `nproc` (if > 0), install the filter (if `seccomp`) and exec `argv`
    (searched on PATH); returns only by raising."""
    if not argv:
        raise FilterUnavailable("process_filter.py needs the program to run")
    path = argv[0] if "/" in argv[0] else shutil.which(argv[0])
    if path is None:
        raise FilterUnavailable(f"{argv[0]!r} is not on PATH")
    libc = ctypes.CDLL(None, use_errno=True)
    filename = ctypes.create_string_buffer(os.fsencode(path))
    args = (ctypes.c_char_p * (len(argv) + 1))(*[os.fsencode(a) for a in argv], None)
    env = [os.fsencode(f"{k}={v}") for k, v in os.environ.items()]
    envp = (ctypes.c_char_p * (len(env) + 1))(*env, None)
    if nproc > 0:
        try:
            resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
        except (OSError, ValueError) as e:
            raise FilterUnavailable(f"setrlimit(RLIMIT_NPROC, {nproc}): {e}") from e
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise FilterUnavailable(f"prctl(PR_SET_NO_NEW_PRIVS): {os.strerror(ctypes.get_errno())}")
    if seccomp:
        code = program(platform.machine(), ctypes.addressof(filename))
        buf = ctypes.create_string_buffer(code, len(code))
        prog = _SockFprog(len(code) // 8, ctypes.addressof(buf))
        if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
            raise FilterUnavailable(f"prctl(PR_SET_SECCOMP): {os.strerror(ctypes.get_errno())}")
    # as subprocess does (restore_signals): Python ignores these, and an ignored signal stays
    # ignored across exec; the REPL gets the defaults (SIGXFSZ ends it at RLIMIT_FSIZE: limits.py)
    for sig in (signal.SIGPIPE, signal.SIGXFSZ):
        signal.signal(sig, signal.SIG_DFL)
    libc.execve(filename, args, envp)
    raise FilterUnavailable(f"execve {path}: {os.strerror(ctypes.get_errno())}")


def filtered(argv: Sequence[str], python: str = sys.executable, *, nproc: int = 0, seccomp: bool = True) -> list[str]:
    """`argv` with the launcher in front of the program that runs proofs: right after a leading
    `lake env` (lake starts its command as a process of its own, so the filter goes on that one),
    else in front; `nproc` and `seccomp` as in `exec_filtered`."""
    at = 2 if len(argv) > 2 and os.path.basename(argv[0]) == "lake" and argv[1] == "env" else 0
    options = ([f"--nproc={nproc}"] if nproc > 0 else []) + ([] if seccomp else ["--no-filter"])
    return [*argv[:at], python, os.path.abspath(__file__), *options, *argv[at:]]


def _options(args: list[str]) -> tuple[int, bool, list[str]]:
    """(nproc, seccomp, the program's argv) from the launcher's own leading options."""
    nproc, seccomp = 0, True
    while args and args[0].startswith("--"):
        option = args.pop(0)
        if option.startswith("--nproc="):
            try:
                nproc = int(option.split("=", 1)[1])
            except ValueError as e:
                raise FilterUnavailable(f"bad launcher option {option!r}") from e
        elif option == "--no-filter":
            seccomp = False
        else:
            raise FilterUnavailable(f"unknown launcher option {option!r}")
    return nproc, seccomp, args


def main() -> int:
    try:
        nproc, seccomp, argv = _options(sys.argv[1:])
        exec_filtered(argv, nproc=nproc, seccomp=seccomp)
    except FilterUnavailable as e:
        sys.stderr.write(f"process_filter: {e}\n")
    return 126


if __name__ == "__main__":
    sys.exit(main())

"""A client for one leanprover-community/repl process (JSON commands and replies, blank-line separated).

Covered: starting the process in its own session (so its whole process group can be killed
without touching anything else) under the rlimits of limits.py (address space, file size,
lifetime CPU, no core dumps); sending `{"cmd": ..., "env": N}`;
reading one reply with a wall-clock timeout (select on the pipe, no reader thread); telling apart
the ways a reply can fail: the process hangs (`ReplTimeout`), dies, prints garbage or a reply
cut off mid-JSON, or hits the memory, file-size or CPU limit (`ReplSystemError` with a `kind`:
memory_limit, file_size_limit, cpu_limit, naming the key); and killing only
the process group this client started, before the process is reaped (so its id cannot have
been reused). Not covered: what a reply means for a proof (rules.py), or pooling (pool.py).

Reply integrity: the proof's own code can print on the REPL's stdout (and read its stdin), so a
reply is accepted only if it answers the command sent: a command's reply carries the next fresh
env id (the REPL numbers envs 0, 1, 2, ...), only a command reply's keys and well-formed
messages; a `pickleTo` reply is exactly `{"env": N}`; output before a command is sent, surplus
output after a reply, and a process that exits or speaks after a proof's last reply (`settle`)
are ReplSystemErrors (the pool retries on a fresh process, then `error`), never a verdict. This
makes forgeries detectable, not impossible (a payload can predict env ids and time its output);
the kernel re-check (recheck.py), which reads its answers from a process that runs no model
code, is what a forged reply cannot get past.

Protocol (REPL v4.15.0): the REPL reads lines until a blank one, parses them as one JSON
command and prints one JSON reply (pretty-printed over several lines, never containing a blank
line) followed by a blank line. A reply is either a command result (`env`, `messages`,
`sorries`) or an error object `{"message": "Unknown environment."}`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import select
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from sgsbatch.verification.limits import Limits, limit_hit

log = logging.getLogger(__name__)

CRASH = "crash"
GARBAGE = "garbage"
CUT_OFF = "cut_off"
MEMORY = "memory_limit"
REPL_MESSAGE = "repl_message"
START = "start"
SURPLUS = "surplus_output"
MISMATCH = "reply_mismatch"
EXITED = "exited_after_reply"
# The keys a command reply may carry (REPL v4.15.0), and the severities of its messages.
REPLY_KEYS: frozenset[str] = frozenset({"env", "messages", "sorries", "tactics", "infotree"})
SEVERITIES: frozenset[str] = frozenset({"info", "warning", "error"})
# Error objects of the REPL itself that a verdict may quote; any other text is only described.
KNOWN_MESSAGES: frozenset[str] = frozenset({"Unknown environment.", "Unknown proof state."})
_MEMORY_MARKERS = ("out of memory", "std::bad_alloc", "MemoryError", "Cannot allocate memory")


def unquoted(data: bytes) -> str:
    """Output the proof's code may have written, described without quoting it (a
    verdict message must not carry a file's head out of the sandbox): its size and a digest."""
    return f"{len(data)} bytes, sha256 {hashlib.sha256(data).hexdigest()[:16]}"


class ReplTimeout(Exception):
    """No complete reply within the wall-clock limit (the process is left for the caller to kill)."""


class ReplSystemError(Exception):
    """The REPL itself failed (not the proof): `kind` is one of crash, garbage, cut_off, memory_limit,
    file_size_limit, cpu_limit, repl_message (an error object such as "Unknown environment."), start, or a broken reply
    integrity: surplus_output, reply_mismatch, exited_after_reply."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind = kind
        self.detail = detail


class ReplProcess:
    """One REPL process. Not thread-safe: one thread talks to one ReplProcess."""

    def __init__(self, command: Sequence[str], cwd: Path, memory_limit_mb: int = 0,
                 env: Mapping[str, str] | None = None, limits: Limits | None = None) -> None:
        """`limits` are the process's rlimits (limits.py); without them, RLIMIT_AS of `memory_limit_mb`
        (0 = none) and no core dumps."""
        if not command:
            raise ValueError("the REPL command is empty: set verification.repl_command")
        if not cwd.is_dir():
            raise ReplSystemError(START, f"project directory {cwd} does not exist (verification.project_dir)")
        self.argv = list(command)
        self.limits = limits if limits is not None else Limits(memory_mb=memory_limit_mb)
        self.memory_limit_mb = self.limits.memory_mb
        # on the host disk: the process's RLIMIT_FSIZE (verification.scratch_mb) bounds it
        self._stderr: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 (lives as long as the process)
        try:
            self.proc = subprocess.Popen(
                self.argv, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
                start_new_session=True, preexec_fn=self.limits.preexec(), env=env,
            )
        except OSError as e:
            self._stderr.close()
            raise ReplSystemError(START, f"cannot start {self.argv[0]!r} in {cwd}: {e}") from e
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._in = self.proc.stdin
        self._out_fd = self.proc.stdout.fileno()
        self._buf = b""
        self._killed = False
        self.commands_sent = 0
        self.next_env = 0  # the REPL numbers the env of every command it runs 0, 1, 2, ...
        # proof states (tactic mode, tactic_mode.py) are numbered 0, 1, 2, ... too, across commands'
        # sorries, tactics and pickles: the next fresh one is at least this
        self.next_proof_state = 0

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        """True until this client has killed (or seen the end of) the process."""
        return not self._killed

    def send(self, payload: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        """Send one command and return its reply (a dict). Raises ReplTimeout or ReplSystemError."""
        if self._killed:
            raise ReplSystemError(CRASH, "the REPL process was already stopped")
        data = json.dumps(payload, ensure_ascii=False).encode("utf-8") + b"\n\n"
        self._expect_quiet(0.0, "before the command was sent")
        try:
            self._in.write(data)
            self._in.flush()
        except (BrokenPipeError, OSError) as e:
            raise self._died(f"writing the command failed: {e}") from e
        self.commands_sent += 1
        return self.read_reply(timeout_s)

    def command(self, cmd: str, env: int | None, timeout_s: float) -> dict[str, Any]:
        """`{"cmd": cmd, "env": env}` and its reply, which must answer it: an integer `env` that is
        the next fresh one, only the keys of a command reply, well-formed messages; else a
        ReplSystemError (reply_mismatch, or repl_message for an error object)."""
        payload: dict[str, Any] = {"cmd": cmd} if env is None else {"cmd": cmd, "env": env}
        reply = self.send(payload, timeout_s)
        if "env" not in reply:
            message = reply.get("message")
            if isinstance(message, str) and set(reply) == {"message"}:
                known = message.strip() if message.strip() in KNOWN_MESSAGES else unquoted(message.encode())
                raise ReplSystemError(REPL_MESSAGE, known)
            raise ReplSystemError(GARBAGE, f"reply without an env ({unquoted(json.dumps(reply).encode())})")
        if not isinstance(reply["env"], int):
            raise ReplSystemError(GARBAGE, "reply with a non-integer env")
        problem = reply_problem(reply, self.next_env)
        if problem is not None:
            raise ReplSystemError(MISMATCH, problem)
        self.next_env += 1
        for sorry in reply.get("sorries") or []:
            if isinstance(sorry.get("proofState"), int):
                self.next_proof_state = max(self.next_proof_state, sorry["proofState"] + 1)
        return reply

    def pickle(self, env: int, path: Path, timeout_s: float) -> None:
        """Ask the REPL to write env `env` to `path` (`pickleTo`); the reply must be exactly `{"env": env}`."""
        reply = self.send({"pickleTo": str(path), "env": env}, timeout_s)
        if reply != {"env": env}:
            raise ReplSystemError(MISMATCH, f"reply to pickleTo env {env} ({unquoted(json.dumps(reply).encode())})")

    def settle(self, grace_s: float) -> None:
        """After the last reply of a proof: the process must stay alive and silent for `grace_s`.

        A proof's code can print on the REPL's stdout; a forged reply read in place of the real
        one leaves the real one behind, and a payload may exit once it has answered. Either makes
        this a ReplSystemError (surplus_output, exited_after_reply), so the proof is never verified.
        """
        self._expect_quiet(grace_s, "after the proof's last reply")
        if self.proc.poll() is not None:
            raise self._died("the REPL exited after answering", EXITED)

    def _expect_quiet(self, grace_s: float, when: str) -> None:
        if self._buf.strip():
            raise ReplSystemError(SURPLUS, f"output nobody asked for {when} ({unquoted(self._buf)})")
        if self._killed:
            return
        ready, _, _ = select.select([self._out_fd], [], [], grace_s)
        if not ready:
            return
        chunk = os.read(self._out_fd, 1 << 16)
        if not chunk:
            raise self._died(f"the REPL exited {when}", EXITED)
        raise ReplSystemError(SURPLUS, f"output nobody asked for {when} ({unquoted(chunk)})")

    def read_reply(self, timeout_s: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while b"\n\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ReplTimeout(f"no reply within {timeout_s:g} s")
            ready, _, _ = select.select([self._out_fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(self._out_fd, 1 << 16)
            if not chunk:
                if self._buf.strip():
                    raise self._died(f"reply cut off mid-JSON ({len(self._buf)} bytes) when the REPL exited",
                                     CUT_OFF)
                raise self._died("the REPL exited")
            self._buf += chunk
            if self._buf.startswith(b"\n"):  # stray blank lines between replies
                self._buf = self._buf.lstrip(b"\n")
        text, _, self._buf = self._buf.partition(b"\n\n")
        self._buf = self._buf.lstrip(b"\n")
        try:
            reply = json.loads(text.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            kind = CUT_OFF if text.lstrip().startswith(b"{") else GARBAGE
            raise ReplSystemError(kind, f"a reply that is not JSON ({unquoted(text)})") from e
        if not isinstance(reply, dict):
            raise ReplSystemError(GARBAGE, f"a reply that is not a JSON object ({unquoted(text)})")
        if self._buf.strip():
            raise ReplSystemError(SURPLUS, f"more output right after a reply ({unquoted(self._buf)})")
        return reply

    def stderr_tail(self, limit: int = 2000) -> str:
        try:
            self._stderr.seek(0, os.SEEK_END)
            size = self._stderr.tell()
            self._stderr.seek(max(0, size - limit))
            return self._stderr.read().decode("utf-8", "replace")
        except (OSError, ValueError):
            return ""

    def _died(self, detail: str, kind: str = CRASH) -> ReplSystemError:
        self.kill()
        tail = self.stderr_tail()
        hit = limit_hit(self.proc.returncode)
        if hit is not None:
            kind = hit[0]
            detail = f"{kind.replace('_', ' ')} ({hit[1]}) hit: {detail}"
        elif any(m in tail for m in _MEMORY_MARKERS):
            kind = MEMORY
            detail = f"memory limit ({self.memory_limit_mb} MB) hit: {detail}"
        if tail.strip():  # the proof's code can write stderr too: logged here, never quoted in a verdict
            log.warning("stderr of REPL %d: %s", self.proc.pid, tail.strip().splitlines()[-1][:300])
        return ReplSystemError(kind, f"{detail} (exit code {self.proc.returncode})")

    def kill(self) -> None:
        """Kill this client's process group (and nothing else), then reap the leader. Idempotent."""
        if self._killed:
            return
        self._killed = True
        # The leader is not reaped yet (nothing but this method waits on it), so its pid, which is
        # also the group id of the session it started, cannot have been given to another process.
        if self.proc.returncode is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            except PermissionError:  # not ours any more: never signal it
                pass
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)
        for f in (self._in, self.proc.stdout):  # stderr stays readable for stderr_tail()
            try:
                if f is not None:
                    f.close()
            except OSError:
                pass

    def close(self) -> None:
        """Ask the REPL to exit (end of input), give it a moment, then kill its group whatever it did."""
        if self._killed:
            return
        with contextlib.suppress(OSError):
            self._in.close()
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            try:  # WNOWAIT: look without reaping, so the group id stays ours until kill() has run
                if os.waitid(os.P_PID, self.proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                    break
            except ChildProcessError:
                break
            time.sleep(0.01)
        self.kill()


def reply_problem(reply: dict[str, Any], expected_env: int) -> str | None:
    """Why `reply` cannot be the REPL's answer to the command that gets env `expected_env`, or None."""
    if reply.get("env") != expected_env:
        env = reply.get("env")
        return f"reply for env {env if isinstance(env, int) else '?'}, expected the fresh env {expected_env}"
    extra = sorted(set(reply) - REPLY_KEYS)
    if extra:
        return f"reply with {len(extra)} unexpected keys"
    return messages_problem(reply)


def messages_problem(reply: dict[str, Any]) -> str | None:
    """Why a reply's `messages` and `sorries` are not the REPL's (lists of objects, well-formed messages)."""
    for key in ("messages", "sorries"):
        if key in reply and not (isinstance(reply[key], list) and all(isinstance(m, dict) for m in reply[key])):
            return f"reply whose {key!r} is not a list of objects"
    for m in reply.get("messages") or []:
        if m.get("severity") not in SEVERITIES or not isinstance(m.get("data"), str):
            return f"reply with a malformed message ({unquoted(json.dumps(m).encode())})"
    return None

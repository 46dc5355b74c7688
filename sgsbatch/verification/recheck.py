"""The trusted re-check: a proof the REPL calls verified is replayed through Lean's kernel elsewhere.

The REPL process that elaborated a proof may have run the proof's code (Lean runs code at
elaboration time), so nothing it says is trusted once it says "verified": a kernel-skipping
option, a forged reply on its stdout or a spoofed `#print axioms` all look alike there. With
`verification.kernel_recheck = true` (the default) the pool asks the REPL to pickle the proof's
environment (`pickleTo`, into the process's scratch directory) and sends the pickle to a checker
process (`verification.checker_command`, lean/SgsKernelCheck.lean) that never elaborates a proof:
it elaborates the header and statement on their own, replays every constant the proof added
through the kernel, compares the theorem's type with the statement's, and lists its axioms. Its
answer, on its own stdout, with the nonce of the request echoed, is the final verdict.

Covered: the client (`KernelChecker`, the REPL's JSON-and-blank-line protocol over
`ReplProcess`, one checker per pool process, restarted with it), the request and the checks on
the reply (its nonce, its shape), the reason codes (`REASONS`, each reported as `kernel_<code>`).
Not covered: the checker's own logic (lean/SgsKernelCheck.lean; compiled by `setup.sh --lean`,
tested against real Lean only where `lake` exists; here against a stand-in), the sandbox both
processes run in (sandbox.py).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from sgsbatch.verification.checks import reference_statement
from sgsbatch.verification.limits import Limits
from sgsbatch.verification.repl import GARBAGE, MISMATCH, ReplProcess, ReplSystemError

# What the checker answers when it refuses a proof (lean/SgsKernelCheck.lean).
REASONS: frozenset[str] = frozenset({
    "header_error", "reference_error", "no_pickle", "imports_changed", "unsafe_constant", "partial_constant",
    "kernel_rejected", "theorem_missing", "not_a_theorem", "statement_changed", "axioms", "bad_request",
    "checker_exception",
    # issue 26: code in a statement, a resolved name of the IO world, a redefined auxiliary constant
    "statement_code", "forbidden_constant", "meaning_changed",
})
# Refusals that say the check itself broke (the proof is then `error`, retried), not that the proof is wrong.
SYSTEM_REASONS: frozenset[str] = frozenset({"header_error", "no_pickle", "bad_request", "checker_exception"})
_REPLY_KEYS = frozenset({"id", "ok", "reason", "axioms", "detail"})


@dataclass(frozen=True)
class RecheckResult:
    """The checker's answer: `ok`, else `reason` (one of REASONS) and `detail`; `axioms` of the theorem."""

    ok: bool
    reason: str = ""
    detail: str = ""
    axioms: list[str] = field(default_factory=list)


def parse_reply(reply: dict[str, object], nonce: str) -> RecheckResult:
    """The result in a checker reply, or ReplSystemError if it is not the answer to request `nonce`."""
    if reply.get("id") != nonce:
        raise ReplSystemError(MISMATCH, f"checker reply for request {reply.get('id')!r}, expected {nonce!r}")
    if set(reply) != _REPLY_KEYS:
        raise ReplSystemError(GARBAGE, f"checker reply with keys {sorted(reply)}, expected {sorted(_REPLY_KEYS)}")
    ok, reason, detail, axioms = reply["ok"], reply["reason"], reply["detail"], reply["axioms"]
    if not (isinstance(ok, bool) and isinstance(reason, str) and isinstance(detail, str)
            and isinstance(axioms, list) and all(isinstance(a, str) for a in axioms)):
        raise ReplSystemError(GARBAGE, f"malformed checker reply: {json.dumps(reply)[:300]}")
    if not ok and reason not in REASONS:
        raise ReplSystemError(GARBAGE, f"checker refusal with an unknown reason {reason!r}")
    return RecheckResult(ok, reason, detail[:2000], list(axioms))


class KernelChecker:
    """One checker process. Not thread-safe: one pool slot owns one checker."""

    def __init__(self, command: Sequence[str], cwd: Path, memory_limit_mb: int = 0,
                 limits: Limits | None = None) -> None:
        self.proc = ReplProcess(command, cwd, memory_limit_mb, limits=limits)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def check(self, *, header: str, theorem: str, name: str, pickle: Path, timeout_s: float) -> RecheckResult:
        """Ask for the verdict on the pickled environment of `theorem` (whose full declared name is `name`).

        The statement goes without its final `by` (`reference_statement`): the checker appends
        ` sorry` and elaborates no tactic of the statement's text (issue 26, class 5)."""
        nonce = secrets.token_hex(16)
        request = {"id": nonce, "header": header, "statement": reference_statement(theorem), "name": name,
                   "pickle": str(pickle)}
        return parse_reply(self.proc.send(request, timeout_s), nonce)

    def kill(self) -> None:
        self.proc.kill()

    def close(self) -> None:
        self.proc.close()

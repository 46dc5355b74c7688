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
the reply (its nonce, its shape), the reason codes (`REASONS`, each reported as `kernel_<code>`), the kernel's heartbeat budget
(`kernel_heartbeats`: the budget the REPL's `addDecl` had for the declaration, statement options included).
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
from sgsbatch.verification.lexer import Token, lex
from sgsbatch.verification.limits import Limits
from sgsbatch.verification.repl import GARBAGE, MISMATCH, ReplProcess, ReplSystemError

# What the checker answers when it refuses a proof (lean/SgsKernelCheck.lean).
REASONS: frozenset[str] = frozenset({
    "header_error", "reference_error", "no_pickle", "imports_changed", "unsafe_constant", "partial_constant",
    "kernel_rejected", "theorem_missing", "not_a_theorem", "statement_changed", "axioms", "bad_request",
    "checker_exception",
    # code in a statement, a resolved name of the IO world, a redefined auxiliary constant
    "statement_code", "forbidden_constant", "meaning_changed",
})
# Refusals that say the check itself broke (the proof is then `error`, retried), not that the proof is wrong.
SYSTEM_REASONS: frozenset[str] = frozenset({"header_error", "no_pickle", "bad_request", "checker_exception"})
# Lean's default `maxHeartbeats` (v4.15.0 src/Lean/CoreM.lean, `register_builtin_option maxHeartbeats`):
# Lean's constant, not a setting of ours; used only to compare a proof's option with "none set".
LEAN_DEFAULT_MAX_HEARTBEATS = 200000
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


def _nat(tok: Token) -> int | None:
    """The value of a number literal token (`400000`, `0x61A80`), None for anything else."""
    if tok.kind != "num":
        return None
    try:
        return int(tok.text, 0)
    except ValueError:
        return int(tok.text) if tok.text.isdigit() else None


def _heartbeat_option(toks: Sequence[Token], i: int) -> int | None:
    """N if `set_option maxHeartbeats N` starts at token i (the name may be written `«maxHeartbeats»`)."""
    if i + 2 >= len(toks) or toks[i].kind != "ident" or toks[i].parts != ("set_option",):
        return None
    if toks[i + 1].kind != "ident" or toks[i + 1].parts != ("maxHeartbeats",):
        return None
    return _nat(toks[i + 2])


def _declaration_heartbeats(header: str, theorem: str) -> int | None:
    """The `maxHeartbeats` in force where the theorem is declared: the statement's innermost
    `set_option maxHeartbeats N in` prefix, else the header's last one still in scope, else None."""
    stmt = lex(theorem)
    found: int | None = None
    for i, tok in enumerate(stmt):
        if tok.kind == "ident" and tok.parts in (("theorem",), ("lemma",)):
            break
        n = _heartbeat_option(stmt, i)
        if n is not None and i + 3 < len(stmt) and stmt[i + 3].text == "in":
            found = n
    if found is not None:
        return found
    toks = lex(header)
    scopes: list[int | None] = [None]
    for i, tok in enumerate(toks):
        word = tok.parts if tok.kind == "ident" else ()
        if word in (("section",), ("namespace",)):
            scopes.append(scopes[-1])
        elif word == ("end",) and len(scopes) > 1:
            scopes.pop()
        elif (n := _heartbeat_option(toks, i)) is not None and not (i + 3 < len(toks) and toks[i + 3].text == "in"):
            scopes[-1] = n
    return scopes[-1]


def kernel_heartbeats(header: str, theorem: str, proof: str = "") -> int | None:
    """The kernel's `maxHeartbeats` for the replay: the budget the REPL's `addDecl` had, None if
    nothing sets one (Lean's default, LEAN_DEFAULT_MAX_HEARTBEATS, then applies on both sides).

    The theorem is declared under the statement's own `set_option maxHeartbeats N in` prefixes (the
    innermost, the last one, wins), else the header's last `set_option maxHeartbeats N` still in
    scope (one inside a `section`/`namespace` the header closes again is dropped at its `end`, as
    Lean drops it). A checker that used only the header's would turn a kernel-heavy proof
    under `set_option maxHeartbeats 0 in theorem ...` was `kernel_rejected` though the REPL had
    accepted it. A proof's own `set_option maxHeartbeats N in <tactic>` is the budget of the
    auxiliary declarations that tactic adds (`decide (config := { kernel := true })`'s lemma); the
    replay, which replays every constant under one budget, takes the largest of them all (0 =
    unlimited is the largest): heartbeats bound resources, not soundness, the REPL already did the
    same kernel work within its budgets, and the pool's wall clock bounds the checker. Covered: the
    syntax the static checks accept (checks.check_header / check_statement / check_proof). Not
    covered: options set by other means (none pass those checks)."""
    declared = _declaration_heartbeats(header, theorem)
    toks = lex(proof)
    tactic = [n for i in range(len(toks)) if (n := _heartbeat_option(toks, i)) is not None]
    if not tactic:
        return declared
    budgets = [LEAN_DEFAULT_MAX_HEARTBEATS if declared is None else declared, *tactic]
    return 0 if 0 in budgets else max(budgets)


class KernelChecker:
    """One checker process. Not thread-safe: one pool slot owns one checker."""

    def __init__(self, command: Sequence[str], cwd: Path, memory_limit_mb: int = 0,
                 limits: Limits | None = None) -> None:
        self.proc = ReplProcess(command, cwd, memory_limit_mb, limits=limits)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def check(self, *, header: str, theorem: str, name: str, pickle: Path, timeout_s: float,
              proof: str = "") -> RecheckResult:
        """Ask for the verdict on the pickled environment of `theorem` (whose full declared name is `name`).

        The statement goes without its final `by` (`reference_statement`): the checker appends
        ` sorry` and elaborates no tactic of the statement's text (code in a statement never runs). `maxHeartbeats`
        is the kernel's budget for the replay (`kernel_heartbeats`; null: the header's);
        `proof` (the proof's text) adds its own `set_option maxHeartbeats N in` budgets to it."""
        nonce = secrets.token_hex(16)
        request = {"id": nonce, "header": header, "statement": reference_statement(theorem), "name": name,
                   "pickle": str(pickle), "maxHeartbeats": kernel_heartbeats(header, theorem, proof)}
        return parse_reply(self.proc.send(request, timeout_s), nonce)

    def kill(self) -> None:
        self.proc.kill()

    def close(self) -> None:
        self.proc.close()

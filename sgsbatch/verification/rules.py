"""The verdict rules: from the REPL's replies for one proof to a `Verdict`.

A proof is verified only if, in the reply to `{"cmd": theorem + proof, "env": header_env}`:
there is no message of severity error; the `sorries` list is empty; no warning says the
declaration uses sorry (`'sorry'` in Lean v4.15.0, `` `sorry` `` in later versions: both are
matched); no warning contains "failed" (the reference implementation's rule,
sgs/verification/prover/lean/verifier.py; it also rejects some honest proofs, e.g. an `aesop`
that warns "failed to ..." yet closes the goal, so it is `verification.failed_warning_fails`,
on by default); and in the reply to the audit command sent afterwards in the proof's env
(`AUDIT_TEMPLATE`: `#print axioms _root_.NAME` then `#check @_root_.NAME`, by the root name so
that a header's `open` cannot make the name ambiguous): the theorem
exists under the dataset's name, depends only on `ALLOWED_AXIOMS`, and its elaborated type is
the one the dataset statement elaborates to on its own (`REFERENCE_TEMPLATE`, statement + sorry,
checked once per process and statement). Reason codes: `REASONS`.

Not covered: talking to the REPL (repl.py), retries and timeouts (pool.py), the static checks
that run before any of this (checks.py). Messages are kept, each cut to `MESSAGE_CHARS`
characters and at most `MAX_MESSAGES` of them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from sgsbatch.verification.verdict import FAILED, VERIFIED, Verdict

ALLOWED_AXIOMS: frozenset[str] = frozenset({"propext", "Classical.choice", "Quot.sound"})
SORRY_WARNINGS: tuple[str, ...] = ("declaration uses 'sorry'", "declaration uses `sorry`")
AUDIT_TEMPLATE = "#print axioms _root_.{name}\n#check @_root_.{name}"
REFERENCE_TEMPLATE = "{theorem} sorry\n#check @_root_.{name}"
MESSAGE_CHARS = 2000
MAX_MESSAGES = 20

LEAN_ERROR = "lean_error"
SORRY = "sorry"
FAILED_WARNING = "failed_warning"
AXIOMS = "axioms"
STATEMENT_MISSING = "statement_missing"
STATEMENT_CHANGED = "statement_changed"
AUDIT_UNREADABLE = "audit_unreadable"
REASONS: frozenset[str] = frozenset({LEAN_ERROR, SORRY, FAILED_WARNING, AXIOMS, STATEMENT_MISSING,
                                     STATEMENT_CHANGED, AUDIT_UNREADABLE})

_DEPENDS_RE = re.compile(r"depends on axioms:\s*\[(?P<axioms>[^\]]*)\]", re.S)
_NO_AXIOMS = "does not depend on any axioms"


def _messages(reply: dict[str, Any]) -> list[dict[str, Any]]:
    msgs = reply.get("messages") or []
    return [m for m in msgs if isinstance(m, dict)] if isinstance(msgs, list) else []


def format_message(msg: dict[str, Any], limit: int = MESSAGE_CHARS) -> str:
    """`severity line:col: data`, the data cut to `limit` characters."""
    pos = msg.get("pos") or {}
    where = f"{pos.get('line', '?')}:{pos.get('column', '?')}" if isinstance(pos, dict) else "?"
    data = str(msg.get("data", ""))
    if len(data) > limit:
        data = data[:limit] + f"... [{len(data) - limit} more characters]"
    return f"{msg.get('severity', '?')} {where}: {data}"


def kept_messages(replies: Sequence[dict[str, Any]]) -> list[str]:
    """Lean's messages of `replies`, formatted and truncated (at most MAX_MESSAGES)."""
    out = [format_message(m) for r in replies for m in _messages(r)]
    if len(out) > MAX_MESSAGES:
        out = out[: MAX_MESSAGES - 1] + [f"... {len(out) - MAX_MESSAGES + 1} more messages"]
    return out


def proof_failure(reply: dict[str, Any], failed_warning_fails: bool = True) -> str | None:
    """The reason code why the proof's own reply already fails it, or None.

    `failed_warning_fails`: a warning containing "failed" fails the proof (the reference's rule).
    """
    msgs = _messages(reply)
    if any(m.get("severity") == "error" for m in msgs):
        return LEAN_ERROR
    if reply.get("sorries"):
        return SORRY
    warnings = [str(m.get("data", "")) for m in msgs if m.get("severity") == "warning"]
    if any(any(s in w for s in SORRY_WARNINGS) for w in warnings):
        return SORRY
    if failed_warning_fails and any("failed" in w for w in warnings):
        return FAILED_WARNING
    return None


def parse_axioms(data: str) -> list[str] | None:
    """The axioms listed by a `#print axioms` message ([] for none), None if it is not one."""
    if _NO_AXIOMS in data:
        return []
    m = _DEPENDS_RE.search(data)
    if m is None:
        return None
    return [a.strip() for a in m.group("axioms").split(",") if a.strip()]


def check_output(reply: dict[str, Any]) -> str | None:
    """The text of the last info message that is not an axiom listing (a `#check` output)."""
    infos = [str(m.get("data", "")) for m in _messages(reply)
             if m.get("severity") == "info" and parse_axioms(str(m.get("data", ""))) is None]
    return infos[-1].strip() if infos else None


def reference_type(reply: dict[str, Any]) -> str | None:
    """The `#check` text of the reference command, None if the statement alone has errors."""
    if any(m.get("severity") == "error" for m in _messages(reply)):
        return None
    return check_output(reply)


def judge(proof_reply: dict[str, Any], audit_reply: dict[str, Any] | None, reference: str | None,
          failed_warning_fails: bool = True) -> Verdict:
    """The verdict for one proof: `audit_reply` may be None only when the proof already failed."""
    replies = [proof_reply] if audit_reply is None else [proof_reply, audit_reply]
    messages = kept_messages(replies)
    failure = proof_failure(proof_reply, failed_warning_fails)
    if failure is not None:
        return Verdict(FAILED, failure, messages)
    assert audit_reply is not None, "a proof that passed its own reply is audited"
    audit_msgs = _messages(audit_reply)
    if any(m.get("severity") == "error" for m in audit_msgs):
        return Verdict(FAILED, STATEMENT_MISSING, messages)
    listed = [a for m in audit_msgs if (a := parse_axioms(str(m.get("data", "")))) is not None]
    if len(listed) != 1:
        return Verdict(FAILED, AUDIT_UNREADABLE, messages)
    bad = sorted(set(listed[0]) - ALLOWED_AXIOMS)
    if bad:
        return Verdict(FAILED, AXIOMS, [*messages, "axioms outside " + ", ".join(sorted(ALLOWED_AXIOMS)) + ": "
                                        + ", ".join(bad)])
    if reference is not None and check_output(audit_reply) != reference:
        return Verdict(FAILED, STATEMENT_CHANGED, [*messages, f"expected the statement to elaborate to: {reference}"])
    return Verdict(VERIFIED, None, messages)

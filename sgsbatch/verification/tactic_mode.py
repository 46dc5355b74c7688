"""The REPL's tactic mode, on a `ReplProcess` (repl.py): proof states, tactics, pickled proof states.

Protocol (REPL v4.15.0, the recorded transcripts proof_step, invalid_tactic, tactic_mode_sorry,
by_cases, unknown_proof_state, unknown_tactic, pickle_proof_state_*): a command whose proof is
`by sorry` answers a `sorries` entry with a `proofState` and its `goal` (the search's root);
`{"tactic": t, "proofState": n}` answers `{"proofState": m, "goals": [...]}`, with `messages`,
`sorries` and `traces` when there are any; `{"pickleTo": P, "proofState": n}` and
`{"unpickleProofStateFrom": P}` answer the same shape (each makes a fresh proof state). The REPL
numbers proof states 0, 1, 2, ... across all of these (a tactic's own `sorries` take numbers
before its result).

What an answer means (`TacticReply`): a legal edge is a reply with no error-severity message and
no `sorries` (`invalid_tactic`: an error with `goals: []` is a failed edge, not a finished proof;
`tactic_mode_sorry`: a `sorry` closes goals but is failed too). The REPL's own error objects are
failed edges with a clear error: `{"message": "Unknown proof state."}` -> `unknown_proof_state`,
`{"message": "Lean error:\\n<input>:1:1: unknown tactic"}` -> `lean_error: <input>:1:1: unknown tactic`.

Reply integrity, as `ReplProcess.command` checks it: only the keys a tactic reply carries, an
integer `proofState` that is fresh (not below `ReplProcess.next_proof_state`: a reply replayed from
earlier cannot pass), goals that are strings, well-formed messages; anything else is a
ReplSystemError (reply_mismatch or garbage). The numbering is checked for freshness, not for the
exact next number, so a REPL that skips numbers still works. Not covered: the verdict (tactic mode
is not one, leanprover-community/repl issue #44: a found proof goes through the verify pool), the search's bookkeeping
(search/lean_env.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sgsbatch.verification.repl import (
    GARBAGE,
    MISMATCH,
    ReplProcess,
    ReplSystemError,
    messages_problem,
    unquoted,
)

# The keys a tactic, pickle or unpickle reply may carry (REPL v4.15.0).
TACTIC_REPLY_KEYS: frozenset[str] = frozenset({"proofState", "goals", "messages", "sorries", "traces"})
UNKNOWN_PROOF_STATE = "unknown_proof_state"
LEAN_ERROR = "lean_error"
SORRY = "sorry"
ERROR_CHARS = 500  # an edge's error text is cut here (it goes into logs and the search's records)


@dataclass(frozen=True)
class TacticReply:
    """One tactic-mode answer: the new proof state and its goals, or why the edge failed."""

    state: int | None
    goals: tuple[str, ...] = ()
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def _cut(text: str) -> str:
    return text if len(text) <= ERROR_CHARS else text[:ERROR_CHARS] + "…"


def _messages_problem(reply: dict[str, Any]) -> str | None:
    problem = messages_problem(reply)
    if problem is not None:
        return problem
    for s in reply.get("sorries") or []:
        if not isinstance(s.get("proofState"), int) or not isinstance(s.get("goal"), str):
            return "reply with a malformed sorry (no integer proofState or no goal)"
    return None


def _error_of(reply: dict[str, Any]) -> str | None:
    errors = [m["data"] for m in reply.get("messages") or [] if m.get("severity") == "error"]
    if errors:
        return _cut(f"{LEAN_ERROR}: {errors[0]}")
    if reply.get("sorries"):
        return SORRY
    return None


def repl_message(reply: dict[str, Any]) -> TacticReply | None:
    """The failed edge of a REPL error object (`{"message": ...}` alone), else None."""
    message = reply.get("message")
    if set(reply) != {"message"} or not isinstance(message, str):
        return None
    if message.strip() == "Unknown proof state.":
        return TacticReply(None, error=UNKNOWN_PROOF_STATE)
    return TacticReply(None, error=_cut(f"{LEAN_ERROR}: {message.removeprefix('Lean error:').strip()}"))


def parse_tactic_reply(reply: dict[str, Any], next_state: int | None = None) -> TacticReply:
    """What a tactic (or pickle/unpickle) reply says. `next_state`: the lowest fresh proof state
    (None: numbering not checked, as for recorded replies). Raises ReplSystemError for a reply
    that cannot be the REPL's answer."""
    failed = repl_message(reply)
    if failed is not None:
        return failed
    state = reply.get("proofState")
    if not isinstance(state, int) or isinstance(state, bool):
        raise ReplSystemError(GARBAGE, f"tactic reply without an integer proofState ({unquoted(json.dumps(reply).encode())})")
    extra = sorted(set(reply) - TACTIC_REPLY_KEYS)
    if extra:
        raise ReplSystemError(MISMATCH, f"tactic reply with {len(extra)} unexpected keys")
    goals = reply.get("goals", [])
    if not (isinstance(goals, list) and all(isinstance(g, str) for g in goals)):
        raise ReplSystemError(MISMATCH, "tactic reply whose goals are not a list of strings")
    problem = _messages_problem(reply)
    if problem is not None:
        raise ReplSystemError(MISMATCH, problem)
    if next_state is not None:
        numbers = [state, *(s["proofState"] for s in reply.get("sorries") or [])]
        if min(numbers) < next_state:
            raise ReplSystemError(MISMATCH, f"tactic reply for proof state {min(numbers)}, expected a fresh one "
                                            f"(>= {next_state})")
    error = _error_of(reply)
    if error is not None:
        return TacticReply(None, error=error)
    return TacticReply(state, tuple(goals))


def parse_start_reply(reply: dict[str, Any]) -> TacticReply:
    """The root proof state of a command `... := by sorry` (its one sorry), or why there is none:
    an error message, or not exactly one sorry. The command's integrity is `ReplProcess.command`'s."""
    problem = _messages_problem(reply)
    if problem is not None:
        raise ReplSystemError(MISMATCH, problem)
    errors = [m["data"] for m in reply.get("messages") or [] if m.get("severity") == "error"]
    if errors:
        return TacticReply(None, error=_cut(f"{LEAN_ERROR}: {errors[0]}"))
    sorries = reply.get("sorries") or []
    if len(sorries) != 1:
        return TacticReply(None, error=f"bad_statement: the statement gave {len(sorries)} sorries, expected one "
                                       "(it must end in `:= by sorry`)")
    return TacticReply(int(sorries[0]["proofState"]), (sorries[0]["goal"],))


def _answer(repl: ReplProcess, payload: dict[str, Any], timeout_s: float) -> TacticReply:
    reply = repl.send(payload, timeout_s)
    parsed = parse_tactic_reply(reply, repl.next_proof_state)
    if repl_message(reply) is None:
        numbers = [reply["proofState"], *(s["proofState"] for s in reply.get("sorries") or [])]
        repl.next_proof_state = max(numbers) + 1
    return parsed


def start(repl: ReplProcess, theorem: str, env: int | None, timeout_s: float) -> TacticReply:
    """Elaborate `theorem` (ending in `:= by sorry`) in env `env`: its root proof state and goal."""
    return parse_start_reply(repl.command(theorem, env, timeout_s))


def apply_tactic(repl: ReplProcess, tactic: str, state: int, timeout_s: float) -> TacticReply:
    """`{"tactic": tactic, "proofState": state}`. Raises ReplTimeout or ReplSystemError."""
    return _answer(repl, {"tactic": tactic, "proofState": state}, timeout_s)


def pickle_state(repl: ReplProcess, state: int, path: Path, timeout_s: float) -> TacticReply:
    """`{"pickleTo": path, "proofState": state}`: the REPL writes the proof state to `path` (and
    answers with a fresh proof state of the same goals)."""
    return _answer(repl, {"pickleTo": str(path), "proofState": state}, timeout_s)


def unpickle_state(repl: ReplProcess, path: Path, timeout_s: float, env: int | None = None) -> TacticReply:
    """`{"unpickleProofStateFrom": path}` (in env `env` when given): the proof state read back."""
    payload: dict[str, Any] = {"unpickleProofStateFrom": str(path)}
    if env is not None:
        payload["env"] = env
    return _answer(repl, payload, timeout_s)

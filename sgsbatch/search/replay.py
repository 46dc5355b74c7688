"""The `replay` tactic environment: answers from recorded REPL transcripts (tests, no Lean).

`ReplayTacticEnvironment(directory)` reads every `X.in` / `X.expected.out` pair under `directory`
(the REPL's recorded commands and its real replies, in order; transcripts that read `.lean` files
are left out). A start answers when its command text was recorded: `theorem` alone (empty
header), `header + "\\n" + theorem` as one command, or `theorem` run in the env of a recorded
command equal to `header`; its root is the recorded sorry's proof state and goal. An apply answers
when (recorded proof state, tactic) was recorded in the same transcript, with the recorded reply
read by the real client's parser (verification/tactic_mode.py: so a replay tests the parser);
anything else is the failed edge `unrecorded`. Proof states are numbered per transcript by the
REPL, so the environment names each (transcript, recorded number) by its own integer.

Not covered: Lean (nothing is elaborated), timeouts, the static checks (the transcripts hold what
they hold), pickles (a state reached only by unpickling cannot be named by an apply).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sgsbatch.search.environment import Apply, Start, TacticResult
from sgsbatch.verification import tactic_mode as T

log = logging.getLogger(__name__)

UNRECORDED = "unrecorded"


def _blocks(path: Path) -> list[dict[str, Any]]:
    return [json.loads(b) for b in path.read_text(encoding="utf-8").split("\n\n") if b.strip()]


class ReplayTacticEnvironment:
    """`TacticEnvironment` answering from recorded transcripts (see the module docstring)."""

    name = "replay"

    def __init__(self, directory: str | Path) -> None:
        root = Path(directory).expanduser()
        if not root.is_dir():
            raise ValueError(f"search.replay_dir {str(directory)!r} is not a directory: point it at recorded REPL "
                             "transcripts (X.in and X.expected.out pairs)")
        # (command text, env's command text or None) -> (transcript, reply); first recording wins
        self._commands: dict[tuple[str, str | None], tuple[int, dict[str, Any]]] = {}
        self._tactics: dict[tuple[int, int, str], dict[str, Any]] = {}  # (transcript, proofState, tactic) -> reply
        self.transcripts: list[Path] = []
        for inp in sorted(root.rglob("*.in")):
            out = inp.with_name(inp.name[: -len(".in")] + ".expected.out")
            if out.is_file():
                self._load(inp, out)
        if not self.transcripts:
            raise ValueError(f"search.replay_dir {str(root)!r} holds no recorded transcripts (X.in with X.expected.out)")
        self._states: list[tuple[int, int]] = []  # our state -> (transcript, recorded proofState)
        self._keys: dict[str, set[int]] = {}
        log.info("tactic environment replay: %d transcripts from %s", len(self.transcripts), root)

    def _load(self, inp: Path, out: Path) -> None:
        commands, replies = _blocks(inp), _blocks(out)
        if any("path" in c for c in commands) or len(commands) != len(replies):
            return  # reads a .lean file that is not there, or not wholly recorded
        t = len(self.transcripts)
        self.transcripts.append(inp)
        env_text: dict[int, str] = {}
        for command, reply in zip(commands, replies, strict=True):
            if "cmd" in command and isinstance(reply.get("env"), int):
                env_text[reply["env"]] = command["cmd"]
                context = env_text.get(command["env"]) if isinstance(command.get("env"), int) else None
                self._commands.setdefault((command["cmd"], context), (t, reply))
            elif "tactic" in command and isinstance(command.get("proofState"), int):
                self._tactics.setdefault((t, command["proofState"], command["tactic"]), reply)

    def _name(self, transcript: int, state: int) -> int:
        self._states.append((transcript, state))
        return len(self._states) - 1

    def _start(self, s: Start) -> TacticResult:
        header = s.header.strip()
        candidates = [(s.theorem, None)] if not header else [(s.header + "\n" + s.theorem, None), (s.theorem, s.header)]
        for candidate in candidates:
            hit = self._commands.get(candidate)
            if hit is None:
                continue
            transcript, reply = hit
            root = T.parse_start_reply(reply)
            if not root.ok or root.state is None:
                return TacticResult(False, error=root.error)
            state = self._name(transcript, root.state)
            self._keys.setdefault(s.key, set()).add(state)
            return TacticResult(True, state, root.goals)
        return TacticResult(False, error=UNRECORDED)

    def _apply(self, a: Apply) -> TacticResult:
        if a.state not in self._keys.get(a.key, set()):
            return TacticResult(False, error=T.UNKNOWN_PROOF_STATE)
        transcript, recorded = self._states[a.state]
        reply = self._tactics.get((transcript, recorded, a.tactic))
        if reply is None:
            return TacticResult(False, error=UNRECORDED)
        parsed = T.parse_tactic_reply(reply)
        if not parsed.ok or parsed.state is None:
            return TacticResult(False, error=parsed.error)
        state = self._name(transcript, parsed.state)
        self._keys[a.key].add(state)
        return TacticResult(True, state, parsed.goals)

    def start_many(self, starts: Sequence[Start]) -> list[TacticResult]:
        return [self._start(s) for s in starts]

    def apply_many(self, calls: Sequence[Apply]) -> list[TacticResult]:
        return [self._apply(a) for a in calls]

    def finish(self, key: str) -> None:
        self._keys.pop(key, None)

    def close(self) -> None:
        self._keys.clear()

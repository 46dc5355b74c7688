"""Tactic mode of the stand-in REPL (fake_repl.py, rules mode): a small deterministic model, not Lean.

Modelled on the recorded v4.15.0 replies (proof_step, invalid_tactic, tactic_mode_sorry,
unknown_proof_state, unknown_tactic, pickle_proof_state_1). Proof states are numbered 0, 1, 2, ...
across commands' sorries, tactics and pickles, as the REPL does.

- A command `... := by sorry` (`theorem`, `lemma`, `def`, `example`) gets a `sorries` entry with a
  fresh proof state whose goal is built from the statement: each leading binder `(x y : T)` a
  hypothesis line `x y : T`, then `⊢ <type>`; plus the warning "declaration uses 'sorry'".
- `{"tactic": t, "proofState": n}`: an unknown `n` -> `{"message": "Unknown proof state."}`;
  FAKE_HANG never answers, FAKE_CRASH exits, FAKE_SLOW sleeps 0.3 s, FAKE_ERROR is an error
  message. A first word outside the model's tactics -> `{"message": "Lean error:\\n<input>:1:1:
  unknown tactic"}` (no proof state used). On the first goal: `sorry` closes it with a sorry entry
  (numbered before the result, as recorded); another tactic mentioning `sorry` keeps the goals with
  a sorry entry; `rfl`, `norm_num`, `simp`, `linarith`, `omega`, `decide`, `trivial` close it unless
  its target is `False` (then the error "<tactic> failed"); `exact h` / `assumption` close it when
  `h` is a hypothesis (or any hypothesis's type is the target), else "unknown identifier 'h'";
  `intro x` turns a target `A → B` into hypothesis `x : A` and target `B` (`∀ y : A, B` likewise,
  `y` renamed to `x`), else the error "no additional binders"; `have h : T := ...` adds the
  hypothesis `h : T`; `skip` changes nothing; no goal left -> the error "no goals to be proved".
  An error reply uses a proof state and has `goals: []`, as recorded.
- `{"pickleTo": P, "proofState": n}` writes the goals as JSON to P and answers a fresh proof state
  with the same goals; `{"unpickleProofStateFrom": P}` reads them back into a fresh proof state.
Not covered: real elaboration, case names, several goals from one tactic, traces.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path

CLOSERS = {"rfl", "norm_num", "simp", "linarith", "omega", "decide", "trivial"}
KNOWN = CLOSERS | {"exact", "assumption", "intro", "have", "sorry", "skip"}
BY_SORRY = re.compile(r":=\s*by\s+sorry\s*$")


def _error(data: str) -> dict:
    return {"severity": "error", "pos": {"line": 0, "column": 0}, "endPos": {"line": 0, "column": 0}, "data": data}


def goal_of(cmd: str) -> str:
    """The goal of a `kw name binders : type := by sorry` command, as Lean prints it."""
    m = re.search(r"\b(theorem|lemma|def|example)\b(.*)", BY_SORRY.sub("", cmd), re.S)
    if m is None:
        return "⊢ ?"
    rest = m.group(2).strip()
    if m.group(1) != "example":
        rest = rest.split(None, 1)[1] if len(rest.split(None, 1)) > 1 else ""
    hyps = []
    while (b := re.match(r"\s*[({\[]([^(){}\[\]]*?) : ([^(){}\[\]]*)[)}\]]", rest)):
        hyps.append(f"{b.group(1).strip()} : {b.group(2).strip()}")
        rest = rest[b.end():]
    target = " ".join(rest.strip().removeprefix(":").split())
    return "\n".join([*hyps, f"⊢ {target}"])


def _split(goal: str) -> tuple[list[str], str]:
    lines = goal.split("\n")
    return lines[:-1], lines[-1].removeprefix("⊢ ")


def _join(hyps: list[str], target: str) -> str:
    return "\n".join([*hyps, f"⊢ {target}"])


class ProofStates:
    """The proof states of one stand-in process."""

    def __init__(self) -> None:
        self.states: dict[int, list[str]] = {}
        self.next = 0

    def fresh(self, goals: list[str]) -> int:
        n = self.next
        self.next += 1
        self.states[n] = goals
        return n

    def command_sorry(self, cmd: str) -> dict | None:
        """The sorries entry of a `:= by sorry` command (None for any other command)."""
        if not BY_SORRY.search(cmd):
            return None
        goal = goal_of(cmd)
        line = cmd.rstrip().count("\n") + 1
        col = len(cmd.rstrip().split("\n")[-1]) - len("sorry")
        return {"proofState": self.fresh([goal]), "pos": {"line": line, "column": col}, "goal": goal,
                "endPos": {"line": line, "column": col + 5}}

    def answer(self, data: dict) -> dict:
        if "unpickleProofStateFrom" in data:
            goals = json.loads(Path(data["unpickleProofStateFrom"]).read_text())["goals"]
            return {"proofState": self.fresh(goals), "goals": goals}
        n = data.get("proofState")
        if not isinstance(n, int) or n not in self.states:
            return {"message": "Unknown proof state."}
        goals = self.states[n]
        if "pickleTo" in data:
            Path(data["pickleTo"]).write_text(json.dumps({"goals": goals}))
            return {"proofState": self.fresh(goals), "goals": goals}
        return self.tactic(str(data.get("tactic", "")), goals)

    def tactic(self, tactic: str, goals: list[str]) -> dict:
        if "FAKE_HANG" in tactic:
            time.sleep(3600)
        if "FAKE_CRASH" in tactic:
            sys.stderr.write("fake_repl: crashing on purpose in tactic mode\n")
            os._exit(1)
        if "FAKE_SLOW" in tactic:
            time.sleep(0.3)
        words = tactic.split()
        first = words[0] if words else ""
        if "FAKE_ERROR" not in tactic and first not in KNOWN:
            return {"message": "Lean error:\n<input>:1:1: unknown tactic"}
        sorries: list[dict] = []
        if "sorry" in tactic and goals:
            sorries.append({"proofState": self.fresh([goals[0]]), "goal": goals[0]})
        new, error = self._step(tactic, first, words, goals)
        if error is not None:
            return {"proofState": self.fresh([]), "messages": [_error(error)], "goals": []}
        out: dict = {"sorries": sorries} if sorries else {}
        out.update({"proofState": self.fresh(new), "goals": new})
        return out

    def _step(self, tactic: str, first: str, words: list[str], goals: list[str]) -> tuple[list[str], str | None]:
        if "FAKE_ERROR" in tactic:
            return [], "unsolved goals\n⊢ False"
        if not goals:
            return [], "no goals to be proved"
        hyps, target = _split(goals[0])
        names = {n for h in hyps for n in h.split(" : ", 1)[0].split()}
        if first == "sorry":
            return goals[1:], None
        if first in ("have", "skip") or "sorry" in tactic:
            if first == "have" and ":" in tactic:
                name, typ = tactic.removeprefix("have").split(":=", 1)[0].split(":", 1)
                hyps = [*hyps, f"{name.strip() or 'this'} : {typ.strip()}"]
            return [_join(hyps, target), *goals[1:]], None
        if first in CLOSERS:
            return (goals[1:], None) if target != "False" else ([], f"{first} failed")
        if first in ("exact", "assumption"):
            ident = words[1] if first == "exact" and len(words) > 1 else None
            if (ident in names) if ident else any(h.split(" : ", 1)[1] == target for h in hyps):
                return goals[1:], None
            return [], f"unknown identifier '{ident}'" if ident else "assumption failed"
        # intro
        name = words[1] if len(words) > 1 else "a"
        if "→" in target:
            a, b = target.split("→", 1)
            return [_join([*hyps, f"{name} : {a.strip()}"], b.strip()), *goals[1:]], None
        m = re.match(r"∀\s*\(?(\w+)\s*:\s*([^,)]+)\)?\s*,\s*(.*)", target)
        if m:
            body = re.sub(rf"\b{re.escape(m.group(1))}\b", name, m.group(3))
            return [_join([*hyps, f"{name} : {m.group(2).strip()}"], body), *goals[1:]], None
        return [], "no additional binders or let bindings in the goal to introduce"

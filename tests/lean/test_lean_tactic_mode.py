"""The REPL client's tactic mode (verification/tactic_mode.py) against every recorded v4.15.0
transcript that uses tactic mode (replayed by fake_repl.py --transcript), its reply integrity,
and the stand-in's own tactic model (fake_tactics.py) in rules mode."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from leanlib import FAKE_COMMAND

from sgsbatch.verification import tactic_mode as T
from sgsbatch.verification.repl import GARBAGE, MISMATCH, ReplProcess, ReplSystemError

UNRECORDED = {"H20231214"}  # Mathlib/test/H20231214.in has no .expected.out: nothing to compare
GM = "x : ℕ\nh : 2 * (2 * (2 * (2 * x))) = 48\n⊢ x = 3"
IND = "case succ\nn✝ : ℕ\na✝ : n✝ = n✝\n⊢ n✝ + 1 = n✝ + 1"
G1 = "case pos\nx : Int\nh : x < 0\n⊢ x = x"
G2 = "case neg\nx : Int\nh : ¬x < 0\n⊢ x = x"
UNSOLVED = "lean_error: unsolved goals\nx : Int\nh0 : x > 0\n⊢ x > 0"
# transcript -> what the client makes of each tactic-mode reply, in order: (state, goals) or the error
EXPECTED: dict[str, list[tuple[int, tuple[str, ...]] | str]] = {
    "proof_step": [(1, ("⊢ Int",)), (2, ("t : Nat\n⊢ Nat",)), (3, ())],
    "readme": [(1, ("x : Unit\n⊢ Int",)), (2, ())],
    "invalid_tactic": ["lean_error: unknown identifier 'my_fake_premise'"],
    "unknown_proof_state": [T.UNKNOWN_PROOF_STATE],
    "unknown_tactic": ["lean_error: <input>:1:1: unknown tactic"],
    "tactic_mode_sorry": [T.SORRY],
    "have_by_sorry": [T.SORRY],
    "sorry_hypotheses": [T.SORRY],
    "by_cases": [(1, (G1, G2)), (2, (G2,)), T.SORRY],
    "name_generator": [T.SORRY, (3, ()), (4, ()), (5, ()), (6, ()), (7, ()), UNSOLVED, UNSOLVED],
    "trace_simp": [(1, ("⊢ f = 37",)), (2, ())],
    "pickle_proof_state_1": [(1, ("⊢ Nat",)), (2, ("⊢ Nat",)), (3, ("t : Nat\n⊢ Nat",)), (4, ("t : Nat\n⊢ Nat",)),
                             (5, ("t : Nat\n⊢ Nat",)), (6, ())],
    "pickle_proof_state_2": [(0, ("t : Nat\n⊢ Nat",)), (1, ())],
    # Mathlib/test/
    "20240209": ["lean_error: unsolved goals\n⊢ False"],
    "H20231115": [(1, ("case zero\n⊢ 0 + 1 > 0", "case succ\nx : Nat\nhx : x + 1 > x\n⊢ x + 1 + 1 > x + 1"))],
    "exact": [(1, ()), "lean_error: `exact?` could not close the goal. Try `apply?` to see partial suggestions."],
    "induction": [(1, ("case zero\n⊢ 0 = 0", IND)), (2, (IND,)), T.SORRY],
    "on_goal": [T.SORRY],
    "pickle": [(1, (GM,))],
    "pickle_2": [(0, (GM,)), (1, (GM,))],
    "pickle_proof_state_env": [(1, ("⊢ Nat",)), (2, ("⊢ Nat",)), (3, ("t : Nat\n⊢ Nat",)), (4, ("t : Nat\n⊢ Nat",)),
                               (5, ("t : Nat\n⊢ Nat",)), (6, ())],
}


def _blocks(path: Path) -> list[dict[str, Any]]:
    return [json.loads(b) for b in path.read_text().split("\n\n") if b.strip()]


def _tactic_transcripts(transcripts: Path) -> dict[str, Path]:
    out = {}
    for inp in sorted(transcripts.rglob("*.in")):
        commands = _blocks(inp)
        if any("tactic" in c or "unpickleProofStateFrom" in c or ("pickleTo" in c and "proofState" in c)
               for c in commands):
            out[inp.name[:-3]] = inp
    return out


def _drive(repl: ReplProcess, commands: list[dict[str, Any]]) -> list[T.TacticReply]:
    """Every command through the client's own calls; the tactic-mode answers, in order."""
    got = []
    for c in commands:
        if "cmd" in c:
            repl.command(c["cmd"], c.get("env"), 10)
        elif "tactic" in c:
            got.append(T.apply_tactic(repl, c["tactic"], c["proofState"], 10))
        elif "pickleTo" in c:
            got.append(T.pickle_state(repl, c["proofState"], Path(c["pickleTo"]), 10))
        else:
            got.append(T.unpickle_state(repl, Path(c["unpickleProofStateFrom"]), 10, c.get("env")))
    return got


def test_every_recorded_tactic_transcript(transcripts: Path, tmp_path: Path) -> None:
    found = _tactic_transcripts(transcripts)
    assert set(found) == set(EXPECTED) | UNRECORDED, f"tactic-mode transcripts: {set(found) ^ set(EXPECTED)}"
    for name, inp in found.items():
        commands = _blocks(inp)
        if name in UNRECORDED:
            assert not inp.with_name(f"{name}.expected.out").exists(), f"{name} is recorded now: expect its replies"
            continue
        assert not any("path" in c for c in commands), f"{name} reads a .lean file: leave it out with a reason"
        repl = ReplProcess([*FAKE_COMMAND, "--transcript", str(inp)], tmp_path)
        try:
            got = _drive(repl, commands)
        finally:
            repl.close()
        want = [T.TacticReply(w[0], w[1]) if isinstance(w, tuple) else w for w in EXPECTED[name]]
        assert [g if g.ok else g.error for g in got] == want, name


def test_start_takes_the_sorry_and_its_goal(transcripts: Path, tmp_path: Path) -> None:
    repl = ReplProcess([*FAKE_COMMAND, "--transcript", str(transcripts / "invalid_tactic.in")], tmp_path)
    try:
        root = T.start(repl, "theorem my_theorem (x : Nat) : x = x := by sorry", None, 10)
        edge = T.apply_tactic(repl, "exact my_fake_premise", 0, 10)
    finally:
        repl.close()
    assert root == T.TacticReply(0, ("x : Nat\n⊢ x = x",)) and repl.next_proof_state == 2
    assert not edge.ok and edge.goals == (), "an error with goals [] is a failed edge, not a proof"
    have = _blocks(transcripts / "have_by_sorry.expected.out")
    assert T.parse_start_reply(have[0]).error == "lean_error: unsolved goals\nx : Int\nh : x = 1\n⊢ x = x"


@pytest.mark.parametrize(("reply", "kind"), [
    ({"proofState": 5, "goals": [], "env": 3}, MISMATCH),  # a key no tactic reply carries
    ({"proofState": "5", "goals": []}, GARBAGE),
    ({"goals": []}, GARBAGE),
    ({"proofState": 1, "goals": []}, MISMATCH),  # a number already used: a replayed reply
    ({"proofState": 5, "goals": [3]}, MISMATCH),
    ({"proofState": 5, "goals": [], "messages": [{"severity": "fatal", "data": "x"}]}, MISMATCH),
    ({"proofState": 5, "goals": [], "sorries": [{"goal": "⊢ Nat"}]}, MISMATCH),
    ({"message": 3}, GARBAGE),
])
def test_reply_integrity(reply: dict[str, Any], kind: str) -> None:
    with pytest.raises(ReplSystemError) as e:
        T.parse_tactic_reply(reply, next_state=2)
    assert e.value.kind == kind


def test_stand_in_tactic_model(tmp_path: Path) -> None:
    repl = ReplProcess(list(FAKE_COMMAND), tmp_path)
    try:
        root = T.start(repl, "theorem t (n : Nat) (h : n > 0) : n = n → n > 0 := by sorry",
                       repl.command("import Mathlib", None, 10)["env"], 10)
        intro = T.apply_tactic(repl, "intro e", 0, 10)
        done = T.apply_tactic(repl, "exact h", 1, 10)
        wrong = T.apply_tactic(repl, "exact nope", 1, 10)
        unknown = T.apply_tactic(repl, "exat h", 1, 10)
        sorry = T.apply_tactic(repl, "sorry", 1, 10)
        missing = T.apply_tactic(repl, "rfl", 99, 10)
        pickled = T.pickle_state(repl, 1, tmp_path / "s.olean", 10)
        back = T.unpickle_state(repl, tmp_path / "s.olean", 10)
        after = T.apply_tactic(repl, "exact h", back.state or 0, 10)
    finally:
        repl.close()
    assert root == T.TacticReply(0, ("n : Nat\nh : n > 0\n⊢ n = n → n > 0",))
    assert intro == T.TacticReply(1, ("n : Nat\nh : n > 0\ne : n = n\n⊢ n > 0",))
    assert done == T.TacticReply(2, ())
    assert wrong.error == "lean_error: unknown identifier 'nope'"
    assert unknown.error == "lean_error: <input>:1:1: unknown tactic"
    assert sorry.error == T.SORRY and missing.error == T.UNKNOWN_PROOF_STATE
    assert pickled.goals == back.goals == intro.goals and after.ok and after.goals == ()

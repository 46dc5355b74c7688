"""A stand-in for lean/SgsKernelCheck.lean (the kernel re-check): same protocol, no Lean.

Reads JSON requests `{"id", "header", "statement", "name", "pickle", "maxHeartbeats"}` separated by blank lines
and answers `{"id", "ok", "reason", "axioms", "detail"}` followed by a blank line, like the real
checker. The "pickle" is what fake_repl.py's `pickleTo` writes: the env's history as JSON. The
verdict is picked by markers in that history, standing for what the real kernel replay finds:
FAKE_SKIP_KERNEL (a proof closed under a kernel-skipping option: the replay rejects it),
FAKE_CHECKER_AXIOM (the theorem depends on sorryAx), FAKE_CHECKER_CRASH (the checker dies),
FAKE_CHECKER_WRONG_ID (a reply for another request). The statement is compared as text: the
history's last `theorem` line must carry the request's statement, else `statement_changed`
(FAKE_SWAP_PICKLE: the REPL pickles a different theorem). With $FAKE_REPL_LOG set, every process
appends `checker-start <pid>` and `check <pid> <name>`.

The faithful checker model (issue 26): the pickle's `constants` (fake_repl.constants_of) are
judged by the rules of lean/SgsKernelCheck.lean, in its order: a statement with a tactic or `do`
block is refused before anything (`statement_code`); a constant mentioning a name under one of
the Lean file's own `forbiddenRoots` (read from that file) is `forbidden_constant`; the theorem is
looked up by the request's full name; unsafe constants are skipped unless the theorem reaches
them (`unsafe_constant`); the kernel's budget is the request's `maxHeartbeats` (issue 38, class 6:
the statement's own `set_option maxHeartbeats N in`, else the header's), or the header's when it
is null, as the Lean file's `kernelOptions` does (0 = unlimited, else at most the default 200000
that a FAKE_KERNEL_HEAVY theorem exceeds); a request without exactly these keys is `bad_request`
(stricter than the Lean file, which ignores extra keys: a client that forgets one is caught here);
every constant the theorem
reaches must mean what the statement's own does (`meaning_changed`).
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

from fake_repl import constants_of, log, read_command, write

LEAN_CHECKER = Path(__file__).resolve().parents[2] / "lean" / "SgsKernelCheck.lean"
DEFAULT_HEARTBEATS = 200000


def forbidden_roots() -> list[str]:
    """`forbiddenRoots` of lean/SgsKernelCheck.lean: the names in its list literal."""
    text = LEAN_CHECKER.read_text(encoding="utf-8")
    body = text.split("def forbiddenRoots : List Name :=", 1)[1].split("]", 1)[0]
    return re.findall(r"`([\w.']+)", body)


def forbidden(name: str) -> bool:
    return any(name == root or name.startswith(root + ".") for root in forbidden_roots())


def header_heartbeats(header: str) -> int:
    m = re.findall(r"set_option maxHeartbeats (\d+)", header)
    return int(m[-1]) if m else DEFAULT_HEARTBEATS


REQUEST_KEYS = frozenset({"id", "header", "statement", "name", "pickle", "maxHeartbeats"})


def kernel_budget(req: dict) -> int:
    """`kernelOptions` of lean/SgsKernelCheck.lean: the request's `maxHeartbeats`, else the header's."""
    requested = req["maxHeartbeats"]
    assert requested is None or (isinstance(requested, int) and requested >= 0), requested
    return header_heartbeats(req["header"]) if requested is None else requested


def reachable(constants: dict[str, dict], start: list[str]) -> list[str]:
    seen: list[str] = []
    todo = list(start)
    while todo:
        n = todo.pop()
        if n in seen or n not in constants:
            continue
        seen.append(n)
        todo += constants[n]["uses"]
    return seen


def model_checks(req: dict, history: str, constants: dict[str, dict]) -> tuple[str, str] | None:
    """The issue 26 rules of the real checker, on the pickle's constants; (reason, detail) or None."""
    if re.search(r"\b(by|do)\b", req["statement"]):
        return "statement_code", "the statement holds a tactic or do block"
    for n, c in constants.items():
        bad = [u for u in c["uses"] if forbidden(u)]
        if bad and not c["unsafe"]:
            return "forbidden_constant", f"{n} mentions {bad[0]}"
    name = req["name"]
    if name not in constants:
        return "theorem_missing", f"the proof's environment declares no constant {name}"
    for n in reachable(constants, [name]):
        if constants[n]["unsafe"]:
            return "unsafe_constant", f"{name} depends on the unsafe constant {n}"
    budget = kernel_budget(req)
    if constants[name].get("heavy") and budget != 0 and budget <= DEFAULT_HEARTBEATS:
        return "kernel_rejected", "(kernel) deterministic timeout"
    reference = constants_of(req["statement"] + " sorry")  # the statement elaborated on its own
    for n in reachable(constants, constants[name]["uses"]):
        ref = reference.get(n.replace(name, reference_name(reference), 1))
        if ref is None or (ref["kind"], ref["value"]) != (constants[n]["kind"], constants[n]["value"]):
            return "meaning_changed", f"{n} does not mean what it means in the statement elaborated on its own"
    return None


def reference_name(reference: dict[str, dict]) -> str:
    return next(n for n, c in reference.items() if c["kind"] == "theorem")


def answer(req: dict) -> dict:
    base = {"id": req["id"], "ok": False, "axioms": [], "detail": ""}
    if set(req) != REQUEST_KEYS:
        return {**base, "reason": "bad_request", "detail": f"request keys {sorted(req)}, expected {sorted(REQUEST_KEYS)}"}
    pickle = Path(req["pickle"])
    if not pickle.exists():
        return {**base, "reason": "no_pickle", "detail": f"{pickle} does not exist"}
    data = json.loads(pickle.read_text())
    history = data["history"]
    if "FAKE_CHECKER_CRASH" in history:
        os._exit(1)
    if "FAKE_CHECKER_WRONG_ID" in history:
        return {**base, "id": "0" * 32, "ok": True, "reason": ""}
    if "FAKE_SKIP_KERNEL" in history:
        return {**base, "reason": "kernel_rejected", "detail": "(kernel) declaration type mismatch"}
    refused = model_checks(req, history, data.get("constants", {}))
    if refused is not None:
        return {**base, "reason": refused[0], "detail": refused[1]}
    statement = req["statement"].split(":=", 1)[0].strip()
    if "FAKE_SWAP_PICKLE" in history or statement not in history:
        return {**base, "reason": "statement_changed", "detail": "the theorem's type is not the statement's"}
    if "FAKE_CHECKER_AXIOM" in history:
        return {**base, "reason": "axioms", "axioms": ["sorryAx"], "detail": "depends on [sorryAx]"}
    return {**base, "ok": True, "reason": "", "axioms": ["propext", "Classical.choice", "Quot.sound"]}


def main() -> None:
    log(f"checker-start {os.getpid()}")
    broken = sys.argv[1] if len(sys.argv) > 1 else ""  # --accept-all / --refuse-all: a broken checker (the canary's tests)
    while (raw := read_command()) is not None:
        req = json.loads(raw)
        log(f"check {os.getpid()} {req.get('name')}")
        reply = answer(req)
        if broken == "--accept-all":
            reply = {**reply, "ok": True, "reason": "", "axioms": ["propext"]}
        elif broken == "--refuse-all":
            reply = {**reply, "ok": False, "reason": "kernel_rejected", "detail": "(kernel) refused (broken stand-in)"}
        write(json.dumps(reply) + "\n\n")


if __name__ == "__main__":
    main()

"""A stand-in for lean/SgsKernelCheck.lean (the kernel re-check): same protocol, no Lean.

Reads JSON requests `{"id", "header", "statement", "name", "pickle"}` separated by blank lines
and answers `{"id", "ok", "reason", "axioms", "detail"}` followed by a blank line, like the real
checker. The "pickle" is what fake_repl.py's `pickleTo` writes: the env's history as JSON. The
verdict is picked by markers in that history, standing for what the real kernel replay finds:
FAKE_SKIP_KERNEL (a proof closed under a kernel-skipping option: the replay rejects it),
FAKE_CHECKER_AXIOM (the theorem depends on sorryAx), FAKE_CHECKER_CRASH (the checker dies),
FAKE_CHECKER_WRONG_ID (a reply for another request). The statement is compared as text: the
history's last `theorem` line must carry the request's statement, else `statement_changed`
(FAKE_SWAP_PICKLE: the REPL pickles a different theorem). With $FAKE_REPL_LOG set, every process
appends `checker-start <pid>` and `check <pid> <name>`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from fake_repl import log, read_command, write


def answer(req: dict) -> dict:
    base = {"id": req["id"], "ok": False, "axioms": [], "detail": ""}
    pickle = Path(req["pickle"])
    if not pickle.exists():
        return {**base, "reason": "no_pickle", "detail": f"{pickle} does not exist"}
    history = json.loads(pickle.read_text())["history"]
    if "FAKE_CHECKER_CRASH" in history:
        os._exit(1)
    if "FAKE_CHECKER_WRONG_ID" in history:
        return {**base, "id": "0" * 32, "ok": True, "reason": ""}
    if "FAKE_SKIP_KERNEL" in history:
        return {**base, "reason": "kernel_rejected", "detail": "(kernel) declaration type mismatch"}
    statement = req["statement"].split(":=", 1)[0].strip()
    if "FAKE_SWAP_PICKLE" in history or statement not in history:
        return {**base, "reason": "statement_changed", "detail": "the theorem's type is not the statement's"}
    if "FAKE_CHECKER_AXIOM" in history:
        return {**base, "reason": "axioms", "axioms": ["sorryAx"], "detail": "depends on [sorryAx]"}
    return {**base, "ok": True, "reason": "", "axioms": ["propext", "Classical.choice", "Quot.sound"]}


def main() -> None:
    log(f"checker-start {os.getpid()}")
    while (raw := read_command()) is not None:
        req = json.loads(raw)
        log(f"check {os.getpid()} {req.get('name')}")
        write(json.dumps(answer(req)) + "\n\n")


if __name__ == "__main__":
    main()

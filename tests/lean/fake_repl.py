"""A stand-in for the leanprover-community REPL: same protocol, no Lean.

Reads JSON commands separated by blank lines on stdin and writes JSON replies (pretty-printed,
each followed by a blank line) on stdout, like the REPL v4.15.0. Two modes:

- `fake_repl.py --transcript X.in`: replay. The n-th command must equal the n-th command of
  `X.in`; the reply is the n-th reply of `X.expected.out`, byte for byte.
- `fake_repl.py` (rules): env numbering as the REPL does it (every command gets the next env;
  an unknown `env` gets `{"message": "Unknown environment."}`), and behaviour picked by markers
  in the command's text (the proof, or for audits the text of the env audited):
  FAKE_HANG (never answers), FAKE_CRASH (exits mid-command), FAKE_GARBAGE (prints non-JSON),
  FAKE_CUT (prints half a reply and exits), FAKE_CUT_BLANK (half a reply, a blank line, goes on),
  FAKE_MEMORY (allocates until RLIMIT_AS stops it; refuses to run without a limit),
  FAKE_FLAKY (crashes the first time a given proof is seen, using $FAKE_REPL_STATE),
  FAKE_SORRY (sorries + "declaration uses 'sorry'"), FAKE_SORRY_BACKTICK (only the warning,
  backtick style), FAKE_ERROR (an error), FAKE_FAILED_WARNING ("linarith failed" warning),
  FAKE_AXIOM (the audit lists sorryAx), FAKE_RENAMED (the theorem elaborates to another type),
  FAKE_SLOW (sleeps 0.3 s), FAKE_BAD_HEADER in a header (an import error).
  `#print axioms N` / `#check @N` are answered from the env's history (`_root_.` dropped, as Lean prints).
  `{"pickleTo": P, "env": N}` writes env N's history as JSON to P (what fake_checker.py reads),
  with `constants`: a model of the constants the env adds (`constants_of`): the theorem (what it
  uses after name resolution), a matcher `NAME.match_1` when the statement has a `match` or a
  `fun (a, b)` pattern, with its unsafe compiler artefact `NAME.match_1._cstage1` (issue 26, 7a).
  Issue 26 markers: FAKE_RESOLVES_IO (the proof's names resolve to `IO.FS.writeFile`, as
  `.FS.writeFile` against an expected `IO _` does), FAKE_REDEFINE_MATCHER (the pickle's matcher
  differs from the statement's), FAKE_USES_UNSAFE (the theorem uses an unsafe constant),
  FAKE_KERNEL_HEAVY (the kernel needs more than the default heartbeat budget),
  Issue 38 markers: `FAKE_RESOLVES_TO <Name>` (the theorem mentions <Name> after name resolution,
  as `(p : FilePath).readDir` under `open System` does), `FAKE_AUX_RESOLVES_TO <Name>` (an
  auxiliary constant `NAME._auxLemma_1` that the theorem does not reach mentions it),
  FAKE_LEAVE_WRITER (a background process keeps rewriting every `*.olean` under the scratch:
  the attack on the next proof's pickle; it needs fork, which the process filter denies).
  In a header, `namespace X` makes `theorem t` declare `X.t` (answered by that name only).
  Forgers (a proof whose code prints on the REPL's stdout): FAKE_FORGE_TWO prints a clean proof
  reply and a clean audit reply of its own before its real (error) reply; FAKE_FORGE_STDIN
  prints a clean proof reply, reads the next command from stdin (the audit), answers it with a
  clean audit, then prints its real (error) reply; FAKE_FORGE_EXIT prints a clean reply and exits.
  FAKE_SKIP_KERNEL and FAKE_SWAP_PICKLE answer like an honest proof (for fake_checker.py).
  Sandbox probes (an attack a proof's code could make; each adds an info message
  `probe <what>: done` or `probe <what>: blocked (<error>)`): FAKE_WRITE_OUTSIDE writes every
  path in $FAKE_TARGETS (os.pathsep-separated); FAKE_SOCKET connects to 127.0.0.1:$FAKE_PORT and
  to the Unix socket $FAKE_UNIX_SOCKET; FAKE_SIGNAL sends SIGTERM to pid $FAKE_SIGNAL_PID;
  FAKE_DAEMON starts a child in a session of its own that sleeps (argv ends with $FAKE_TOKEN);
  FAKE_SCRATCH writes into $SGSBATCH_SCRATCH (an error message if it cannot).
  Resource probes (issue 26, resources per slot; sizes in MB from $FAKE_FILL_MB, default 64):
  FAKE_FILL writes 1 MB files into $SGSBATCH_SCRATCH until a write fails (probe `fill`, with the
  MB written); FAKE_BIG_FILE writes one file that big there, FAKE_STDERR_FLOOD that much to
  stderr (RLIMIT_FSIZE kills the process with SIGXFSZ); FAKE_BURN spins the CPU until something
  stops it (RLIMIT_CPU: SIGXCPU); FAKE_THREADS starts $FAKE_THREADS_N (default 64) sleeping
  threads (probe `threads`, how many started); FAKE_USERNS makes a user and mount namespace of
  its own and mounts a tmpfs of no cap over the scratch (probe `userns`); FAKE_LIST_SCRATCH names
  what the scratch holds (probe `scratch holds`).
  Leftover work (issue 38, "nothing outlives its proof"; each answers like an honest proof):
  FAKE_SPIN_AFTER leaves $FAKE_SPIN_N (default 1) threads that hash forever without the GIL
  (real CPU, like a `Task.spawn (prio := .dedicated)` loop); FAKE_SPIN_LATER the same, but the
  threads sleep $FAKE_SPIN_DELAY_S (default 0.3) first; FAKE_LEAVE_THREADS leaves $FAKE_THREADS_N
  (default 64) threads that sleep forever. While threads of FAKE_SPIN_* exist, every later proof
  command (not a reference or an audit) never answers: it models a proof starved of the CPU
  those threads take (in Lean it would run slowly and time out).
Tactic mode (rules): `... := by sorry` commands, `{"tactic": ...}`, proof-state pickles: fake_tactics.py.
With $FAKE_REPL_LOG set, every process appends `start <pid>`, `cmd <pid> <first line>` and
`tactic <pid> <proofState> <tactic>`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import resource
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from fake_tactics import ProofStates

LOG = os.environ.get("FAKE_REPL_LOG")
PROOF_STATES = ProofStates()  # tactic mode (fake_tactics.py)


def log(line: str) -> None:
    if LOG:
        with open(LOG, "a", encoding="utf-8") as f:
            f.write(line.replace("\n", " ")[:300] + "\n")


def read_command() -> str | None:
    """Lines up to a blank line; None at end of input."""
    lines: list[bytes] = []
    while True:
        line = sys.stdin.buffer.readline()
        if not line:
            return None if not lines else b"".join(lines).decode()
        if not line.strip():
            if lines:
                return b"".join(lines).decode()
            continue
        lines.append(line)


def write(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def reply(obj: dict) -> None:
    write(json.dumps(obj, indent=1, ensure_ascii=False) + "\n\n")


def split_blocks(text: str) -> list[str]:
    return [b.strip() for b in text.split("\n\n") if b.strip()]


def replay(transcript: Path) -> None:
    commands = [json.loads(b) for b in split_blocks(transcript.read_text())]
    outs = split_blocks(transcript.with_name(transcript.name[: -len(".in")] + ".expected.out").read_text())
    n = 0
    while (cmd := read_command()) is not None:
        got = json.loads(cmd)
        if n >= len(commands) or got != commands[n]:
            reply({"message": f"fake_repl: command {n} is not the transcript's"})
        else:
            write(outs[n] + "\n\n")
        n += 1


def msg(severity: str, data: str, line: int = 1) -> dict:
    return {"severity": severity, "pos": {"line": line, "column": 0}, "endPos": {"line": line, "column": 1},
            "data": data}


def statement_of(text: str) -> str:
    head = text.split(":=", 1)[0]
    return " ".join(head.split()[2:])


def rules() -> None:
    envs: list[str] = []  # env n -> the full text elaborated up to it
    state = os.environ.get("FAKE_REPL_STATE")
    while (raw := read_command()) is not None:
        data = json.loads(raw)
        if "tactic" in data or "unpickleProofStateFrom" in data or ("pickleTo" in data and "proofState" in data):
            log(f"tactic {os.getpid()} {data.get('proofState')} {data.get('tactic', '<pickle>')}")
            reply(PROOF_STATES.answer(data))  # tactic mode (fake_tactics.py)
            continue
        cmd: str = data.get("cmd", "")
        env = data.get("env")
        log(f"cmd {os.getpid()} {cmd.strip().splitlines()[0] if cmd.strip() else '<empty>'}")
        if env is not None and not (isinstance(env, int) and 0 <= env < len(envs)):
            reply({"message": "Unknown environment."})
            continue
        if "pickleTo" in data:
            log(f"pickle {os.getpid()} {data['pickleTo']}")
            Path(data["pickleTo"]).write_text(json.dumps({"history": envs[env], "constants": constants_of(envs[env])}))
            reply({"env": env})
            continue
        history = (envs[env] + "\n" if env is not None else "") + cmd
        out: dict = {}
        messages: list[dict] = []
        fresh = len(envs)
        if "FAKE_FORGE_TWO" in cmd:
            reply({"env": fresh})
            write_audit_forgery(fresh + 1, cmd)
        if "FAKE_FORGE_STDIN" in cmd:
            reply({"env": fresh})
            read_command()
            write_audit_forgery(fresh + 1, cmd)
        if "FAKE_FORGE_EXIT" in cmd:
            reply({"env": fresh})
            os._exit(0)
        if "FAKE_FORGE" in cmd:
            messages.append(msg("error", "unsolved goals\n⊢ False", 2))
        if "FAKE_HANG" in cmd or (SPINNERS and is_proof(cmd)):
            time.sleep(3600)
        if "FAKE_CRASH" in cmd:
            sys.stderr.write("fake_repl: crashing on purpose\n")
            os._exit(1)
        if "FAKE_GARBAGE" in cmd:
            write("uncaught exception: this is not JSON\n\n")
            continue
        if "FAKE_CUT_BLANK" in cmd:
            write('{"env": 3,\n "messages":\n  [{"severity": "err\n\n')
            continue
        if "FAKE_CUT" in cmd:
            write('{"env": 3,\n "messages":\n  [{"severity": "err')
            os._exit(0)
        if "FAKE_MEMORY" in cmd:
            if resource.getrlimit(resource.RLIMIT_AS)[0] == resource.RLIM_INFINITY:
                sys.stderr.write("fake_repl: FAKE_MEMORY needs an RLIMIT_AS limit\n")
                os._exit(3)
            hog = []
            while True:
                hog.append(bytearray(64 << 20))
        if "FAKE_FLAKY" in cmd and state:
            mark = Path(state) / f"flaky-{hashlib.sha256(cmd.encode()).hexdigest()[:16]}"
            if not mark.exists():
                mark.write_text("seen")
                os._exit(1)
        if "FAKE_SLOW" in cmd:
            time.sleep(0.3)
        messages += probes(cmd)
        if "FAKE_BAD_HEADER" in cmd:
            messages.append(msg("error", "unknown module prefix 'Nope'"))
        if cmd.startswith("#print axioms ") and cmd.split()[2].removeprefix("_root_.") != declared(history):
            messages.append(msg("error", f"unknown constant '{cmd.split()[2].removeprefix('_root_.')}'"))
        elif cmd.startswith("#print axioms "):
            name = cmd.split()[2].removeprefix("_root_.")
            axioms = "propext, sorryAx" if "FAKE_AXIOM" in history else "propext, Classical.choice, Quot.sound"
            messages.append(msg("info", f"'{name}' depends on axioms: [{axioms}]"))
            decl = "theorem" + history.split("theorem", 1)[1] if "theorem" in history else history
            stmt = "False" if "FAKE_RENAMED" in history else statement_of(decl)
            messages.append(msg("info", f"{name} : {stmt}", 2))
        elif "\n#check @" in cmd:  # the reference: statement + sorry, then #check
            name = cmd.rsplit("#check @", 1)[1].strip().removeprefix("_root_.")
            messages.append(msg("warning", "declaration uses 'sorry'"))
            decl = "theorem" + cmd.split("theorem", 1)[1] if "theorem" in cmd else cmd  # `set_option .. in` prefixes
            messages.append(msg("info", f"{name} : {statement_of(decl)}", 2))
        elif "FAKE_SORRY_BACKTICK" in cmd:
            messages.append(msg("warning", "declaration uses `sorry`"))
        elif "FAKE_SORRY" in cmd:
            out["sorries"] = [{"proofState": PROOF_STATES.fresh(["⊢ False"]), "pos": {"line": 2, "column": 2}, "goal": "⊢ False",
                               "endPos": {"line": 2, "column": 7}}]
            messages.append(msg("warning", "declaration uses 'sorry'"))
        elif "FAKE_ERROR" in cmd:
            messages.append(msg("error", "unsolved goals\n⊢ False", 2))
        elif "FAKE_FAILED_WARNING" in cmd:
            messages.append(msg("warning", "linarith failed to find a contradiction", 2))
        elif (sorry := PROOF_STATES.command_sorry(cmd)) is not None:  # `:= by sorry`: a root for tactic mode
            out["sorries"] = [sorry]
            messages.append(msg("warning", "declaration uses 'sorry'"))
        if messages:
            out["messages"] = messages
        envs.append(history)
        out["env"] = len(envs) - 1
        reply(out)


def declared(history: str) -> str:
    """The full name the last `theorem` of `history` declares: the header's open namespaces + its name."""
    spaces: list[str] = []  # "" for a section
    head, _, decl = history.rpartition("theorem ")
    for line in head.splitlines():
        words = line.split()
        if words[:1] == ["namespace"] and len(words) > 1:
            spaces.append(words[1])
        elif words[:1] == ["section"] or words[:2] == ["noncomputable", "section"]:
            spaces.append("")
        elif words[:1] == ["end"] and spaces:
            spaces.pop()
    name = decl.split()[0] if decl.split() else ""
    return name.removeprefix("_root_.") if name.startswith("_root_.") else ".".join([*filter(None, spaces), name])


def statement_text(history: str) -> str:
    """The last statement of `history` (from `theorem` to its `:=`)."""
    return "theorem " + history.rpartition("theorem ")[2].split(":=", 1)[0]


def constants_of(history: str) -> dict[str, dict]:
    """A model of what elaborating `history` adds: the theorem, and the statement's matcher (with its
    unsafe compiler artefact) when the statement has a `match` or a `fun (a, b)` pattern."""
    name = declared(history)
    statement = statement_text(history)
    uses = ["IO.FS.writeFile"] if "FAKE_RESOLVES_IO" in history else []
    uses += re.findall(r"\bFAKE_RESOLVES_TO ([\w.']+)", history)
    out: dict[str, dict] = {}
    if "match" in statement or "fun (" in statement:
        value = "REDEFINED" if "FAKE_REDEFINE_MATCHER" in history else f"matcher of {statement}"
        out[f"{name}.match_1"] = {"kind": "def", "value": value, "uses": [], "unsafe": False}
        out[f"{name}.match_1._cstage1"] = {"kind": "def", "value": "", "uses": [], "unsafe": True}
        uses.append(f"{name}.match_1")
    aux = re.findall(r"\bFAKE_AUX_RESOLVES_TO ([\w.']+)", history)
    if aux:
        out[f"{name}._auxLemma_1"] = {"kind": "theorem", "value": "aux", "uses": aux, "unsafe": False}
    if "FAKE_USES_UNSAFE" in history:
        out[f"{name}.helper"] = {"kind": "def", "value": "", "uses": [], "unsafe": True}
        uses.append(f"{name}.helper")
    out[name] = {"kind": "theorem", "value": "proof", "uses": uses, "unsafe": False,
                 "heavy": "FAKE_KERNEL_HEAVY" in history}
    return out


def _attempt(what: str, action: object) -> dict:
    try:
        action()  # type: ignore[operator]
    except Exception as e:  # every failure is the sandbox (or the OS) saying no
        return msg("info", f"probe {what}: blocked ({type(e).__name__}: {e})")
    return msg("info", f"probe {what}: done")


def _write(path: str) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write("written by a proof\n")


def _connect_tcp(port: int) -> None:
    # connected is what counts; the server may have hung up before the send
    with socket.create_connection(("127.0.0.1", port), timeout=2) as s, contextlib.suppress(OSError):
        s.sendall(b"hello from a proof")


def _connect_unix(path: str) -> None:
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(2)
        s.connect(path)
        with contextlib.suppress(OSError):  # connected is what counts; the server may have hung up
            s.sendall(b"hello from a proof")


def _daemon() -> None:
    code = "import time; time.sleep(300)"
    subprocess.Popen([sys.executable, "-c", code, os.environ.get("FAKE_TOKEN", "fake-daemon")],
                     start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL)


def _writer() -> None:
    """A process left behind that rewrites every pickle it finds under the scratch directory."""
    scratch = os.environ["SGSBATCH_SCRATCH"]
    code = ("import os, sys, time\n"
            "while True:\n"
            "    for root, _, files in os.walk(sys.argv[1]):\n"
            "        for f in files:\n"
            "            if f.endswith('.olean'):\n"
            "                try: open(os.path.join(root, f), 'w').write('{\"history\": \"forged\"}')\n"
            "                except OSError: pass\n"
            "    time.sleep(0.002)\n")
    subprocess.Popen([sys.executable, "-c", code, scratch, os.environ.get("FAKE_TOKEN", "fake-writer")],
                     start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL)


def _fill_mb() -> int:
    return int(os.environ.get("FAKE_FILL_MB", "64"))


def _fill() -> None:
    """1 MB files into the scratch until a write fails; the error names how many MB got written."""
    scratch = os.environ["SGSBATCH_SCRATCH"]
    block = b"x" * (1 << 20)
    for i in range(_fill_mb()):
        try:
            with open(os.path.join(scratch, f"fill-{i}.bin"), "wb") as f:
                f.write(block)
        except OSError as e:
            raise OSError(e.errno, f"{e.strerror} after {i} MB") from e


def _big_file() -> None:
    block = b"x" * (1 << 20)
    with open(os.path.join(os.environ["SGSBATCH_SCRATCH"], "big.bin"), "wb") as f:
        for _ in range(_fill_mb()):
            f.write(block)


def _stderr_flood() -> None:
    block = "e" * (1 << 20)
    for _ in range(_fill_mb()):
        sys.stderr.write(block)
        sys.stderr.flush()


def _burn() -> None:
    x = 0
    while True:
        x = (x * 31 + 7) % 1_000_003


def _threads() -> str:
    import threading

    stop = threading.Event()
    started = 0
    for _ in range(int(os.environ.get("FAKE_THREADS_N", "64"))):
        try:
            threading.Thread(target=stop.wait, daemon=True).start()
        except RuntimeError:  # "can't start new thread": the task limit
            break
        started += 1
    stop.set()
    return f"probe threads: {started} started"


SPINNERS: list[object] = []  # threads of FAKE_SPIN_*, for the rest of the process's life


def is_proof(cmd: str) -> bool:
    """A proof command: a theorem that is neither the pool's reference (`#check @`) nor its audit."""
    return "theorem " in cmd and "\n#check @" not in cmd and not cmd.startswith("#print axioms ")


def _spin(delay_s: float) -> None:
    import threading

    def work() -> None:
        time.sleep(delay_s)
        block, h = b"x" * (1 << 20), hashlib.sha256()
        while True:
            h.update(block)  # hashlib lets go of the GIL for large blocks: real CPU, besides the main thread

    for _ in range(int(os.environ.get("FAKE_SPIN_N", "1"))):
        t = threading.Thread(target=work, daemon=True)
        t.start()
        SPINNERS.append(t)


def _leave_threads() -> None:
    import threading

    for _ in range(int(os.environ.get("FAKE_THREADS_N", "64"))):
        threading.Thread(target=threading.Event().wait, daemon=True).start()


def _userns() -> None:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(0x10000000 | 0x00020000) != 0:  # CLONE_NEWUSER | CLONE_NEWNS
        raise OSError(ctypes.get_errno(), f"unshare: {os.strerror(ctypes.get_errno())}")
    scratch = os.environ["SGSBATCH_SCRATCH"].encode()
    if libc.mount(b"none", scratch, b"tmpfs", 0, None) != 0:
        raise OSError(ctypes.get_errno(), f"mount: {os.strerror(ctypes.get_errno())}")


def probes(cmd: str) -> list[dict]:
    """The sandbox probes the markers in `cmd` ask for, as info messages (an error if the scratch fails)."""
    out: list[dict] = []
    if "FAKE_WRITE_OUTSIDE" in cmd:
        for path in filter(None, os.environ.get("FAKE_TARGETS", "").split(os.pathsep)):
            out.append(_attempt(f"write {path}", lambda p=path: _write(p)))
    if "FAKE_SOCKET" in cmd:
        if os.environ.get("FAKE_PORT"):
            out.append(_attempt("tcp", lambda: _connect_tcp(int(os.environ["FAKE_PORT"]))))
        if os.environ.get("FAKE_UNIX_SOCKET"):
            out.append(_attempt("unix", lambda: _connect_unix(os.environ["FAKE_UNIX_SOCKET"])))
    if "FAKE_SIGNAL" in cmd:
        out.append(_attempt("signal", lambda: os.kill(int(os.environ["FAKE_SIGNAL_PID"]), signal.SIGTERM)))
    if "FAKE_DAEMON" in cmd:
        out.append(_attempt("daemon", _daemon))
    if "FAKE_LEAVE_WRITER" in cmd:
        out.append(_attempt("writer", _writer))
    if "FAKE_FILL" in cmd:
        got = _attempt("fill", _fill)  # a write error fails the proof, as Lean reports an IO error
        out.append(got if got["data"].endswith("done") else {**got, "severity": "error"})
    if "FAKE_BIG_FILE" in cmd:
        out.append(_attempt("big file", _big_file))
    if "FAKE_STDERR_FLOOD" in cmd:
        out.append(_attempt("stderr", _stderr_flood))
    if "FAKE_BURN" in cmd:
        _burn()
    if "FAKE_THREADS" in cmd:
        out.append(msg("info", _threads()))
    if "FAKE_SPIN_AFTER" in cmd or "FAKE_SPIN_LATER" in cmd:
        _spin(float(os.environ.get("FAKE_SPIN_DELAY_S", "0.3")) if "FAKE_SPIN_LATER" in cmd else 0.0)
    if "FAKE_LEAVE_THREADS" in cmd:
        _leave_threads()
    if "FAKE_USERNS" in cmd:
        out.append(_attempt("userns", _userns))
    if "FAKE_LIST_SCRATCH" in cmd:
        out.append(msg("info", "probe scratch holds: " + ",".join(sorted(os.listdir(os.environ["SGSBATCH_SCRATCH"])))))
    if "FAKE_SCRATCH" in cmd:
        got = _attempt("scratch", lambda: _write(os.path.join(os.environ["SGSBATCH_SCRATCH"], "probe.txt")))
        out.append(got if got["data"].endswith("done") else {**got, "severity": "error"})
    return out


def write_audit_forgery(env: int, cmd: str) -> None:
    """The clean audit reply of the theorem in `cmd`, as a payload that knows the protocol prints it."""
    name = cmd.split()[1]
    reply({"messages": [msg("info", f"'{name}' depends on axioms: [propext]"),
                        msg("info", f"{name} : {statement_of(cmd)}", 2)], "env": env})


def main() -> None:
    # Lean is a C++ program with the default signal dispositions; Python ignores SIGXFSZ (a write past
    # RLIMIT_FSIZE then fails with EFBIG instead of ending the process): the stand-in behaves like Lean
    signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
    log(f"start {os.getpid()}")
    delay = float(os.environ.get("FAKE_REPL_START_DELAY", "0"))
    if delay:
        time.sleep(delay)
    if len(sys.argv) == 3 and sys.argv[1] == "--transcript":
        replay(Path(sys.argv[2]))
    else:
        rules()


if __name__ == "__main__":
    main()

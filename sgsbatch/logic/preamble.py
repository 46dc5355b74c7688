"""A conjecture's preamble: the `import`, `open` and `set_option` lines a model writes before its theorem.

Covered: reading the leading lines of an extracted statement (the text up to `:= by`) and writing
them in the form sgsbatch's statement check accepts. Not covered: deciding what is safe to send to
Lean (verification/checks.py is authoritative: it refuses `set_option`s off its allow-list and
every other command) or checking anything in Lean.

DeepSeek-Prover-V2 writes whole files by habit (`import Mathlib`, `set_option maxHeartbeats 400000
in`, `open BigOperators Real Nat Topology Rat`, then the theorem). The reference keeps the text
as it is and checks `header + statement + proof` as one file (sgs/pipeline/step1_data_gen.py:818),
so Lean decides: an `import` after the header is an error (the conjecture can never verify); an
`open` or `set_option` line, with `in` or without, is accepted. Here, in the preamble (the
leading lines, up to the first line that is none of these):

- `open NAMES` becomes `open NAMES in` and `set_option NAME VALUE` becomes `set_option NAME VALUE
  in`. For a file whose only declaration is the theorem this is the same Lean (`open X in cmd` is
  `section open X cmd end`), and the statement check accepts only these scoped forms, so nothing
  a statement sets outlives its theorem in the verifier's REPL environment.
- `import` lines: "drop" (`extraction.conjecture_imports`, the default) removes them and returns
  them as dropped: every dataset header imports Mathlib, which imports what a model writes, and
  with them left in, the file fails in Lean as in the reference. "keep" leaves them (the
  reference: the statement check then refuses the statement, as Lean would).
- Blank lines, `--` comment lines and one-line `/- ... -/` comments are kept as they are. A doc
  comment, the theorem or anything else ends the preamble; a line such as `open Real in theorem
  t ...` is not a preamble line and stays whole.
"""

from __future__ import annotations

import re
from typing import Literal

ImportRule = Literal["drop", "keep"]
IMPORT_RULES: tuple[str, ...] = ("drop", "keep")

_COMMENT_TAIL = r"(?P<tail>[ \t]+--[^\n]*)?[ \t]*\Z"
_WORD = r"[ \t]+(?!in(?:\s|\Z)|--)\S+"  # one more word on the line: not `in`, not a comment
_IMPORT_RE = re.compile(r"[ \t]*import(?:[ \t]+(?!--)\S+)+" + _COMMENT_TAIL)
_OPEN_RE = re.compile(r"(?P<cmd>[ \t]*open(?:" + _WORD + r")+?)(?P<in>[ \t]+in)?" + _COMMENT_TAIL)
_OPTION_RE = re.compile(r"(?P<cmd>[ \t]*set_option" + _WORD + _WORD + r")(?P<in>[ \t]+in)?" + _COMMENT_TAIL)
_QUIET_RE = re.compile(r"[ \t]*(?:--[^\n]*|/-(?![-!])(?:(?!/-|-/).)*-/[ \t]*)?\Z")


def _scoped(m: re.Match[str]) -> str:
    """The `open`/`set_option` line of `m` with `in` (added when missing), its comment kept."""
    return m["cmd"] + " in" + (m["tail"] or "")


def tidy_preamble(statement: str, imports: ImportRule = "drop") -> tuple[str, tuple[str, ...]]:
    """(the statement with its preamble scoped, the `import` lines dropped) (see the module docstring)."""
    if imports not in IMPORT_RULES:
        raise ValueError(f"tidy_preamble: imports must be one of {', '.join(IMPORT_RULES)}, got {imports!r}")
    lines = statement.split("\n")
    out: list[str] = []
    dropped: list[str] = []
    for i, line in enumerate(lines):
        if _QUIET_RE.match(line):
            out.append(line)
        elif _IMPORT_RE.match(line):
            if imports == "drop":
                dropped.append(line.strip())
            else:
                out.append(line)
        elif m := _OPEN_RE.match(line) or _OPTION_RE.match(line):
            out.append(_scoped(m))
        else:
            out.extend(lines[i:])
            break
    return "\n".join(out).strip(), tuple(dropped)

"""A proof's tactic skeleton: every tactic it runs, found the way Lean's parser finds them, judged
against the allow-list (tactics.py).

Lean reads a tactic block as a sequence (`sepByIndent`: `;` or a new line at the column of the
block's first tactic), each tactic starting with its keyword; the tactic category's leading
identifiers are not reserved words (`LeadingIdentBehavior.both`), so a word at a tactic's start is
that tactic whatever else it names. `walk(tokens)` follows that structure over lexer.py's tokens:
the top block, `by` blocks inside terms (ended by a line left of their column, a closing bracket
of an enclosing term, or a `,` inside brackets), `·`/`(...)`/`{...}` groups, `;`, `<;>`, `<|>`,
`says`, and the tactics whose arguments hold tactic blocks, by their shape in the table:
combinators (`try t`, `all_goals t`), `first | t | t`, `case x => t`, alternatives (`induction n
with | zero => t`, tactic `match`), tactic `if ... then t else t`, `set_option ... in t`, `open ...
in t`, `conv ... => c` (conv mode, its own table; `tactic => t` back), `calc` steps.

Each tactic's head must be in the table of its mode, else `unknown_tactic` naming it. Its
configuration (`(name := v)`, `+opt`, `-opt` right after the head: Lean's `optConfig`, which
`declare_config_elab` evaluates) must be literal, except the options whose value is tactic
syntax (`(disch := t)`), which are walked as tactic blocks; a named argument anywhere else is a
term argument (`mul_pos (b := y - 1)`), elaborated, never evaluated, and left alone.

Not covered: terms. Words inside terms are names or term syntax: checks.py judges them (IO and
meta names, `by_elab`, `eval%`, ...), and what a name resolves to is judged by the kernel
re-check. What the walk assumes: Lean starts a tactic inside a term only after `by` or
`decreasing_by`; an allowed tactic whose arguments hold a tactic block has the shape that walks
it (a wrong shape hides that block: tests/lean/test_tactic_allowlist.py holds each shape); the
text passed checks.py's lexical and layout rules. Where it cannot tell what Lean reads (a `|`
inside alternatives, a `.` glued to a word at a tactic's start), it reads a tactic start: a
refusal of an odd honest proof rather than a tactic left unread. Text after what ends the top
block (an unmatched closer) is walked as tactics too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sgsbatch.verification.lexer import CLOSERS, OPENERS, Token, glued
from sgsbatch.verification.tactics import (
    ALTS,
    ARROW,
    CALC,
    CONV,
    CONV_TO_TACTIC,
    FIRST,
    IF,
    IN,
    SEQ,
    Tactic,
    lookup,
)
from sgsbatch.verification.vocabulary import CONFIG, UNKNOWN_TACTIC

# Words that start a tactic block inside a term (`decreasing_by` of a `let rec` in a proof term).
BLOCK_WORDS = frozenset({"by", "decreasing_by"})


@dataclass(frozen=True)
class Finding:
    """Why the walk refuses: `reason` is UNKNOWN_TACTIC or CONFIG (vocabulary.py), `detail` a sentence."""

    reason: str
    detail: str


class _Refused(Exception):
    def __init__(self, finding: Finding) -> None:
        super().__init__(finding.detail)
        self.finding = finding


# A config value may hold only these tokens: literals, brackets, field names and `.ctor` atoms.
_LITERAL_SYMS = frozenset({"{", "}", "[", "]", "(", ")", ",", ":=", "-", "."})
_LITERAL_WORDS = frozenset({"true", "false", "with"})


def _literal(value: Sequence[Token]) -> bool:
    """True if a `(name := value)` value is a literal: one name or number, or a structure instance /
    list / tuple of numbers, `true`/`false`, `.ctor` atoms and `{ source with field := literal }`."""
    if len(value) == 1 and value[0].kind in ("ident", "num"):
        return True
    for k, tok in enumerate(value):
        nxt = value[k + 1] if k + 1 < len(value) else None
        prev = value[k - 1] if k > 0 else None
        if tok.kind == "num" or (tok.kind == "sym" and tok.text in _LITERAL_SYMS):
            continue
        if tok.kind != "ident":
            return False
        if len(tok.parts) == 1 and (tok.text in _LITERAL_WORDS or (prev is not None and prev.text == "."
                                                                     and glued(prev, tok))):
            continue
        if nxt is not None and nxt.text in (":=", "with") and prev is not None and prev.text in ("{", ",", "with"):
            continue  # a field name, or the source of `{ src with ... }`
        if prev is not None and prev.text in (":=", ",", "[", "-") and (nxt is None or nxt.text in (",", "}", "]", ")")):
            continue  # a constant as a field's value, applied to nothing (`decide := Bool.true`)
        return False
    return True


@dataclass(frozen=True)
class _Stops:
    """What ends a tactic besides `;`, `<;>`, a line left of its block and an unmatched closer."""

    bar: bool = False  # a `|` separator (alternatives of `first`, `induction ... with`, `match`)
    comma: bool = False  # a `,` (a `by` block inside brackets: `⟨by simp, by ring⟩`)
    words: frozenset[str] = frozenset()  # `then`, `else` of a tactic `if`


class _Walker:
    def __init__(self, toks: Sequence[Token]) -> None:
        self.t = toks
        self.n = len(toks)
        self.heads: list[tuple[str, str]] = []  # (mode, name) of every tactic seen, in order
        self.cols: list[int] = []  # the columns of the open tactic blocks, outermost first

    # -- token shapes -------------------------------------------------------------------------
    def sym_run(self, i: int, s: str) -> bool:
        """True if the glued symbols at `i` spell `s` (`=>`, `<;>`, `<|>`)."""
        if i + len(s) > self.n:
            return False
        for k, ch in enumerate(s):
            tok = self.t[i + k]
            if tok.kind != "sym" or tok.text != ch or (k and not glued(self.t[i + k - 1], tok)):
                return False
        return True

    def word(self, i: int) -> str | None:
        tok = self.t[i] if i < self.n else None
        return tok.text if tok is not None and tok.kind == "ident" and len(tok.parts) == 1 else None

    def bar_sep(self, i: int) -> bool:
        """A `|` where alternatives are read (`first`, `induction ... with`, `match`): every `|` at the
        alternatives' bracket depth, glued or not (`first |simp |t` is two alternatives to Lean). An honest
        `|x|` there is refused rather than a tactic after a glued `|` left unread."""
        tok = self.t[i]
        return tok.kind == "sym" and tok.text == "|"

    def arrow(self, i: int) -> bool:
        """`=>`, or `↦` (Lean accepts it wherever `=>` ends a binder or an alternative)."""
        return self.sym_run(i, "=>") or (self.t[i].kind == "sym" and self.t[i].text == "↦")

    def newline(self, i: int) -> bool:
        return i > 0 and self.t[i].line != self.t[i - 1].line

    def ends(self, i: int, col: int, depth: int, stops: _Stops) -> bool:
        """True if a tactic of the block at `col` ends before token `i` (scanned at bracket `depth`)."""
        if i >= self.n:
            return True
        tok = self.t[i]
        if self.newline(i) and depth == 0 and (tok.col in self.cols or tok.col < min(self.cols, default=col)):
            return True  # where an open block could read its next tactic (Lean's `checkColEq`), or left of all
        if depth > 0:
            return False
        if tok.kind == "sym":
            if tok.text in CLOSERS or (tok.text == ";" and not self.sym_run(i - 1, "<;>")):
                return True
            if self.sym_run(i, "<;>") or self.sym_run(i, "<|>"):
                return True
            if (stops.bar and self.bar_sep(i)) or (stops.comma and tok.text == ","):
                return True
        return tok.kind == "ident" and (tok.text in stops.words or tok.text == "says")

    # -- blocks -------------------------------------------------------------------------------
    def seq(self, i: int, stops: _Stops, mode: str = "tactic") -> int:
        """A tactic sequence starting at `i`; returns the index after it."""
        if i >= self.n or self.at_stop(i, stops):
            return i
        col = self.t[i].col
        self.cols.append(col)
        try:
            return self.tactics(i, col, stops, mode)
        finally:
            self.cols.pop()

    def tactics(self, i: int, col: int, stops: _Stops, mode: str) -> int:
        """The tactics of the block at `col` from `i` on."""
        while True:
            i = self.tactic(i, col, stops, mode)
            while i < self.n and (self.sym_run(i, "<;>") or self.sym_run(i, "<|>") or self.word(i) == "says"):
                if self.word(i) == "says":
                    i = self.seq(i + 1, stops, mode)
                else:
                    i = self.tactic(i + 3, col, stops, mode) if i + 3 < self.n else self.n
            if i >= self.n:
                return i
            tok = self.t[i]
            if tok.kind == "sym" and tok.text == ";":
                i += 1
                if i >= self.n or self.at_stop(i, stops) or (self.newline(i) and self.t[i].col < col):
                    return i
                continue
            if self.newline(i) and tok.col == col and not self.at_stop(i, stops):
                continue
            return i

    def at_stop(self, i: int, stops: _Stops) -> bool:
        tok = self.t[i]
        return (tok.kind == "sym" and (tok.text in CLOSERS or (stops.bar and self.bar_sep(i))
                                       or (stops.comma and tok.text == ","))) or (
            tok.kind == "ident" and tok.text in stops.words)

    def tactic(self, i: int, col: int, stops: _Stops, mode: str) -> int:
        """One tactic at `i` (its head judged), returns the index after its arguments."""
        tok = self.t[i]
        if tok.kind == "sym" and tok.text in ("·", "."):  # `· t` focuses; `.t` too (`.` then a tactic to Lean)
            return self.seq(i + 1, stops, mode)
        if tok.kind == "sym" and tok.text in ("(", "{"):
            close = ")" if tok.text == "(" else "}"
            j = self.seq(i + 1, _Stops(), mode)
            if j < self.n and self.t[j].text == close:
                j += 1
            return self.args(j, col, stops, None, mode)  # a trailing `<;>` or `at` (conv) is the seq's
        name = self.word(i)
        entry = lookup(name, mode) if name is not None else None
        if entry is None:
            shown, kind = tok.text[:40], "tactic" if mode == "tactic" else f"{mode} tactic"
            where = f"line {tok.line}"
            if name is None:
                raise _Refused(Finding(UNKNOWN_TACTIC, f"`{shown}` at {where}: no {kind} starts with it"))
            raise _Refused(Finding(UNKNOWN_TACTIC, f"`{shown}` at {where}: not a {kind} on the allow-list "
                                   "(sgsbatch/verification/tactics.py)"))
        self.heads.append((mode, entry.name))
        j = self.config(i + 1, entry, mode)
        return self.args(j, col, stops, entry, mode)

    def config(self, i: int, entry: Tactic, mode: str) -> int:
        """The `optConfig` right after a head: `(name := literal)`, `+opt`, `-opt`; tactic-valued options walked."""
        while i < self.n:
            tok = self.t[i]
            if (tok.text in ("+", "-") and tok.kind == "sym" and i + 1 < self.n and glued(tok, self.t[i + 1])
                    and self.t[i + 1].kind == "ident"):
                i += 2
                continue
            if not (tok.text == "(" and i + 2 < self.n and self.t[i + 1].kind == "ident"
                    and self.t[i + 2].text == ":="):
                return i
            close = self.matching(i)
            option = self.t[i + 1].text
            if option in entry.tactic_options:
                self.seq(i + 3, _Stops(), "tactic")
            elif not _literal(self.t[i + 3 : close]):
                text = " ".join(t.text for t in self.t[i + 3 : close])[:60]
                raise _Refused(Finding(CONFIG, f"`({option} := {text})` of `{entry.name}` at line {tok.line}: "
                                       "a tactic configuration is evaluated as code, so it must be a literal"))
            i = close + 1
        return i

    def matching(self, i: int) -> int:
        """The index of the bracket that closes the one at `i` (or the end)."""
        depth = 0
        for j in range(i, self.n):
            text = self.t[j].text
            if self.t[j].kind == "sym":
                depth += (text in OPENERS) - (text in CLOSERS)
            if depth == 0:
                return j
        return self.n

    def args(self, i: int, col: int, stops: _Stops, entry: Tactic | None, mode: str) -> int:
        """A tactic's arguments up to its end; `by` blocks and the shape's tactic blocks walked."""
        shape = entry.shape if entry is not None else None
        if shape == SEQ:
            while i < self.n and self.t[i].kind == "num" and not self.newline(i):  # `iterate 3 t`
                i += 1
            if i < self.n and not self.ends(i, col, 0, stops) and (not self.newline(i) or self.t[i].col > col):
                return self.seq(i, stops, mode)
            return i
        if shape == FIRST:  # Lean: `withPosition((colGe "|" tacticSeq)+)`: the first `|` anywhere, then colGe
            bar_col = self.t[i].col if i < self.n else 0
            while i < self.n and self.bar_sep(i) and (not self.newline(i) or self.t[i].col >= bar_col):
                i = self.seq(i + 1, _Stops(bar=True, comma=stops.comma, words=stops.words), mode)
            return i
        st = _Args()
        while i < self.n:
            tok = self.t[i]
            if st.depth == 0 and self.ends(i, col, st.depth, stops) and not self.continues(i, col, shape, st):
                return i
            if (st.depth == 0 and entry is not None and entry.configs_anywhere and tok.text == "(" and i + 2 < self.n
                    and self.t[i + 1].kind == "ident" and self.t[i + 2].text == ":="):
                i = self.config(i, entry, mode)  # clauses in any order (`aesop (add ...) (simp_config := ...)`)
                continue
            if tok.kind == "sym" and tok.text in OPENERS:
                st.depth += 1
            elif tok.kind == "sym" and tok.text in CLOSERS:
                st.depth -= 1
                if st.depth < 0:
                    return i
            elif self.word(i) in BLOCK_WORDS:
                inner = _Stops(comma=st.depth > 0 or stops.comma, bar=st.depth == 0 and stops.bar,
                               words=stops.words if st.depth == 0 else frozenset())
                i = self.seq(i + 1, inner, "tactic")
                continue
            elif st.depth == 0:
                i, done = self.shape_word(i, stops, entry, mode, st)
                if done:
                    return i
                continue
            i += 1
        return i

    def continues(self, i: int, col: int, shape: str | None, st: _Args) -> bool:
        """A token that would end the tactic continues its shape: the next `|` alternative after `with`, a
        `calc` step's `_`, an `if`'s `else` on its own line."""
        tok = self.t[i]
        return (shape == ALTS and st.after_with and self.newline(i) and self.bar_sep(i)
                and tok.col >= (st.alt_col if st.alt_col is not None else 0)) or (
            shape == CALC and self.newline(i) and tok.col == col and tok.text == "_") or (
            shape == IF and st.seen_then and self.newline(i) and tok.col >= col and self.word(i) == "else")

    def shape_word(self, i: int, stops: _Stops, entry: Tactic | None, mode: str, st: _Args) -> tuple[int, bool]:
        """The token at `i`, outside brackets, as the tactic's shape reads it: (where to go on, whether the
        tactic ends there). `with` and the alternatives' `|`, `then`/`else` blocks, `in`, and `=>` blocks."""
        shape = entry.shape if entry is not None else None
        word = self.word(i)
        if shape == ALTS and word == "with":
            st.after_with = True
        elif st.after_with and st.alt_col is None and self.bar_sep(i):
            st.alt_col = self.t[i].col  # the alternatives' column: the first `|` anywhere, the others colGe
        elif shape == IF and word in ("then", "else"):
            st.seen_then = st.seen_then or word == "then"
            words = frozenset({"else"}) if word == "then" else stops.words
            return self.seq(i + 1, _Stops(bar=stops.bar, comma=stops.comma, words=words), mode), False
        elif shape == IN and word == "in":
            return self.seq(i + 1, stops, mode), True
        elif self.arrow(i) and (shape in (ARROW, CONV) or (shape == ALTS and st.after_with)):
            inner_mode = "conv" if shape == CONV or (shape == ARROW and mode == "conv" and entry is not None
                                                     and entry.name not in CONV_TO_TACTIC) else "tactic"
            inner = _Stops(bar=shape == ALTS or stops.bar, comma=stops.comma, words=stops.words)
            return self.seq(i + (2 if self.sym_run(i, "=>") else 1), inner, inner_mode), shape != ALTS
        return i + 1, False


@dataclass
class _Args:
    """What `_Walker.args` has seen of a tactic's arguments: bracket depth, the alternatives' `with` and
    column, an `if`'s `then`."""

    depth: int = 0
    after_with: bool = False
    seen_then: bool = False
    alt_col: int | None = None


def walk(toks: Sequence[Token]) -> tuple[list[tuple[str, str]], Finding | None]:
    """The tactics of a proof's block (mode, name) in order, and the first refusal (None if none)."""
    walker = _Walker(toks)
    try:
        i = walker.seq(0, _Stops())
        while i < walker.n:  # text after an unmatched closer: Lean fails it; still judge what follows
            i = walker.seq(i + 1, _Stops()) if walker.t[i].kind == "sym" else walker.seq(i, _Stops())
    except _Refused as e:
        return walker.heads, e.finding
    return walker.heads, None

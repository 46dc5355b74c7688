r"""Lean 4 source text read into tokens the way Lean's own parser reads it (v4.15.0 rules).

The reference is Lean's `src/Lean/Parser/Basic.lean` (`whitespace`, `finishCommentBlock`,
`tokenFnAux`, `identFnAux`, `strLitFnAux`, `quotedCharCoreFn`, `charLitFnAux`, `rawStrLitFnAux`,
`numberFnAux`) and `src/Init/Meta.lean` (`isIdFirst`, `isIdRest`, `isLetterLike`,
`isSubScriptAlnum`). `lex(text)` returns `Token`s with a kind (`KINDS`), the source text, the
unescaped name parts of identifiers and name literals (`«debug».«skipKernelTC»` has the parts
`("debug", "skipKernelTC")`), the 1-based line, the 0-based column in code points and the offsets.

Covered: `--` and nested `/- -/` comments are dropped, doc comments (`/--`, `/-!`) are `doc`
tokens; identifiers with `«»` parts and dots; string literals with every escape (`\\ \" \' \n
\t \r \xHH \uHHHH` and the `\` newline gap); character literals; raw strings `r#"..."#`;
interpolated strings after `s!`, `m!`, `f!`, `throwError`, `dbg_trace` (their `{...}` parts are
lexed as code, nested); number literals ended where Lean ends them (`1#eval` is `1`, `#`, `eval`;
`0x`/`0b`/`0o`, scientific `1.5e3`, field indices `h.2.1`); name literals (`` `foo ``).
Text Lean cannot tokenize (unterminated string or comment, bad escape, tab, a non-ASCII space,
`'` that starts no character literal) becomes an `error` token, never a silent skip.
Not covered: Lean's token table. Symbols are single characters (plus `QUOTE_TOKENS`, the
few Mathlib/core tokens containing `'`, and `:=`, `@[`), keywords are `ident` tokens and `#eval`
is `#` then `eval`: checks.py gives them meaning. Identifier characters follow v4.15.0 (no
Latin-1 letters, no `ⱼ`): splitting more than Lean only ever shows checks more words.
"""

from __future__ import annotations

from dataclasses import dataclass

KINDS = ("ident", "num", "str", "char", "name", "sym", "doc", "error")
# Tokens containing `'` that Lean/Mathlib's token table holds (a `'` after them starts no char literal).
QUOTE_TOKENS: tuple[str, ...] = ("⁻¹'", "∑'", "∏'", "×'", "''")
# A string literal right after one of these is an interpolated string (its `{...}` parts are code).
INTERPOLATORS = frozenset({"s!", "m!", "f!", "throwError", "throwErrorAt", "dbg_trace"})
_ESCAPES = frozenset("\\\"'rnt")
_SPACE = " \n"


@dataclass(frozen=True)
class Token:
    """One Lean token: `parts` are the unescaped name components of an `ident`/`name` token."""

    kind: str
    text: str
    line: int
    col: int
    start: int
    end: int
    parts: tuple[str, ...] = ()


# Brackets as Lean pairs them: each closer with its opener (`@[` closes with `]`).
CLOSERS: dict[str, str] = {")": "(", "]": "[", "}": "{", "⟩": "⟨", "⦄": "⦃", "⟧": "⟦", "⟯": "⟮"}
OPENERS: frozenset[str] = frozenset({"(", "[", "{", "⟨", "⦃", "⟦", "⟮", "@["})


def glued(a: Token, b: Token | None) -> bool:
    """True if `b` starts where `a` ends (no space or comment between them)."""
    return b is not None and a.end == b.start


def is_letter_like(ch: str) -> bool:
    """Lean's `isLetterLike` (Greek but λ Π Σ, Coptic, Greek Extended, letter-like block, math letters)."""
    v = ord(ch)
    return ((0x3B1 <= v <= 0x3C9 and v != 0x3BB) or (0x391 <= v <= 0x3A9 and v not in (0x3A0, 0x3A3))
            or 0x3CA <= v <= 0x3FB or 0x1F00 <= v <= 0x1FFE or 0x2100 <= v <= 0x214F or 0x1D49C <= v <= 0x1D59F)


def is_subscript_alnum(ch: str) -> bool:
    """Lean's `isSubScriptAlnum`: subscript digits and letters (`x₁`, `aᵢ`)."""
    v = ord(ch)
    return 0x2080 <= v <= 0x2089 or 0x2090 <= v <= 0x209C or 0x1D62 <= v <= 0x1D6A


def is_id_first(ch: str) -> bool:
    """Lean's `isIdFirst` (`Char.isAlpha` is ASCII only in Lean)."""
    return ch.isascii() and ch.isalpha() or ch == "_" or is_letter_like(ch)


def is_id_rest(ch: str) -> bool:
    """Lean's `isIdRest`."""
    return (ch.isascii() and ch.isalnum() or ch in "_'!?" or is_letter_like(ch)
            or is_subscript_alnum(ch))


def _is_digit(ch: str) -> bool:
    return "0" <= ch <= "9"


class _Lexer:
    def __init__(self, text: str) -> None:
        self.s = text
        self.n = len(text)
        self.out: list[Token] = []
        self.line_starts = [0] + [i + 1 for i, c in enumerate(text) if c == "\n"]

    def ch(self, i: int) -> str:
        return self.s[i] if i < self.n else ""

    def emit(self, kind: str, start: int, end: int, parts: tuple[str, ...] = ()) -> None:
        lo, hi = 0, len(self.line_starts) - 1
        while lo < hi:  # the last line start <= start
            mid = (lo + hi + 1) // 2
            if self.line_starts[mid] <= start:
                lo = mid
            else:
                hi = mid - 1
        self.out.append(Token(kind, self.s[start:end], lo + 1, start - self.line_starts[lo], start, end, parts))

    def error(self, start: int, end: int) -> int:
        self.emit("error", start, max(end, start + 1))
        return max(end, start + 1)

    # -- whitespace and comments ------------------------------------------------------------
    def block_comment_end(self, i: int) -> int:
        """Index after the `-/` closing a comment whose body starts at `i` (nesting 1); -1 if none."""
        depth = 1
        while i < self.n:
            if self.s.startswith("-/", i):
                depth -= 1
                i += 2
                if depth == 0:
                    return i
            elif self.s.startswith("/-", i):
                depth += 1
                i += 2
            else:
                i += 1
        return -1

    # -- literals ---------------------------------------------------------------------------
    def escape_end(self, i: int, in_string: bool) -> int:
        """Index after the escape whose `\\` is at `i`; -1 if Lean rejects it."""
        c = self.ch(i + 1)
        if c and c in _ESCAPES:
            return i + 2
        hexes = {"x": 2, "u": 4}.get(c)
        if hexes is not None:
            digits = self.s[i + 2 : i + 2 + hexes]
            ok = len(digits) == hexes and all(d in "0123456789abcdefABCDEF" for d in digits)
            return i + 2 + hexes if ok else -1
        if in_string and c == "\n":  # a gap: one newline, then spaces
            j = i + 2
            while j < self.n and self.s[j] in _SPACE:
                if self.s[j] == "\n":
                    return -1
                j += 1
            return j
        return -1

    def string(self, start: int, interpolated: bool) -> int:
        """Lex the string literal whose `"` is at `start`; returns the index after it."""
        i, piece = start + 1, start
        while i < self.n:
            c = self.s[i]
            if c == '"':
                self.emit("str", piece, i + 1)
                return i + 1
            if c == "\\":
                j = self.escape_end(i, True)
                if j < 0:
                    return self.error(start, i + 2)
                i = j
            elif c == "{" and interpolated:
                self.emit("str", piece, i)
                self.emit("sym", i, i + 1)
                i = self.code(i + 1, until_brace=True)
                if self.ch(i) != "}":
                    return self.error(start, i)
                self.emit("sym", i, i + 1)
                i += 1
                piece = i
            else:
                i += 1
        return self.error(start, self.n)

    def raw_start(self, i: int) -> bool:
        """Lean's `isRawStrLitStart` at `i` (just after the `r`): `#`s, then `"`."""
        while self.ch(i) == "#":
            i += 1
        return self.ch(i) == '"'

    def raw_string(self, start: int) -> int:
        """`r#"..."#` starting at `start` (the `r`); Lean's `rawStrLitFnAux`."""
        j = start + 1
        while self.ch(j) == "#":
            j += 1
        close = '"' + "#" * (j - start - 1)
        end = self.s.find(close, j + 1)
        if end < 0:
            return self.error(start, self.n)
        self.emit("str", start, end + len(close))
        return end + len(close)

    def char(self, start: int) -> int:
        """Character literal at `start` (Lean's `charLitFnAux`)."""
        i = start + 1
        if self.ch(i) == "\\":
            i = self.escape_end(i, False)
            if i < 0:
                return self.error(start, start + 2)
        elif i < self.n:
            i += 1
        if self.ch(i) != "'":
            return self.error(start, i)
        self.emit("char", start, i + 1)
        return i + 1

    def digits(self, i: int, ok: str) -> int:
        """Lean's `takeDigitsFn`: digits from `ok`, `_` separators followed by a digit."""
        while i < self.n and (self.s[i] in ok or (self.s[i] == "_" and self.ch(i + 1) in ok and self.ch(i + 1))):
            i += 1
        return i

    def number(self, start: int) -> int:
        """Lean's `numberFnAux` (and `fieldIdx` right after a `.`)."""
        dec = "0123456789"
        if start > 0 and self.s[start - 1] == "." and start > 1 and not self.s[start - 2].isspace():
            i = start
            while _is_digit(self.ch(i)):
                i += 1
            self.emit("num", start, i)
            return i
        base = {"b": "01", "o": "01234567", "x": "0123456789abcdefABCDEF"}.get(self.ch(start + 1).lower())
        if self.s[start] == "0" and base is not None:
            i = self.digits(start + 2, base)
            if i == start + 2:
                return self.error(start, i)
            self.emit("num", start, i)
            return i
        i = self.digits(start, dec)
        if self.ch(i) == ".":
            i += 1
            if _is_digit(self.ch(i)):
                i = self.digits(i, dec)
        if self.ch(i) in ("e", "E"):
            j = i + 1
            if self.ch(j) in ("+", "-"):
                j += 1
            if not _is_digit(self.ch(j)):
                return self.error(start, j)
            i = self.digits(j, dec)
        self.emit("num", start, i)
        return i

    def ident(self, start: int, kind: str = "ident", text_start: int = -1) -> int:
        """Lean's `identFnAux`: `«»` parts and `.`-joined parts; `start` is the first part."""
        i, parts = start, []
        text_start = start if text_start < 0 else text_start
        while True:
            if self.ch(i) == "«":
                end = self.s.find("»", i + 1)
                if end < 0:
                    return self.error(start, self.n)
                parts.append(self.s[i + 1 : end])
                i = end + 1
            else:
                j = i + 1
                while j < self.n and is_id_rest(self.s[j]):
                    j += 1
                parts.append(self.s[i:j])
                i = j
            nxt = self.ch(i + 1)
            if self.ch(i) == "." and nxt and (is_id_first(nxt) or nxt == "«"):
                i += 1
                continue
            self.emit(kind, text_start, i, tuple(parts))
            return i

    # -- the main loop ----------------------------------------------------------------------
    def code(self, i: int, until_brace: bool = False) -> int:
        """Lex code from `i`; with `until_brace`, stop before the `}` closing an interpolation."""
        depth = 0
        while i < self.n:
            j = self.blank(i)
            if j is None:
                j = self.literal(i)
            if j is not None:
                i = j
                continue
            c = self.s[i]
            tok = next((t for t in (*QUOTE_TOKENS, ":=", "@[") if self.s.startswith(t, i)), c)
            if until_brace:
                depth += tok == "{"
                if tok == "}":
                    if depth == 0:
                        return i
                    depth -= 1
            self.emit("sym", i, i + len(tok))
            i += len(tok)
        return i

    def blank(self, i: int) -> int | None:
        """Past the white space or comment at `i` (a doc comment emitted; a tab or a lone CR an error), or
        None when none starts there."""
        c = self.s[i]
        if c in _SPACE or (c == "\r" and self.ch(i + 1) == "\n"):
            return i + 1
        if c == "\t" or c == "\r" or c.isspace():
            return self.error(i, i + 1)
        if self.s.startswith("--", i):
            end = self.s.find("\n", i)
            return self.n if end < 0 else end
        if self.s.startswith("/-", i):
            doc = self.ch(i + 2) in ("-", "!")
            end = self.block_comment_end(i + 3 if doc else i + 2)
            if end < 0:
                return self.error(i, self.n)
            if doc:
                self.emit("doc", i, end)
            return end
        return None

    def literal(self, i: int) -> int | None:
        """Past the string, number, name, identifier or character at `i` (emitted), or None when none starts
        there (a symbol)."""
        c = self.s[i]
        if c == '"':
            prev = self.out[-1].text if self.out else ""
            return self.string(i, prev in INTERPOLATORS)
        if c == "r" and self.raw_start(i + 1):
            return self.raw_string(i)
        if _is_digit(c):
            return self.number(i)
        if c == "`" and (is_id_first(self.ch(i + 1)) or self.ch(i + 1) == "«"):
            return self.ident(i + 1, "name", i)
        if is_id_first(c) or c == "«":
            return self.ident(i)
        if c == "'" and self.ch(i + 1) != "'":
            return self.char(i)
        return None


def lex(text: str) -> list[Token]:
    """The tokens of `text` (comments dropped; see the module docstring for what each kind holds)."""
    lexer = _Lexer(text)
    lexer.code(0)
    return lexer.out

"""Static rejection of proofs (and model-written statements) before Lean sees them.

Lean runs `#eval`, `run_cmd`, custom elaborators, macros and initializers at elaboration time,
so a proof can run arbitrary code on the verify node, and commands like `axiom` or `set_option
debug.skipKernelTC` change what "checked" means. This module refuses such text with a stable
reason code (`REASONS`) and never sends it to Lean.

How: a small Lean lexer (`tokens`) drops `--` and nested `/- -/` comments, string, char and raw
string literals, and reads identifiers as whole tokens (dots, `_`, `'`, `!`, `?`, subscripts,
unicode letters and `«»` included), so `h_axiom`, `my_elab_lemma`, `syntax_tree`, `Foo.def`
and the word `#eval` in a comment or a string are not flagged. Then keyword rules run on the
tokens: a proof may contain tactics and terms only; every token that can only start a command
(or a forbidden tactic/term such as `native_decide`, `run_tac`, `by_elab`) is a rejection.

Covered: the reason codes below, `open ... in` / `set_option ... in` followed by a command,
forbidden `set_option` names (heartbeats, recursion depth, kernel/debug/compiler switches), a
second declaration, `import`, `sorry`/`admit`, `native_decide` and `Lean.ofReduceBool`.
Not covered: this is a filter, not a sandbox. It cannot prove a proof harmless (a future
Mathlib command or a tactic that evaluates code we do not know of would pass it); Lean still
elaborates whatever passes, and the axiom audit after the proof is a second line. Run verify
jobs without network access and as an unprivileged user, with the REPL pool's memory limit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

EVAL = "eval"
EXIT = "exit"
HASH_COMMAND = "hash_command"
RUN_CMD = "run_cmd"
RUN_TAC = "run_tac"
RUN_ELAB = "run_elab"
ELAB = "elab"
MACRO = "macro"
SYNTAX = "syntax"
NOTATION = "notation"
INITIALIZE = "initialize"
EXTERN = "extern"
IMPLEMENTED_BY = "implemented_by"
UNSAFE = "unsafe"
AXIOM = "axiom"
OPAQUE = "opaque"
SET_OPTION = "set_option"
LOCAL_INSTANCE = "local_instance"
IMPORT = "import"
OPEN_IN_COMMAND = "open_in_command"
DECLARATION = "declaration"
COMMAND = "command"
NATIVE_DECIDE = "native_decide"
SORRY = "sorry"
BAD_STATEMENT = "bad_statement"

_KEYWORD_REASONS: dict[str, str] = {
    "import": IMPORT,
    "run_cmd": RUN_CMD,
    "run_tac": RUN_TAC,
    "run_elab": RUN_ELAB, "run_meta": RUN_ELAB, "by_elab": RUN_ELAB,
    "elab": ELAB, "elab_rules": ELAB, "simproc": ELAB, "dsimproc": ELAB, "simproc_decl": ELAB,
    "dsimproc_decl": ELAB, "builtin_simproc": ELAB, "builtin_dsimproc": ELAB, "declare_simp_like_tactic": ELAB,
    "macro": MACRO, "macro_rules": MACRO,
    "syntax": SYNTAX, "declare_syntax_cat": SYNTAX,
    "notation": NOTATION, "notation3": NOTATION, "infix": NOTATION, "infixl": NOTATION, "infixr": NOTATION,
    "prefix": NOTATION, "postfix": NOTATION,
    "initialize": INITIALIZE, "builtin_initialize": INITIALIZE, "register_option": INITIALIZE,
    "register_builtin_option": INITIALIZE, "register_simp_attr": INITIALIZE, "register_label_attr": INITIALIZE,
    "extern": EXTERN,
    "implemented_by": IMPLEMENTED_BY,
    "unsafe": UNSAFE,
    "axiom": AXIOM,
    "opaque": OPAQUE,
    "native_decide": NATIVE_DECIDE, "ofReduceBool": NATIVE_DECIDE, "ofReduceNat": NATIVE_DECIDE,
    "reduceBool": NATIVE_DECIDE, "reduceNat": NATIVE_DECIDE,
    "sorry": SORRY, "admit": SORRY,
    "theorem": DECLARATION, "lemma": DECLARATION, "def": DECLARATION, "example": DECLARATION,
    "abbrev": DECLARATION, "instance": DECLARATION, "structure": DECLARATION, "class": DECLARATION,
    "inductive": DECLARATION, "coinductive": DECLARATION, "irreducible_def": DECLARATION, "alias": DECLARATION,
    "unif_hint": DECLARATION, "deriving": DECLARATION, "mutual": DECLARATION, "noncomputable": DECLARATION,
    "namespace": COMMAND, "section": COMMAND, "end": COMMAND, "variable": COMMAND, "universe": COMMAND,
    "export": COMMAND, "attribute": COMMAND, "omit": COMMAND, "include": COMMAND, "add_decl_doc": COMMAND,
    "compile_inductive%": COMMAND, "assert_not_exists": COMMAND,
}
# Qualified names whose last component is one of these are flagged too (`Lean.ofReduceBool`).
_QUALIFIED_REASONS = {"ofReduceBool", "ofReduceNat", "reduceBool", "reduceNat", "native_decide"}
# set_option names refused in a proof: exact names and prefixes (with the dot).
FORBIDDEN_OPTIONS: frozenset[str] = frozenset({
    "maxHeartbeats", "maxRecDepth", "synthInstance.maxHeartbeats", "synthInstance.maxSize", "maxSynthPendingDepth",
    "debug.skipKernelTC", "trust", "Elab.async", "exponentiation.threshold",
})
FORBIDDEN_OPTION_PREFIXES: tuple[str, ...] = ("debug.", "compiler.", "interpreter.", "bootstrap.", "kernel.",
                                              "internal.", "trust.")
_OPEN_PARTS = {"hiding", "renaming", "scoped", "(", ")", "→", "->"}
_DECL_START = {"theorem", "lemma"}

REASONS: frozenset[str] = frozenset({
    *_KEYWORD_REASONS.values(), EVAL, EXIT, HASH_COMMAND, SET_OPTION, LOCAL_INSTANCE, OPEN_IN_COMMAND,
    BAD_STATEMENT,
})


@dataclass(frozen=True)
class Token:
    """`kind`: ident, hash (`#eval`), num, or sym (one character, or `@[`); `line` is 1-based."""

    kind: str
    text: str
    line: int


@dataclass(frozen=True)
class Rejection:
    """Why a text was refused: `reason` is a code from `REASONS`, `detail` a sentence for people."""

    reason: str
    detail: str


def _ident_start(ch: str) -> bool:
    return ch == "_" or ch == "«" or (ch.isalpha() and ch not in "λΠΣ")


def _ident_char(ch: str) -> bool:
    return ch.isalnum() or ch in "_'!?" or "\u2080" <= ch <= "\u209c" or ch in "ᵢᵣᵤᵥᵦᵧᵨᵩᵪ"


def _skip_string(code: str, i: int) -> int:
    """Index after the string literal whose opening quote is at `i` (unterminated: end of text)."""
    n = len(code)
    i += 1
    while i < n:
        if code[i] == "\\":
            i += 2
        elif code[i] == '"':
            return i + 1
        else:
            i += 1
    return n


def _skip_block_comment(code: str, i: int) -> int:
    """Index after the nested `/- -/` comment opening at `i` (unterminated: end of text)."""
    depth, n = 0, len(code)
    while i < n:
        two = code[i : i + 2]
        if two == "/-":
            depth, i = depth + 1, i + 2
        elif two == "-/":
            depth, i = depth - 1, i + 2
            if depth == 0:
                return i
        else:
            i += 1
    return n


def _read_ident(code: str, i: int) -> int:
    """Index after the (possibly dotted, possibly «quoted») identifier starting at `i`."""
    n = len(code)
    while True:
        if code[i] == "«":
            end = code.find("»", i + 1)
            i = n if end < 0 else end + 1
        else:
            i += 1
            while i < n and _ident_char(code[i]):
                i += 1
        if i + 1 < n and code[i] == "." and _ident_start(code[i + 1]):
            i += 1
            continue
        return i


def tokens(code: str) -> list[Token]:
    """Lean tokens of `code` with comments and literals dropped (strings become a `str` token)."""
    out: list[Token] = []
    i, n, line = 0, len(code), 1
    while i < n:
        ch = code[i]
        start = i
        if ch.isspace():
            i += 1
        elif code.startswith("--", i):
            end = code.find("\n", i)
            i = n if end < 0 else end
        elif code.startswith("/-", i):
            i = _skip_block_comment(code, i)
        elif ch == '"':
            i = _skip_string(code, i)
            out.append(Token("str", '""', line))
        elif ch == "r" and (code.startswith('r"', i) or code.startswith("r#", i)):
            j = i + 1
            while j < n and code[j] == "#":
                j += 1
            if j < n and code[j] == '"':
                close = '"' + "#" * (j - i - 1)
                end = code.find(close, j + 1)
                i = n if end < 0 else end + len(close)
                out.append(Token("str", '""', line))
            else:
                i = _read_ident(code, i)
                out.append(Token("ident", code[start:i], line))
        elif ch == "'" and i + 2 < n and (code[i + 2] == "'" or code[i + 1] == "\\"):
            end = code.find("'", i + 2)
            i = n if end < 0 else end + 1
            out.append(Token("str", "''", line))
        elif _ident_start(ch):
            i = _read_ident(code, i)
            if i < n and code[i] == "%" and code[start:i] == "compile_inductive":
                i += 1
            out.append(Token("ident", code[start:i], line))
        elif ch == "#" and i + 1 < n and _ident_start(code[i + 1]):
            i = _read_ident(code, i + 1)
            if i < n and code[i] == "!":
                i += 1
            out.append(Token("hash", code[start:i], line))
        elif ch.isdigit():
            while i < n and (code[i].isalnum() or code[i] == "_"):
                i += 1
            out.append(Token("num", code[start:i], line))
        elif code.startswith("@[", i):
            i += 2
            out.append(Token("sym", "@[", line))
        elif code.startswith(":=", i):
            i += 2
            out.append(Token("sym", ":=", line))
        else:
            i += 1
            out.append(Token("sym", ch, line))
        line += code.count("\n", start, i)
    return out


def _keyword_reason(tok: Token) -> str | None:
    if tok.kind == "hash":
        name = tok.text.rstrip("!")
        return EVAL if name == "#eval" else EXIT if name == "#exit" else HASH_COMMAND
    if tok.kind != "ident":
        return None
    reason = _KEYWORD_REASONS.get(tok.text)
    if reason is None and "." in tok.text and tok.text.rsplit(".", 1)[1] in _QUALIFIED_REASONS:
        reason = NATIVE_DECIDE
    return reason


def _is_command_start(tok: Token) -> bool:
    reason = _keyword_reason(tok)
    return reason is not None and reason not in (SORRY, NATIVE_DECIDE) or tok.text in ("open", "set_option", "@[")


def forbidden_option(name: str) -> bool:
    """True for `set_option` names a proof may not change (limits, trust, kernel and compiler switches)."""
    return name in FORBIDDEN_OPTIONS or name.startswith(FORBIDDEN_OPTION_PREFIXES)


def _check_tokens(toks: Sequence[Token], what: str) -> Rejection | None:
    n = len(toks)
    for i, tok in enumerate(toks):
        nxt = toks[i + 1] if i + 1 < n else None
        where = f"line {tok.line} of the {what}"
        if tok.text == "open" and tok.kind == "ident":
            j = i + 1
            while j < n and toks[j].text != "in" and (toks[j].kind == "ident" or toks[j].text in _OPEN_PARTS):
                j += 1
            if j < n and toks[j].text == "in":
                if j + 1 < n and _is_command_start(toks[j + 1]):
                    return Rejection(OPEN_IN_COMMAND, f"`open ... in` followed by the command "
                                     f"`{toks[j + 1].text}` at {where}")
            else:
                return Rejection(COMMAND, f"`open` without `in` (a command, not a tactic) at {where}")
        elif tok.text == "set_option" and tok.kind == "ident":
            if nxt is not None and nxt.kind == "ident" and forbidden_option(nxt.text):
                return Rejection(SET_OPTION, f"`set_option {nxt.text}` at {where}")
        elif tok.text in ("local", "scoped") and nxt is not None and nxt.text == "instance":
            return Rejection(LOCAL_INSTANCE, f"`{tok.text} instance` at {where}")
        elif tok.text == "attribute" and nxt is not None and nxt.text == "[":
            close = next((k for k in range(i + 2, n) if toks[k].text == "]"), n)
            if any(t.text == "instance" for t in toks[i + 2 : close]):
                return Rejection(LOCAL_INSTANCE, f"`attribute [... instance]` at {where}")
        elif tok.text == "native" and tok.kind == "ident" and (
            (i > 0 and toks[i - 1].text == "+") or (nxt is not None and nxt.text == ":=")
        ):
            return Rejection(NATIVE_DECIDE, f"`decide` with the native option at {where}")
        reason = _keyword_reason(tok)
        if reason is not None:
            return Rejection(reason, f"`{tok.text}` at {where}")
    return None


def check_proof(proof: str) -> Rejection | None:
    """None if the proof (the text after `:= by`) may go to Lean, else why not."""
    return _check_tokens(tokens(proof), "proof")


def statement_name(theorem: str) -> str | None:
    """The declared name of a `theorem`/`lemma` statement (None if it does not start with one)."""
    toks = tokens(theorem)
    while toks and toks[0].text in ("@[",):
        close = next((k for k, t in enumerate(toks) if t.text == "]"), len(toks) - 1)
        toks = toks[close + 1 :]
    while toks and toks[0].text in ("private", "protected", "nonrec"):
        toks = toks[1:]
    if len(toks) < 2 or toks[0].text not in _DECL_START or toks[1].kind != "ident":
        return None
    return toks[1].text


def check_statement(theorem: str) -> Rejection | None:
    """None if a statement is one `theorem`/`lemma` whose text passes the proof rules.

    Statements written by the Conjecturer are model output too: a `(by run_tac ...)` inside a
    statement's type would run at elaboration time like one in a proof.
    """
    toks = tokens(theorem)
    k = 0
    if k < len(toks) and toks[k].text == "@[":
        k = next((j for j, t in enumerate(toks) if t.text == "]"), len(toks) - 1) + 1
    while k < len(toks) and toks[k].text in ("private", "protected", "nonrec"):
        k += 1
    if k + 1 >= len(toks) or toks[k].text not in _DECL_START or toks[k + 1].kind != "ident":
        return Rejection(BAD_STATEMENT, "the statement must be a single named `theorem` or `lemma`")
    return _check_tokens(toks[k + 2 :], "statement")

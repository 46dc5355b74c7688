"""Static rejection of proofs, model-written statements and headers before Lean sees them.

Lean runs `#eval`, `run_cmd`, custom elaborators, macros and initializers at elaboration time,
so a proof can run arbitrary code on the verify node, and commands like `axiom` or `set_option
debug.skipKernelTC` change what "checked" means. This module refuses such text with a stable
reason code (`REASONS`, vocabulary.py) and never sends it to Lean.

How: the text is read as Lean reads it (lexer.py: comments dropped, strings and char literals
kept whole, `s!"{...}"` parts lexed as code, `«»` names unescaped, numbers ended where Lean ends
them). Then, per token: command keywords and evaluating tactics (vocabulary.KEYWORD_REASONS),
`#` commands (`#eval`, `#print`, ...; `#s`, `#(s ∩ t)`, `#{x | p x}` are Finset.card and pass),
names from the IO and meta world by unescaped component (`IO`, `EStateM`, `unsafeBaseIO`,
`Lean.Elab`, ...), `eval%`, syntax quotations and name literals, `set_option` against an
ALLOW-list compared on the unescaped name, `open ... in` before a command, local instances and
native evaluation; every `(name := value)` of a proof must hold a literal (`_config`: Lean
evaluates tactic configurations) and a leading-dot name of several components
is refused (`.FS.writeFile` resolves in the expected type's namespace, class 2); a statement may
hold no `by` or `do` block besides its final `:= by` (class 5). Then the proof's shape: text Lean cannot tokenize or whose brackets do not
balance is refused (Lean would fail it anyway), and a line outside brackets that starts below
the tactic block's indentation with a word, `#`, `@[` or a doc comment is refused: there Lean's
tactic block has ended and a new top-level command would begin. Headers (`check_header`) may
only hold `import`, `open` (without `in`), allowed `set_option`s, `namespace`/`section`/`end`,
`universe` and comments; statements (`check_statement`) are one `theorem`/`lemma`, optionally
after doc comments, `open ... in` and allow-listed `set_option ... in`.

Not covered: this is a filter, not a sandbox. A command or evaluating tactic missing from
vocabulary.py, used inside brackets or at the block's indentation, passes; so does anything a
future Mathlib adds. Lean still elaborates whatever passes, and the axiom audit and the kernel
re-check are further lines. Run verify jobs without network access and as an unprivileged
user, with the REPL pool's memory limit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sgsbatch.verification.lexer import CLOSERS, OPENERS, Token, glued, lex
from sgsbatch.verification.skeleton import walk
from sgsbatch.verification.vocabulary import (
    AXIOM,
    BAD_HEADER,
    BAD_STATEMENT,
    COMMAND,
    CONFIG,
    DECLARATION,
    DEFAULT_BOUNDS,
    ELAB,
    EVAL,
    EXIT,
    EXTERN,
    HASH_COMMAND,
    IMPLEMENTED_BY,
    IMPORT,
    INITIALIZE,
    IO,
    LEADING_DOT,
    LEX_ERROR,
    LOCAL_INSTANCE,
    MACRO,
    META,
    NATIVE_DECIDE,
    NOTATION,
    OPAQUE,
    OPEN_IN_COMMAND,
    REASONS,
    RESOURCE_OPTIONS,
    RUN_CMD,
    RUN_ELAB,
    RUN_TAC,
    SET_OPTION,
    SORRY,
    STATEMENT_CODE,
    SYNTAX,
    TOP_LEVEL,
    TRACE,
    UNKNOWN_TACTIC,
    UNSAFE,
    OptionBounds,
    hash_reason,
    keyword_reason,
    name_reason,
    namespace_reason,
    option_allowed,
)

__all__ = [
    "AXIOM", "BAD_HEADER", "BAD_STATEMENT", "COMMAND", "CONFIG", "DECLARATION", "ELAB", "EVAL", "EXIT", "EXTERN",
    "HASH_COMMAND", "IMPLEMENTED_BY", "IMPORT", "INITIALIZE", "IO", "LEADING_DOT", "LEX_ERROR", "LOCAL_INSTANCE",
    "MACRO", "META", "NATIVE_DECIDE", "NOTATION", "OPAQUE", "OPEN_IN_COMMAND", "REASONS", "RUN_CMD", "RUN_ELAB",
    "RUN_TAC", "SET_OPTION", "SORRY", "STATEMENT_CODE", "SYNTAX", "TOP_LEVEL", "TRACE", "UNKNOWN_TACTIC", "UNSAFE",
    "DEFAULT_BOUNDS", "OptionBounds", "Rejection",
    "check_header", "check_proof", "check_statement", "declared_name", "reference_statement", "statement_name",
]

_OPEN_PARTS = {"hiding", "renaming", "scoped", "(", ")", "→", "->"}
_OPEN_STOP = {"in", "open", "set_option"}  # besides keywords: where an `open`'s namespaces end
_DECL_START = {"theorem", "lemma"}


@dataclass(frozen=True)
class Rejection:
    """Why a text was refused: `reason` is a code from `REASONS`, `detail` a sentence for people."""

    reason: str
    detail: str


def _word(tok: Token) -> str | None:
    """The keyword a token spells: an unescaped, undotted identifier (`«axiom»` is a plain name)."""
    return tok.text if tok.kind == "ident" and len(tok.parts) == 1 and tok.text == tok.parts[0] else None


def _lexical(toks: Sequence[Token], what: str, balanced: bool = True) -> Rejection | None:
    """Tokenizing errors and (with `balanced`) unbalanced brackets: Lean fails such text anyway."""
    stack: list[Token] = []
    for tok in toks:
        where = f"line {tok.line} of the {what}"
        if tok.kind == "error":
            return Rejection(LEX_ERROR, f"Lean cannot read {tok.text[:40]!r} at {where}")
        if tok.kind != "sym" or not balanced:
            continue
        if tok.text in OPENERS:
            stack.append(tok)
        elif tok.text in CLOSERS:
            if not stack or stack[-1].text.lstrip("@") != CLOSERS[tok.text]:
                return Rejection(LEX_ERROR, f"unbalanced `{tok.text}` at {where}")
            stack.pop()
    if stack:
        return Rejection(LEX_ERROR, f"`{stack[-1].text}` at line {stack[-1].line} of the {what} is never closed")
    return None


def _open_end(toks: Sequence[Token], i: int) -> int:
    """Index of the token after the namespaces of the `open` at `i`."""
    j = i + 1
    while j < len(toks) and toks[j].text not in _OPEN_STOP and (
        toks[j].kind == "ident" and keyword_reason(toks[j].text) is None or toks[j].text in _OPEN_PARTS
    ):
        j += 1
    return j


def _namespaces(toks: Sequence[Token], i: int, where: str) -> Rejection | None:
    """The namespaces of the `open` at `i`: none of the IO world or of Lean's meta-programming
    (`open System in` then `FilePath` and field notation reach IO actions)."""
    for k in range(i + 1, _open_end(toks, i)):
        if toks[k].kind == "ident" and _word(toks[k]) not in _OPEN_PARTS:
            reason = namespace_reason(toks[k].parts)
            if reason is not None:
                return Rejection(reason, f"`open {toks[k].text}` at {where}: its names would resolve from single "
                                 "words")
    return None


def _token_rule(toks: Sequence[Token], i: int, what: str, header: bool = False) -> Rejection | None:
    """The rule of the token at `i`: a command word's own (`open`, `set_option`), else the marks of code,
    commands and instances, else its keyword or name. The cases are disjoint by the token's kind and word, so
    their order does not matter."""
    tok = toks[i]
    where = f"line {tok.line} of the {what}"
    word = _word(tok)
    if word == "open":
        return _open_rule(toks, i, where, header)
    if word == "set_option":
        nxt = toks[i + 1] if i + 1 < len(toks) else None
        if nxt is None or nxt.kind != "ident":
            return Rejection(SET_OPTION, f"`set_option` without an option name at {where}")
        name = ".".join(nxt.parts)
        if not option_allowed(name, header):
            return Rejection(SET_OPTION, f"`set_option {name}` at {where} (not on the allow-list)")
        return None
    if word == "unsafe" and i > 0 and _word(toks[i - 1]) == "add":
        return None  # Aesop's rule clause `(add unsafe 50% apply h)`, not Lean's `unsafe` term or modifier
    found = _literal_rule(toks, i, where) or _construct_rule(toks, i, word, where)
    if found is not None:
        return found
    reason = keyword_reason(word) if word is not None else None
    if reason is None and tok.kind == "ident":
        reason = name_reason(tok.parts)
    return Rejection(reason, f"`{tok.text}` at {where}") if reason is not None else None


def _open_rule(toks: Sequence[Token], i: int, where: str, header: bool) -> Rejection | None:
    """`open ... in` before a command, `open` as a command outside the header, or namespaces it may not open."""
    n = len(toks)
    j = _open_end(toks, i)
    if j < n and toks[j].text == "in":
        if j + 1 < n and _starts_command(toks[j + 1]):
            return Rejection(OPEN_IN_COMMAND, f"`open ... in` followed by the command `{toks[j + 1].text}` "
                             f"at {where}")
    elif not header:
        return Rejection(COMMAND, f"`open` without `in` (a command, not a tactic) at {where}")
    return _namespaces(toks, i, where)


def _literal_rule(toks: Sequence[Token], i: int, where: str) -> Rejection | None:
    """Doc comments, name literals and quotations, `#` commands, `eval%`."""
    tok = toks[i]
    nxt = toks[i + 1] if i + 1 < len(toks) else None
    if tok.kind == "doc":
        return Rejection(COMMAND, f"a doc comment `{tok.text[:3]}` (it starts a command or declaration) at {where}")
    if tok.kind == "name" or tok.text == "`":
        return Rejection(META, f"a name literal or syntax quotation `{tok.text}` at {where}")
    if tok.text == "#" and nxt is not None and nxt.kind == "ident" and glued(tok, nxt):
        reason = hash_reason("#" + nxt.text)
        if reason is not None:
            return Rejection(reason, f"`#{nxt.text}` at {where}")
    if _word(tok) == "eval" and nxt is not None and nxt.text == "%" and glued(tok, nxt):
        return Rejection(EVAL, f"`eval%` at {where}")
    return None


def _construct_rule(toks: Sequence[Token], i: int, word: str | None, where: str) -> Rejection | None:
    """The `trace` tactic, leading-dot names, local instances, `decide` with the native option."""
    tok, n = toks[i], len(toks)
    nxt = toks[i + 1] if i + 1 < n else None
    if word == "trace" and nxt is not None and nxt.kind == "str":  # the `trace "msg"` tactic (not Matrix.trace)
        return Rejection(TRACE, f"the `trace` tactic at {where}")
    if tok.kind == "ident" and len(tok.parts) > 1 and _leading_dot(toks, i):
        return Rejection(LEADING_DOT, f"`.{tok.text}` at {where}: a leading-dot name resolves in the namespace of "
                         "its expected type, which no filter of tokens can see")
    if word in ("local", "scoped") and nxt is not None and nxt.text == "instance":
        return Rejection(LOCAL_INSTANCE, f"`{word} instance` at {where}")
    if word == "attribute" and nxt is not None and nxt.text == "[":
        close = next((k for k in range(i + 2, n) if toks[k].text == "]"), n)
        if any(t.text == "instance" for t in toks[i + 2 : close]):
            return Rejection(LOCAL_INSTANCE, f"`attribute [... instance]` at {where}")
    if word == "native" and ((i > 0 and toks[i - 1].text == "+") or (nxt is not None and nxt.text == ":=")):
        return Rejection(NATIVE_DECIDE, f"`decide` with the native option at {where}")
    return None


def _leading_dot(toks: Sequence[Token], i: int) -> bool:
    """True if the identifier at `i` follows a `.` that follows no term (`.FS.writeFile`, not `(f x).le.trans`)."""
    if i == 0 or toks[i - 1].text != "." or not glued(toks[i - 1], toks[i]):
        return False
    before = toks[i - 2] if i >= 2 else None
    return before is None or not glued(before, toks[i - 1]) or (before.kind == "sym" and before.text in OPENERS)


def _resource_options(toks: Sequence[Token], what: str, bounds: OptionBounds) -> Rejection | None:
    """Every `set_option` of a resource option (`maxHeartbeats`, `maxRecDepth`, ...) holds a number within
    its bound (provers write them; the wall clock bounds the time anyway)."""
    for i, tok in enumerate(toks[:-2]):
        if _word(tok) != "set_option" or toks[i + 1].kind != "ident":
            continue
        name = ".".join(toks[i + 1].parts)
        if name not in RESOURCE_OPTIONS:
            continue
        value = toks[i + 2]
        bound = bounds.bound(name)
        if value.kind != "num" or not value.text.isdigit():
            return Rejection(SET_OPTION, f"`set_option {name} {value.text[:20]}` at line {tok.line} of the {what}: "
                             "the value must be a number")
        if bound and not 0 < int(value.text) <= bound:
            return Rejection(SET_OPTION, f"`set_option {name} {value.text}` at line {tok.line} of the {what}: "
                             f"over the bound {bound} (verification.{bounds.key(name)}, fixed at launch; 0 = no limit)")
    return None


def _tactics(toks: Sequence[Token]) -> Rejection | None:
    """Every tactic of the proof on the allow-list, every configuration literal (skeleton.py, tactics.py)."""
    _, finding = walk(toks)
    return None if finding is None else Rejection(finding.reason, finding.detail)


def _starts_command(tok: Token) -> bool:
    word = _word(tok)
    reason = keyword_reason(word) if word is not None else None
    return (reason is not None and reason not in (SORRY, NATIVE_DECIDE, TRACE, IO)) or tok.text in (
        "open", "set_option", "@[", "#") or tok.kind == "doc"


def _check_tokens(toks: Sequence[Token], what: str) -> Rejection | None:
    for i in range(len(toks)):
        rejection = _token_rule(toks, i, what)
        if rejection is not None:
            return rejection
    return None


def _layout(toks: Sequence[Token]) -> Rejection | None:
    """A line outside brackets that starts below the tactic block's column with what could start a command.

    The block's column is that of the first token when it is on a later line than `by`; when the
    first tactic shares the line with `by` its true column is at least one more than it is here.
    """
    if not toks:
        return None
    first = toks[0]
    block = first.col if first.line > 1 else first.col + 1
    depth, line = 0, first.line
    for tok in toks:
        if tok.line != line and depth == 0 and tok.col < block and (
            tok.kind in ("ident", "doc") or tok.text in ("#", "@[", "`")
        ):
            return Rejection(TOP_LEVEL, f"`{tok.text[:40]}` at line {tok.line}, column {tok.col}: below the "
                             f"proof's indentation (column {block}) it would start a new command")
        line = tok.line
        if tok.kind == "sym":
            depth += (tok.text in OPENERS) - (tok.text in CLOSERS)
    return None


def tactic_names(proof: str) -> list[tuple[str, str]]:
    """The (mode, tactic) pairs of a proof's tactic block in order, as far as the allow-list walk reaches."""
    return walk(lex(proof))[0]


def check_proof(proof: str, bounds: OptionBounds = DEFAULT_BOUNDS) -> Rejection | None:
    """None if the proof (the tactic block after `:= by`) may go to Lean, else why not."""
    toks = lex(proof)
    return (_lexical(toks, "proof") or _check_tokens(toks, "proof") or _layout(toks)
            or _resource_options(toks, "proof", bounds) or _tactics(toks))


def _option_in_end(toks: Sequence[Token], i: int) -> int | None:
    """Index after the `in` of a `set_option NAME VALUE in` at `i` (VALUE one literal), else None."""
    if (i + 3 < len(toks) and toks[i + 1].kind == "ident" and toks[i + 2].kind in ("ident", "num", "str")
            and toks[i + 3].text == "in"):
        return i + 4
    return None


def _statement_start(toks: Sequence[Token]) -> tuple[int, list[int], list[int]] | None:
    """(index of `theorem`/`lemma`, indices of the `open ... in` prefixes, indices of the `set_option
    ... in` prefixes) or None if it has none. Doc comments may sit among the prefixes."""
    k, opens, options = 0, [], []
    while k < len(toks):
        if toks[k].kind == "doc" and toks[k].text.startswith("/--"):
            k += 1
        elif _word(toks[k]) == "open":
            j = _open_end(toks, k)
            if j >= len(toks) or toks[j].text != "in":
                return None
            opens.append(k)
            k = j + 1
        elif _word(toks[k]) == "set_option":
            end = _option_in_end(toks, k)
            if end is None:
                return None
            options.append(k)
            k = end
        else:
            break
    if k + 1 < len(toks) and _word(toks[k]) in _DECL_START and toks[k + 1].kind == "ident":
        return k, opens, options
    return None


def statement_name(theorem: str) -> str | None:
    """The declared name of a `theorem`/`lemma` statement (None if it is not one)."""
    toks = lex(theorem)
    start = _statement_start(toks)
    return None if start is None else toks[start[0] + 1].text


def header_namespace(header: str) -> tuple[str, ...]:
    """The namespace a header leaves open (`namespace A` ... `end A` nest; `section`s add nothing)."""
    toks = lex(header)
    stack: list[tuple[str, ...]] = []
    for i, tok in enumerate(toks):
        word = _word(tok)
        nxt = toks[i + 1] if i + 1 < len(toks) else None
        named = nxt is not None and nxt.kind == "ident" and nxt.line == tok.line
        if word == "namespace" and nxt is not None and named:
            stack.append(nxt.parts)
        elif word == "section":
            stack.append(())
        elif word == "end" and stack:
            stack.pop()
    return tuple(p for parts in stack for p in parts)


def declared_name(header: str, theorem: str) -> str | None:
    """The full name a statement declares after `header`: `namespace Foo` in the
    header makes `theorem t` declare `Foo.t`; `_root_.t` declares `t`. None if it is no statement."""
    name = statement_name(theorem)
    if name is None:
        return None
    if name.startswith("_root_."):
        return name.removeprefix("_root_.")
    return ".".join((*header_namespace(header), name))


def reference_statement(theorem: str) -> str:
    """The statement without its final tactic block: `theorem t : P :=` (what the checker elaborates,
    with ` sorry` appended, so that no tactic of the statement's text runs in the trusted process)."""
    toks = lex(theorem)
    if len(toks) >= 2 and toks[-1].text == "by" and toks[-2].text == ":=":
        return theorem[: toks[-1].start].rstrip()
    return theorem.rstrip()


def check_statement(theorem: str, bounds: OptionBounds = DEFAULT_BOUNDS) -> Rejection | None:
    """None if a statement is one `theorem`/`lemma` whose text passes the proof rules.

    Statements written by the Conjecturer are model output too: a `(by run_tac ...)` inside a
    statement's type would run at elaboration time like one in a proof. Doc comments, `open ...
    in` prefixes (`open Real in theorem ...`; their names are checked) and `set_option NAME VALUE
    in` prefixes (a literal VALUE; NAME on the header's allow-list, which adds `maxHeartbeats`,
    bounded by the pool's wall-clock timeout anyway) are accepted.
    """
    toks = lex(theorem)
    bad = _lexical(toks, "statement", balanced=False)  # no layout rule here: brackets need not be counted
    if bad is not None:
        return bad
    start = _statement_start(toks)
    if start is None:
        return Rejection(BAD_STATEMENT, "the statement must be a single named `theorem` or `lemma` "
                         "(after optional doc comments, `open ... in` and `set_option ... in`)")
    k, opens, options = start
    for o in opens:
        bad = _namespaces(toks, o, f"line {toks[o].line} of the statement") or next(
            (r for i in range(o + 1, _open_end(toks, o)) if (r := _token_rule(toks, i, "statement"))), None)
        if bad is not None:
            return bad
    for o in options:  # the option's name against the header's allow-list, its value like any token
        bad = _token_rule(toks, o, "statement", header=True) or _token_rule(toks, o + 2, "statement")
        if bad is not None:
            return bad
    body = toks[k + 2 :]
    if len(body) >= 2 and body[-1].text == "by" and body[-2].text == ":=":
        body = body[:-1]  # the proof's tactic block starts here
    bad = _check_tokens(body, "statement") or _resource_options(toks, "statement", bounds)
    code = next((t for t in body if _word(t) in ("by", "do")), None)
    if bad is None and code is not None:
        return Rejection(STATEMENT_CODE, f"`{code.text}` at line {code.line} of the statement: a statement holds no "
                         "tactic block or `do` block (its code would run where it is elaborated)")
    return bad


def check_header(header: str) -> Rejection | None:
    """None if a header holds only `import`, `open` (no `in`), allowed `set_option`s, `namespace`,
    `section` (also `noncomputable section`), `end`, `universe`, comments and blank lines."""
    toks = lex(header)
    bad = _lexical(toks, "header")
    if bad is not None:
        return Rejection(BAD_HEADER, bad.detail)
    i, n = 0, len(toks)
    while i < n:
        tok, word = toks[i], _word(toks[i])
        where = f"line {tok.line} of the header"
        if word == "noncomputable" and i + 1 < n and _word(toks[i + 1]) == "section":
            i, tok, word = i + 1, toks[i + 1], "section"
        if word == "import" and i + 1 < n and toks[i + 1].kind == "ident":
            i += 2
        elif word == "open":
            j = _open_end(toks, i)
            if j < n and toks[j].text == "in":
                return Rejection(BAD_HEADER, f"`open ... in` at {where}")
            bad = _namespaces(toks, i, where) or next(
                (r for k in range(i + 1, j) if (r := _token_rule(toks, k, "header", header=True))), None)
            if bad is not None:
                return bad
            i = j
        elif word == "set_option" and i + 2 < n and toks[i + 2].kind in ("ident", "num", "str"):
            bad = _token_rule(toks, i, "header", header=True)
            if bad is not None:
                return bad
            if i + 3 < n and toks[i + 3].text == "in":
                return Rejection(BAD_HEADER, f"`set_option ... in` at {where}")
            i += 3
        elif word in ("namespace", "section", "end", "universe"):
            j = i + 1
            while j < n and toks[j].kind == "ident" and toks[j].line == tok.line and _word(toks[j]) not in (
                "import", "open", "set_option", "namespace", "section", "end", "universe", "noncomputable"
            ):
                bad = _token_rule(toks, j, "header", header=True)
                if bad is not None:
                    return bad
                j += 1
            if word in ("namespace", "universe") and j == i + 1:
                return Rejection(BAD_HEADER, f"`{word}` without a name at {where}")
            i = j
        else:
            return Rejection(BAD_HEADER, f"`{tok.text[:40]}` at {where}: a header holds only import, open, "
                             "allowed set_option, namespace, section, end, universe and comments")
    return None

"""lexer.py against Lean 4's own token rules (src/Lean/Parser/Basic.lean, src/Init/Meta.lean, v4.15.0)."""

from __future__ import annotations

import pytest

from sgsbatch.verification.lexer import is_id_first, is_id_rest, lex


def _kt(text: str) -> list[tuple[str, str]]:
    return [(t.kind, t.text) for t in lex(text)]


# (text, [(kind, text), ...]) as Lean's tokenFn reads them.
CASES: list[tuple[str, list[tuple[str, str]]]] = [
    # identifiers: isIdFirst / isIdRest, letter-like, subscripts, «» parts, dots
    ("h_axiom.foo x₁ aᵢ ℝ α' h!? _x", [("ident", "h_axiom.foo"), ("ident", "x₁"), ("ident", "aᵢ"), ("ident", "ℝ"),
                                      ("ident", "α'"), ("ident", "h!?"), ("ident", "_x")]),
    ("λx Πy Σz", [("sym", "λ"), ("ident", "x"), ("sym", "Π"), ("ident", "y"), ("sym", "Σ"), ("ident", "z")]),
    ("«debug».«skipKernelTC» Foo.«bar baz».q", [("ident", "«debug».«skipKernelTC»"), ("ident", "Foo.«bar baz».q")]),
    ("é", [("sym", "é")]),  # Latin-1 letters are not identifier characters in v4.15.0
    ("x⁻¹axiom", [("ident", "x"), ("sym", "⁻"), ("sym", "¹"), ("ident", "axiom")]),
    ("sᶜaxiom", [("ident", "s"), ("sym", "ᶜ"), ("ident", "axiom")]),
    ("h.2.1 x.1e5", [("ident", "h"), ("sym", "."), ("num", "2"), ("sym", "."), ("num", "1"), ("ident", "x"),
                     ("sym", "."), ("num", "1"), ("ident", "e5")]),
    # numbers end where Lean ends them
    ("1#eval", [("num", "1"), ("sym", "#"), ("ident", "eval")]),
    ("2axiom 0x1Fg 0b101 0o17 1_000", [("num", "2"), ("ident", "axiom"), ("num", "0x1F"), ("ident", "g"),
                                       ("num", "0b101"), ("num", "0o17"), ("num", "1_000")]),
    ("1.5e3 2.5E-2 3. 4e+1", [("num", "1.5e3"), ("num", "2.5E-2"), ("num", "3."), ("num", "4e+1")]),
    ("0x", [("error", "0x")]),
    ("1e", [("error", "1e")]),
    # comments
    ("a -- #eval\nb", [("ident", "a"), ("ident", "b")]),
    ("a /- x /- nested #exit -/ still -/ b", [("ident", "a"), ("ident", "b")]),
    ("/-- doc -/ theorem", [("doc", "/-- doc -/"), ("ident", "theorem")]),
    ("/-! module -/ x", [("doc", "/-! module -/"), ("ident", "x")]),
    ("a /- never closed", [("ident", "a"), ("error", "/- never closed")]),
    # strings, every escape, gaps
    (r'"a\"b\\c\'\n\t\r\x41\u03B1" x', [("str", r'"a\"b\\c\'\n\t\r\x41\u03B1"'), ("ident", "x")]),
    ('"gap \\\n    continues" y', [("str", '"gap \\\n    continues"'), ("ident", "y")]),
    ('"unterminated #eval', [("error", '"unterminated #eval')]),
    (r'"\q"', [("error", r'"\q'), ("error", '"')]),
    # raw strings
    ('r"a\\" b', [("str", 'r"a\\"'), ("ident", "b")]),
    ('r#"has "quote" inside"# c', [("str", 'r#"has "quote" inside"#'), ("ident", "c")]),
    ("r x", [("ident", "r"), ("ident", "x")]),
    # char literals
    (r"'\'' '\\' '\x41' 'a' '\"'", [("char", r"'\''"), ("char", r"'\\'"), ("char", r"'\x41'"), ("char", "'a'"),
                                    ("char", "'\\\"'")]),
    ("'\"' #eval", [("char", "'\"'"), ("sym", "#"), ("ident", "eval")]),
    ("'ab'", [("error", "'a"), ("ident", "b'")]),
    # tokens with a quote that Mathlib defines
    ("f '' s ⁻¹' t ∑' i ×' q", [("ident", "f"), ("sym", "''"), ("ident", "s"), ("sym", "⁻¹'"), ("ident", "t"),
                                ("sym", "∑'"), ("ident", "i"), ("sym", "×'"), ("ident", "q")]),
    # interpolated strings: the {...} parts are code, nested
    ('s!"a{#eval}b"', [("ident", "s!"), ("str", '"a'), ("sym", "{"), ("sym", "#"), ("ident", "eval"),
                       ("sym", "}"), ("str", 'b"')]),
    ('m!"{f!"{x}"}"', [("ident", "m!"), ("str", '"'), ("sym", "{"), ("ident", "f!"), ("str", '"'), ("sym", "{"),
                       ("ident", "x"), ("sym", "}"), ("str", '"'), ("sym", "}"), ("str", '"')]),
    ('"{#eval}"', [("str", '"{#eval}"')]),  # a plain string's braces are text
    ('s!"{ {a := 1}.a }"', [("ident", "s!"), ("str", '"'), ("sym", "{"), ("sym", "{"), ("ident", "a"),
                            ("sym", ":="), ("num", "1"), ("sym", "}"), ("sym", "."), ("ident", "a"), ("sym", "}"),
                            ("str", '"')]),
    # name literals, @[ and :=
    ("`foo.bar ``x @[simp] a := b", [("name", "`foo.bar"), ("sym", "`"), ("name", "`x"),
                                      ("sym", "@["), ("ident", "simp"), ("sym", "]"), ("ident", "a"),
                                      ("sym", ":="), ("ident", "b")]),
    # whitespace Lean refuses
    ("a\tb", [("ident", "a"), ("error", "\t"), ("ident", "b")]),
    ("a\u00a0b", [("ident", "a"), ("error", "\u00a0"), ("ident", "b")]),
    ("a\r\nb", [("ident", "a"), ("ident", "b")]),
]


@pytest.mark.parametrize(("text", "expected"), CASES)
def test_tokens_as_lean_reads_them(text: str, expected: list[tuple[str, str]]) -> None:
    assert _kt(text) == expected


def test_text_lean_cannot_read_starts_with_an_error_token() -> None:
    for text in (r"'\u{1F600}'", r"'\x4'", "'", '"', "«open", "0b2", "1.5e+", "/-"):  # v4.15.0: \u takes 4 hex digits
        assert lex(text)[0].kind == "error", text


def test_unescaped_parts_lines_and_columns() -> None:
    toks = lex("set_option «debug».«skipKernelTC» true in\n  «maxHeartbeats» x")
    assert toks[1].parts == ("debug", "skipKernelTC")
    assert toks[4].parts == ("maxHeartbeats",) and (toks[4].line, toks[4].col) == (2, 2)
    assert lex("`IO.FS")[0].parts == ("IO", "FS")
    assert (lex("\n\n   x")[0].line, lex("\n\n   x")[0].col) == (3, 3)


@pytest.mark.parametrize(("ch", "first", "rest"), [
    ("a", True, True), ("Z", True, True), ("_", True, True), ("0", False, True), ("'", False, True),
    ("!", False, True), ("?", False, True), ("α", True, True), ("λ", False, False), ("Π", False, False),
    ("Σ", False, False), ("ℕ", True, True), ("𝔽", True, True), ("₁", False, True), ("ᵢ", False, True),
    ("ⱼ", False, False), ("é", False, False), ("é".upper(), False, False), ("⁻", False, False), (".", False, False),
])
def test_identifier_characters_follow_lean(ch: str, first: bool, rest: bool) -> None:
    assert (is_id_first(ch), is_id_rest(ch)) == (first, rest)

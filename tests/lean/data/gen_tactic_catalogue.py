"""Generate tactic_catalogue.tsv: every tactic/conv syntax that Lean, Mathlib and the packages Mathlib
re-exports declare at the pinned versions (issue 38), as facts (keyword, node name, file, line, flags).

Independent of sgsbatch (nothing here imports it, and sgsbatch never imports this): it reads Lean
sources and writes a data file that tests/lean/test_tactic_catalogue.py holds tactics.py against.

Sources, each a git directory read at a pinned revision (`git show REV:PATH`, nothing is checked out)
or an installed source tree (`--tree LABEL=DIR`, e.g. `lean/.lake/packages/mathlib` after
`setup.sh --lean`, or the toolchain's `src/lean`), scanning every `.lean` file under the prefixes:

| label | repository | revision | prefixes |

is in `SOURCES` below. Revisions: Lean's tag from lean/lean-toolchain, Mathlib's from lean/lakefile.toml,
Batteries/Aesop/Plausible at the tags Mathlib's manifest names for v4.15.0. The resolved commit of
each is written in the output's header.

What is extracted, per declaration (comments blanked first, line numbers kept):
- `syntax`, `macro`, `elab` whose category is `tactic` or `conv` (also `syntax:prec`, attributes,
  `scoped`/`local`), `declare_simp_like_tactic`, and core's `@[builtin_tactic_parser]` /
  `@[builtin_conv_parser]` `leading_parser` definitions; `macro_rules`/`elab_rules` alternatives
  over `` `(tactic| kw ...) `` / `` `(conv| kw ...) `` (kind `rules`: they give meaning to a keyword
  declared elsewhere);
- the keyword: the first string atom of the syntax (trimmed; `&"kw"` too); a declaration whose
  first atom is not a string (`t <;> t`) gets `-` as keyword unless one is given later;
- the node name from `(name := X)` or the `def` name, `-` if none;
- flags (comma-separated, `-` for none), from the declaration's text and, for a node name, the
  bodies of `@[tactic X]`/`@[builtin_tactic X]`/`@[conv X]` elaborators in the same file:
  `run_tac` (expands to `run_tac`), `doSeq` (takes a do-block), `evalTerm`/`evalExpr`/`evalConst`
  (its elaborator evaluates a term), `config` (takes a `(config := ...)`/optConfig that an
  elaborator evaluates), `expands:kw` (a macro whose expansion starts with a code-running keyword,
  transitively; `runs_code` says which flags mean running code); and, for the
  shape of the arguments, `tacticArg`/`convArg` (the syntax takes a tactic or tactic block / a conv
  block: the allow-list must walk it, tests/lean/test_tactic_catalogue.py).
Not extracted: parsers built in ways other than those above (a `syntax_cat` of a package's own,
`Parser.Category` extensions in Lean code), tactics registered at run time, and what an elaborator
does beyond the names above (a term passed to `elabTerm` is elaborated, not evaluated; that is fine).

Usage:
  python tests/lean/data/gen_tactic_catalogue.py --mirror /work/.mirror [--tree mathlib=DIR ...] \\
      [--out tests/lean/data/tactic_catalogue.tsv]
Mirrors are `<MIRROR>/<owner>+<name>/repo` (bare git directories, as `git clone --mirror` makes);
`--git LABEL=GITDIR` reads a source from another git directory that holds the pinned commit (a fork).
A source with neither a mirror nor a tree is left out and named in the header as not read.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

# label, repository, revision, path prefixes
SOURCES: list[tuple[str, str, str, tuple[str, ...]]] = [
    ("lean4", "leanprover/lean4", "v4.15.0", ("src/Init", "src/Lean/Parser", "src/Lean/Elab", "src/Std")),
    ("mathlib", "leanprover-community/mathlib4", "v4.15.0", ("Mathlib",)),
    ("batteries", "leanprover-community/batteries", "v4.15.0", ("Batteries",)),
    ("aesop", "leanprover-community/aesop", "v4.15.0", ("Aesop",)),
    ("plausible", "leanprover-community/plausible", "v4.15.0", ("Plausible",)),
]

MODES = {"tactic": "tactic", "conv": "conv"}
_DECL = re.compile(
    r"^(?:@\[[^\]]*\]\s*)*(?:(?:scoped|local|private|protected|noncomputable)\s+)*"
    r"(syntax|macro|elab|macro_rules|elab_rules|declare_simp_like_tactic)\b", re.M)
_PARSER_DEF = re.compile(r"^@\[(builtin_tactic_parser|builtin_conv_parser|tactic_parser)\b[^\]]*\]\s*"
                         r"(?:(?:private|protected)\s+)?def\s+([^\s:]+)", re.M)
_ELAB_ATTR = re.compile(r"@\[[^\]]*\b(?:builtin_tactic|tactic|builtin_conv|conv)\s+([\w.«»']+)[^\]]*\]")
_STRING = re.compile(r'&?"((?:[^"\\]|\\.)*)"')
_NAME = re.compile(r"\(name\s*:=\s*([\w.«»'!?]+)\)")
_ARROW_CATEGORY = re.compile(r"\s:\s*(tactic|conv)\s*=>")  # macro/elab: `... : tactic =>`
_END_CATEGORY = re.compile(r"\s:\s*(tactic|conv)\s*$")  # syntax: `... : tactic` at its end
_QUOTE = re.compile(r"\|\s*`\((tactic|conv)\|\s*(&?\"?)([^\s\")$]+)")  # a rules alternative's head


@dataclass(frozen=True)
class Row:
    mode: str
    keyword: str
    node: str
    repo: str
    path: str
    line: int
    kind: str
    flags: tuple[str, ...]

    def tsv(self) -> str:
        return "\t".join((self.mode, self.keyword, self.node, self.repo, self.path, str(self.line), self.kind,
                          ",".join(self.flags) or "-"))


def blank_comments(text: str) -> str:
    """The text with `--` and (nested) `/- -/` comments replaced by spaces, newlines and strings kept."""
    out, i, n, depth, in_str = list(text), 0, len(text), 0, False
    while i < n:
        c, two = text[i], text[i:i + 2]
        if depth:
            if two == "/-":
                depth, out[i], out[i + 1], i = depth + 1, " ", " ", i + 2
                continue
            if two == "-/":
                depth, out[i], out[i + 1], i = depth - 1, " ", " ", i + 2
                continue
            if c != "\n":
                out[i] = " "
            i += 1
        elif in_str:
            if c == "\\":
                i += 2
                continue
            in_str = c != '"'
            i += 1
        elif two == "/-":
            depth, out[i], out[i + 1], i = 1, " ", " ", i + 2
        elif two == "--":
            while i < n and text[i] != "\n":
                out[i], i = " ", i + 1
        else:
            in_str = c == '"' and text[i - 1:i] != "'"
            i += 1
    return "".join(out)


def _extent(text: str, start: int) -> str:
    """From `start` to the next line that starts a new command (a non-blank first column)."""
    m = re.compile(r"\n(?=[^\s|])").search(text, start + 1)  # `| alt` lines at column 0 continue
    return text[start:m.start() if m else len(text)]


def _flags(decl: str) -> set[str]:
    flags = {f for f in ("run_tac", "doSeq") if re.search(rf"\b{f}\b", decl)}
    flags |= {f for f in ("evalTerm", "evalExpr", "evalConst") if re.search(rf"\b{f}\b", decl)}
    if re.search(r"\b(optConfig|Parser\.Tactic\.config|config)\b|\(config\s*:=", decl):
        flags.add("config")
    return flags


def _arg_flags(pattern: str) -> set[str]:
    """`tacticArg`/`convArg`: the syntax takes a tactic (block) / conv block as an argument."""
    bare = _STRING.sub(" ", pattern)
    return ({"tacticArg"} if re.search(r"\btactic(?:Seq\w*)?\b", bare) else set()) | (
        {"convArg"} if re.search(r"\bconv(?:Seq\w*)?\b", bare) else set())


def _keyword(pattern: str) -> str:
    m = _STRING.search(pattern)
    return m.group(1).strip() if m and m.group(1).strip() else "-"


_MAYBE = re.compile(r"\s:\s*(?:tactic|conv)\b|`\((?:tactic|conv)\||declare_simp_like_tactic|_parser\b")


def scan(repo: str, path: str, raw: str) -> list[Row]:
    """The tactic and conv declarations of one file."""
    if not _MAYBE.search(raw):  # a quick filter: most files declare no syntax
        return []
    text = blank_comments(raw)
    line_of = lambda pos: text.count("\n", 0, pos) + 1  # noqa: E731
    elab_bodies: dict[str, set[str]] = {}
    for m in _ELAB_ATTR.finditer(text):
        key = m.group(1).split(".")[-1].strip("«»")
        elab_bodies.setdefault(key, set()).update(_flags(_extent(text, m.start())))
    rows: list[Row] = []
    for m in _DECL.finditer(text):
        kind, decl = m.group(1), _extent(text, m.start(1))
        if kind in ("macro_rules", "elab_rules"):
            flags = _flags(decl)
            for q in _QUOTE.finditer(decl):
                if q.group(2):  # the first atom of the quotation is a string: not a keyword head
                    continue
                rows.append(Row(q.group(1), q.group(3), "-", repo, path, line_of(m.start() + q.start()),
                                "rules", tuple(sorted(flags))))
            continue
        cat = (_ARROW_CATEGORY.search(decl) if kind in ("macro", "elab") else
               _END_CATEGORY.search(decl.rstrip()) if kind == "syntax" else None)
        mode = cat.group(1) if cat else ("tactic" if kind == "declare_simp_like_tactic" else None)
        if mode is None:
            continue
        head = decl[:cat.end()] if cat else decl
        pattern = head[:cat.start()] if cat else head
        pattern = _NAME.sub(" ", pattern[m.end(1) - m.start(1):])
        pattern = re.sub(r"\(priority\s*:=[^)]*\)|^:\S+", " ", pattern.lstrip())
        name = _NAME.search(decl)
        node = name.group(1) if name else "-"
        flags = _flags(decl if kind != "syntax" else head)
        if node != "-":
            flags |= elab_bodies.get(node.split(".")[-1].strip("«»"), set())
        flags |= _arg_flags(pattern)
        rows.append(Row(mode, _keyword(pattern), node, repo, path, line_of(m.start(1)), kind, tuple(sorted(flags))))
    for m in _PARSER_DEF.finditer(text):
        mode = "conv" if "conv" in m.group(1) else "tactic"
        decl = _extent(text, m.start())
        body = decl.split("leading_parser", 1)[-1] if "leading_parser" in decl else ""
        if not body:
            continue
        node = m.group(2).strip("«»")
        flags = _flags(body) | elab_bodies.get(node, set()) | _arg_flags(body)
        rows.append(Row(mode, _keyword(body), node, repo, path, line_of(m.start()), "parser", tuple(sorted(flags))))
    return rows


def runs_code(flags: tuple[str, ...] | set[str]) -> bool:
    """A declaration that runs a proof's code: `run_tac`, a do-block, `evalConst`, a macro over such a
    keyword, or `evalTerm`/`evalExpr` in one without a configuration (with one, it is the configuration
    that is evaluated: the allow-list requires it literal)."""
    f = set(flags)
    return bool(f & {"run_tac", "doSeq", "evalConst"} or any(x.startswith("expands:") for x in f)
                or (f & {"evalTerm", "evalExpr"} and "config" not in f))


def propagate(rows: list[Row], texts: dict[tuple[str, str], str]) -> list[Row]:
    """Flag macros whose expansion names a code-running keyword (`expands:kw`), to a fixed point."""
    code = {r.keyword for r in rows if runs_code(r.flags)}
    changed = True
    while changed:
        changed, out = False, []
        for r in rows:
            if r.kind in ("macro", "rules") and not runs_code(r.flags):
                body = _extent(texts[(r.repo, r.path)], _line_start(texts[(r.repo, r.path)], r.line))
                hits = sorted(k for k in code if k != r.keyword and re.search(  # a quotation that starts with k
                    rf"`\((?:tactic|conv)\|\s*{re.escape(k)}(?![\w!?'])", body))
                if hits:
                    r = Row(r.mode, r.keyword, r.node, r.repo, r.path, r.line, r.kind,
                            tuple(sorted(set(r.flags) | {f"expands:{hits[0]}"})))
                    code.add(r.keyword)
                    changed = True
            out.append(r)
        rows = out
    return rows


def _line_start(text: str, line: int) -> int:
    pos = 0
    for _ in range(line - 1):
        pos = text.index("\n", pos) + 1
    return pos


def _git(gitdir: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(gitdir), *args], check=True, capture_output=True, text=True).stdout


def read_git(gitdir: Path, rev: str, prefixes: tuple[str, ...]) -> tuple[str, dict[str, str]]:
    commit = _git(gitdir, "rev-parse", f"{rev}^{{commit}}").strip()
    names = [p for p in _git(gitdir, "ls-tree", "-r", "--name-only", commit, "--", *prefixes).splitlines()
             if p.endswith(".lean")]
    batch = subprocess.run(["git", "-C", str(gitdir), "cat-file", "--batch"], check=True, capture_output=True,
                           input="".join(f"{commit}:{p}\n" for p in names).encode())
    files, data, pos = {}, batch.stdout, 0
    for p in names:
        header_end = data.index(b"\n", pos)
        size = int(data[pos:header_end].split()[2])
        files[p] = data[header_end + 1:header_end + 1 + size].decode("utf-8", "replace")
        pos = header_end + 1 + size + 1
    return commit, files


def read_tree(root: Path, prefixes: tuple[str, ...]) -> dict[str, str]:
    return {str(f.relative_to(root)): f.read_text(encoding="utf-8", errors="replace")
            for prefix in prefixes for f in sorted((root / prefix).rglob("*.lean"))}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mirror", type=Path, default=Path("/work/.mirror"))
    ap.add_argument("--tree", action="append", default=[], help="LABEL=DIR: an installed source tree")
    ap.add_argument("--git", action="append", default=[],
                    help="LABEL=GITDIR: another git directory holding the pinned revision (a fork: commits are "
                         "content-addressed, so the same commit is the same tree)")
    ap.add_argument("--out", type=Path, default=Path(__file__).with_name("tactic_catalogue.tsv"))
    args = ap.parse_args(argv)
    trees = dict(t.split("=", 1) for t in args.tree)
    gits = dict(t.split("=", 1) for t in args.git)
    rows: list[Row] = []
    texts: dict[tuple[str, str], str] = {}
    header = ["# tactic_catalogue.tsv: tactic and conv syntax declared at the pinned versions (issue 38).",
              "# Generated by: python tests/lean/data/gen_tactic_catalogue.py " + " ".join(argv or sys.argv[1:]),
              "# Do not edit; regenerate. Facts only (keyword, node, file, line, flags), no source text."]
    for label, repo, rev, prefixes in SOURCES:
        gitdir = Path(gits[label]) if label in gits else args.mirror / repo.replace("/", "+") / "repo"
        if label in trees:
            files, where = read_tree(Path(trees[label]), prefixes), f"tree {trees[label]} (commit not known)"
        elif gitdir.is_dir():
            commit, files = read_git(gitdir, rev, prefixes)
            where = f"{rev} = {commit}" + (f" (git dir {gitdir.parent.name})" if label in gits else "")
        else:
            header.append(f"# source {label} {repo}: NOT READ (no mirror {gitdir.parent.name}/repo under --mirror, no --tree)")
            continue
        found = [r for path, text in sorted(files.items()) for r in scan(repo, path, text)]
        texts.update({(repo, p): blank_comments(files[p]) for p in {r.path for r in found}})
        header.append(f"# source {label} {repo} @ {where}: {len(files)} files, {len(found)} declarations")
        rows += found
    rows = sorted(set(propagate(rows, texts)), key=lambda r: (r.mode, r.keyword, r.repo, r.path, r.line, r.node))
    header.append("# columns: mode keyword node repo path line kind flags")
    args.out.write_text("\n".join(header + [r.tsv() for r in rows]) + "\n", encoding="utf-8")
    print(f"{args.out}: {len(rows)} rows", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

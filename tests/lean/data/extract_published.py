"""Build published_proofs.jsonl from provers' published Lean 4 proofs (see README.md in this folder).

Reads git snapshots of the source repositories (one bare git directory per repository, as
`<MIRROR>/<owner>+<name>/repo`, e.g. made by `git clone --mirror`), at the commits pinned in
`SOURCES`; zip archives inside them are read in memory. Writes one JSON object per proof:
source, repo, path (`archive.zip!/member` for a file inside a zip), commit, name, header, theorem
(up to and including its `:= by`), proof (the text after `:= by`, as published).

Splitting uses the project's lexer (comments and strings cannot fool it): the statement starts
at `theorem`/`lemma` (with a doc comment and `set_option ... in`/`open ... in` prefixes right
before it) and ends at the first `:=` outside brackets, which must be followed by `by`
(term-mode proofs are skipped). Sampling is deterministic (every k-th by name, see `SAMPLE`).

Usage: PYTHONPATH=. python tests/lean/data/extract_published.py [--mirror /work/.mirror] [--out FILE]
"""

from __future__ import annotations

import argparse
import io
import json
import re
import subprocess
import zipfile
from collections import Counter
from pathlib import Path

from sgsbatch.verification.lexer import Token, lex

OPEN, CLOSE = "([{⟨⦃", ")]}⟩⦄"
COMMANDS = frozenset({"theorem", "lemma", "def", "abbrev", "instance", "example", "noncomputable", "private",
                      "protected", "structure", "inductive", "class", "namespace", "section", "end", "open",
                      "set_option", "variable", "attribute", "macro", "elab", "syntax", "notation", "axiom"})

# (source, repo, commit, kind, location, how many to keep at most). Kinds: "zip-lean" (every .lean
# member of a zip under a prefix), "zip-jsonl" (the `correct_proof` field of a jsonl member of a zip),
# "dir" (every .lean file under a folder), "goedel-sft" (see _goedel_sft).
SOURCES = [
    ("DeepSeek-Prover-V2", "deepseek-ai/DeepSeek-Prover-V2", "e598a57ea3284997d4a2a168a069fdd5064afbc8",
     "zip-lean", ("minif2f-solutions.zip", ""), 110),
    ("Kimina-Prover-Preview", "MoonshotAI/Kimina-Prover-Preview", "7abd61a5d9861bf5c15b195c216c1bb233ac32e4",
     "zip-jsonl", ("minif2f_test_solved.zip", "minif2f_test_solved/minif2f-test-solved.jsonl"), 110),
    ("Kimina-Prover-72B", "MoonshotAI/Kimina-Prover-Preview", "7abd61a5d9861bf5c15b195c216c1bb233ac32e4",
     "zip-lean", ("minif2f_test_solved_filtered_0710.zip", "minif2f_test_solved_filtered/src/"), 36),
    ("BFS-Prover-V2", "nyc030325/BFS-Prover-V2", "4ef51ead9124f32ad141e8bc1ff025143ab781ed",
     "dir", ("MiniF2F/prover/",), 209),
    ("Seed-Prover", "ByteDance-Seed/Seed-Prover", "7d3875a2bd68538d1f98ea62f5c9a56035d33b5f",
     "zip-lean", ("SeedProver/MiniF2F.zip", "MiniF2F/"), 36),
    ("Goedel-Prover-SFT", "script-jpg/non-overlapping-failures", "b163c44cc7502d906343b9db2abde8935c2864d9",
     "goedel-sft", (), 87),
    ("InternLM2-Math-Plus-7B", "InternLM/InternLM-Math", "eaead17b7b95670f0592f5b818080fb6762f3fdf",
     "internlm", ("minif2f/output.zip", "output/internLM2-plus-7b_minif2f_test/"), 36),
]
# The header of the file InternLM's miniF2F statements come from (lean-dojo-mew, MiniF2F/Test.lean).
INTERNLM_HEADER = ("rah4927/lean-dojo-mew", "d00c776260c77de7e70125ef0cd119de6c0ff1de", "MiniF2F/Test.lean")
# The miniF2F statements (header, formal_statement) in the order of HaimingW/miniF2F-lean4's test split,
# which the Goedel-Prover-SFT samples are numbered by (that dataset copies DeepSeek's minif2f.jsonl).
STATEMENTS = ("Goedel-LM/Goedel-Prover", "d80349d93a80305765492014f0b395cec46e5023", "datasets/minif2f.jsonl")


def git_show(mirror: Path, repo: str, commit: str | None, path: str) -> bytes:
    git_dir = mirror / repo.replace("/", "+") / "repo"
    return subprocess.run(["git", "--git-dir", str(git_dir), "show", f"{commit or 'HEAD'}:{path}"],
                          check=True, capture_output=True).stdout


def git_ls(mirror: Path, repo: str, commit: str | None, folder: str) -> list[str]:
    git_dir = mirror / repo.replace("/", "+") / "repo"
    out = subprocess.run(["git", "--git-dir", str(git_dir), "ls-tree", "-r", "--name-only", commit or "HEAD",
                          folder], check=True, capture_output=True, text=True).stdout
    return sorted(p for p in out.splitlines() if p.endswith((".lean", ".txt")))


def head_commit(mirror: Path, repo: str) -> str:
    git_dir = mirror / repo.replace("/", "+") / "repo"
    return subprocess.run(["git", "--git-dir", str(git_dir), "rev-parse", "HEAD"], check=True,
                          capture_output=True, text=True).stdout.strip()


def _decl_start(toks: list[Token], k: int) -> int:
    """Index of the first token of the declaration whose `theorem`/`lemma` is toks[k]: a doc comment
    and `set_option N V in` / `open ... in` prefixes (starting a line) right before it belong to it."""
    j = k
    while j > 0:
        prev = toks[j - 1]
        if prev.kind == "doc" and prev.text.startswith("/--"):
            j -= 1
            continue
        if prev.text == "in":
            i = next((i for i in range(j - 2, max(-1, j - 30), -1)
                      if toks[i].text in ("set_option", "open") and toks[i].col == 0), None)
            if i is not None:
                j = i
                continue
        break
    return j


def declarations(text: str) -> list[dict[str, str]]:
    """Every top-level `theorem`/`lemma` (column 0) with a `:= by` proof: name, header (the text before
    the file's first declaration), theorem, proof (to the next command at column 0: a declaration, a doc
    comment, `#print ...`, an attribute), uses (its identifiers)."""
    toks = lex(text)
    starts = [k for k, t in enumerate(toks)
              if t.col == 0 and (t.kind == "ident" and t.text in COMMANDS or t.kind == "doc" or t.text in ("#", "@["))]
    decls = [k for k in starts if toks[k].text in ("theorem", "lemma")]
    if not decls:
        return []
    header = text[: _line_start(text, toks[_decl_start(toks, decls[0])].start)]
    out = []
    for k in decls:
        begin = _line_start(text, toks[_decl_start(toks, k)].start)
        stop = next((_line_start(text, toks[s].start) for s in starts if s > k), len(text))
        depth, i = 0, k + 2
        while i < len(toks) and toks[i].start < stop:
            t = toks[i]
            if t.kind == "sym" and t.text in OPEN:
                depth += 1
            elif t.kind == "sym" and t.text in CLOSE:
                depth -= 1
            elif t.text == ":=" and depth == 0:
                break
            i += 1
        if i + 1 >= len(toks) or toks[i + 1].text != "by" or toks[i + 1].start >= stop:
            continue  # term-mode proof (or none): not this corpus
        by = toks[i + 1]
        uses = " ".join(t.text for t in toks if t.kind == "ident" and toks[k].start <= t.start < stop)
        out.append({"name": toks[k + 1].text, "header": header, "theorem": text[begin : by.end],
                    "proof": text[by.end : stop], "uses": uses})
    return out


def _line_start(text: str, offset: int) -> int:
    return text.rfind("\n", 0, offset) + 1


def _from_file(text: str, single: bool) -> list[dict[str, str]]:
    """The file's declarations. `single`: only a file with one declaration counts; otherwise the
    declarations that use no other declaration of the file (they stand alone with the header)."""
    decls = declarations(text)
    lex_names = {t.text for t in lex(text) if t.kind == "ident" and t.col == 0 and t.text in COMMANDS}
    other_commands = lex_names - {"theorem", "lemma", "open", "set_option"}
    if len(decls) == 1 and not other_commands:
        return decls
    if single or other_commands - {"noncomputable"}:
        return []
    names = {d["name"] for d in decls}
    alone = []
    for d in decls:
        used = set(d["uses"].split()) - {d["name"]}
        if not any(u == n or u.endswith("." + n) for u in used for n in names):
            alone.append(d)
    return alone


def _goedel_sft(mirror: Path, repo: str, commit: str) -> list[dict[str, str]]:
    """Goedel-Prover-SFT samples (24 a problem, miniF2F-test) that the repository's authors verified:
    a file under data/corrected_proofs/ marks a verified sample (scripts/make_proof_outcomes.py); the
    proof is the raw sample under data/proofs_miniF2F-test/ (what the model wrote after the prompt's
    `:= by`, stripped of outer whitespace by the notebook) less its closing ``` fence, indented back by
    the two spaces the strip took from its first line. The first verified sample of each problem is used."""
    stmts = [json.loads(line) for line in git_show(mirror, *STATEMENTS).decode().splitlines() if line.strip()]
    test = [r for r in stmts if r["split"] == "test"]
    model = "Goedel-LM_Goedel-Prover-SFT"
    verified = [p for p in git_ls(mirror, repo, commit, "data/corrected_proofs/") if f"/{model}/" in p]
    first: dict[int, str] = {}
    for p in verified:
        m = re.fullmatch(rf"data/corrected_proofs/(\d+)/{model}/(\d+)\.txt", p)
        if m and (int(m[1]) not in first or int(m[2]) < int(first[int(m[1])].rsplit("/", 1)[1][:-4])):
            first[int(m[1])] = p
    out = []
    for k, p in sorted(first.items()):
        raw_path = p.replace("data/corrected_proofs/", "data/proofs_miniF2F-test/")
        raw = git_show(mirror, repo, commit, raw_path).decode()
        lines = raw.rstrip().splitlines()
        if lines and lines[-1].strip().startswith("```"):
            lines = lines[:-1]
        row = test[k]
        out.append({"name": row["name"], "header": row["header"], "path": raw_path,
                    "theorem": row["formal_statement"].rstrip("\n"), "proof": "\n  " + "\n".join(lines).rstrip()})
    return out


def _internlm(mirror: Path, repo: str, commit: str, where: tuple[str, ...]) -> list[dict[str, str]]:
    """InternLM2-Math-Plus-7B's successful best-first searches on miniF2F-test (LeanDojo, tactic by tactic).
    A search's `proof` field is its tactics, one a line; the whole proof is the statement (from the
    `example` record) with ` := by` added and the tactics indented by two spaces under it. The header is
    the text before the first theorem of the statements' file (lean-dojo-mew MiniF2F/Test.lean)."""
    test_lean = git_show(mirror, *INTERNLM_HEADER).decode()
    header = test_lean[: _line_start(test_lean, test_lean.index("\ntheorem ") + 1)]
    archive = zipfile.ZipFile(io.BytesIO(git_show(mirror, repo, commit, where[0])))
    out = []
    for member in sorted(n for n in archive.namelist() if n.startswith(where[1]) and n.endswith(".json")):
        for r in json.loads(archive.read(member))["results"]:
            if r.get("success") not in (True, "True"):
                continue
            ok = [a for a in r["attempt_results"] if a.get("success") is True]
            if not ok:
                continue
            ex = r["example"]
            proof = ok[0]["proof"]
            out.append({"name": ex["full_name"], "header": header, "path": f"{where[0]}!/{member}",
                        "theorem": ex["statement"] + " := by",
                        "proof": "\n" + "\n".join("  " + line if line else line for line in proof.split("\n"))})
    return out


def collect(mirror: Path) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for source, repo, commit, kind, where, keep in SOURCES:
        commit = commit or head_commit(mirror, repo)
        found: list[dict[str, str]] = []
        if kind in ("zip-lean", "zip-jsonl"):
            archive = zipfile.ZipFile(io.BytesIO(git_show(mirror, repo, commit, where[0])))
            members = sorted(n for n in archive.namelist() if n.startswith(where[1]) and "__MACOSX" not in n)
            for member in members:
                data = archive.read(member).decode()
                if kind == "zip-jsonl":
                    for line in data.splitlines():
                        rec = json.loads(line)
                        for d in _from_file(rec["correct_proof"], single=False):
                            found.append({**d, "path": f"{where[0]}!/{member}"})
                elif member.endswith(".lean"):
                    for d in _from_file(data, single=False):
                        found.append({**d, "path": f"{where[0]}!/{member}"})
        elif kind == "dir":
            for path in git_ls(mirror, repo, commit, where[0]):
                for d in _from_file(git_show(mirror, repo, commit, path).decode(), single=False):
                    found.append({**d, "path": path})
        elif kind == "internlm":
            found = _internlm(mirror, repo, commit, where)
        else:
            found = _goedel_sft(mirror, repo, commit)
        found.sort(key=lambda d: (d["name"], d["path"]))
        step = max(1, -(-len(found) // keep))  # every k-th, k = ceil(n / keep)
        chosen = found[::step]
        print(f"{source}: {len(found)} found, every {step}-th kept: {len(chosen)}")
        for d in chosen:
            rows.append({"source": source, "repo": repo, "path": d["path"], "commit": commit, "name": d["name"],
                         "header": d["header"], "theorem": d["theorem"], "proof": d["proof"]})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mirror", type=Path, default=Path("/work/.mirror"))
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "published_proofs.jsonl")
    args = ap.parse_args()
    rows = collect(args.mirror)
    with args.out.open("w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    print(f"{len(rows)} proofs, {args.out.stat().st_size} bytes:", dict(Counter(str(r["source"]) for r in rows)))


if __name__ == "__main__":
    main()

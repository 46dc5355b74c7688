"""The README and docs/: every repository path and link they name exists, no table row is a wall of
text, no file outside the repository is cited, the layout tree in docs/design.md is the package's,
the README opens with its "On your cluster" sequence (run for real by
tests/slurm/test_readme_sequence.py), and CI (.ci/run) runs the README's set-up commands in their order."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from docslib import (
    DOCS,
    INSTALL,
    README,
    REPO,
    SEQUENCE_BEGIN,
    SERVER,
    anchors,
    cluster_sequence,
    doc_files,
    links,
    marked,
    named_paths,
    path_problem,
    without_code_blocks,
)

MAX_ROW = 300  # characters in one table row
MAX_README_LINES = 300
FIRST_SCREEN = 50  # the cluster sequence starts within the README's first lines


def rel(p: Path) -> str:
    return str(p.relative_to(REPO))


def test_every_repository_path_named_in_the_readme_and_docs_exists() -> None:
    missing = [f"{rel(doc)}: {token}: {why}" for doc in doc_files()
               for token in sorted(named_paths(doc.read_text(encoding="utf-8")))
               if (why := path_problem(token))]
    assert not missing, "\n".join(missing)


def test_the_path_finder_sees_paths_and_skips_placeholders() -> None:
    text = ("`jobs/sgs.toml`, tests/unit/test_docs.py, `round/compaction.py`, `run/amendments.config_at`, "
            "`<run>/slurm/watcher/<job>/x.out`, `rounds/rNNNN/jobs.jsonl`, `sgsbatch/prompt_templates/<name>.json`, "
            "`run/labels`, `../shared/x`")
    assert named_paths(text) == {"jobs/sgs.toml", "tests/unit/test_docs.py", "round/compaction.py",
                                 "run/amendments.config_at"}
    assert [path_problem(t) for t in sorted(named_paths(text))] == [None] * 4
    assert path_problem("jobs/nope.toml") == "no such file or directory"
    assert path_problem("run/amendments.no_such_name") == "sgsbatch/run/amendments.py defines no no_such_name"


def test_every_link_resolves_to_a_file_and_heading() -> None:
    broken = []
    for doc in doc_files():
        for target in links(doc):
            if re.match(r"[a-z]+:", target):  # https:, mailto:
                continue
            file, _, anchor = target.partition("#")
            path = (doc.parent / file).resolve() if file else doc
            if not path.exists():
                broken.append(f"{rel(doc)}: {target}: no such file")
            elif anchor and path.suffix == ".md" and anchor not in anchors(path):
                broken.append(f"{rel(doc)}: {target}: no heading #{anchor} in {rel(path)}")
    assert not broken, "\n".join(broken)


def test_every_docs_file_is_linked_from_the_readme() -> None:
    linked = {(README.parent / t.partition("#")[0]).resolve() for t in links(README)}
    assert not [rel(p) for p in DOCS.glob("*.md") if p.resolve() not in linked]


def test_no_table_row_is_a_wall_of_text() -> None:
    long = [f"{rel(doc)}:{i}: {len(line)} characters" for doc in doc_files()
            for i, line in enumerate(without_code_blocks(doc.read_text(encoding="utf-8")).splitlines(), 1)
            if line.startswith("|") and len(line) > MAX_ROW]
    assert not long, "\n".join(long)


def test_no_file_outside_the_repository_is_cited() -> None:
    for doc in doc_files():
        text = doc.read_text(encoding="utf-8")
        for outside in ("SGS-SPEC.md", "DESIGN.md", "../shared"):
            assert outside not in text, f"{rel(doc)} cites {outside}, which is not in the repository"


def test_the_readme_is_a_front_page_with_the_cluster_sequence_on_its_first_screen() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_README_LINES
    assert lines.index(SEQUENCE_BEGIN) < FIRST_SCREEN
    headings = [line for line in lines if line.startswith("## ")]
    for want in ("## Set-up (fresh Debian 12 machine, as root)", "## On your cluster", "## Commands",
                 "## Documentation", "## Differences from the reference implementation"):
        assert want in headings


def setup_commands(readme: Path = README) -> list[list[str]]:
    """The README's set-up block: each numbered command as its `&&`-joined parts, comments left out."""
    text = readme.read_text(encoding="utf-8").split("## Set-up", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    return [[part.strip() for part in line.split("&&")] for line in text.splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


def test_ci_runs_the_readme_set_up_in_its_order() -> None:
    """.ci/run runs every part of the README's command 1 (the tiny run, leaving runs/tiny) and then every
    part of command 2 (the tests), in that order, so a test that trips over the first run's runs/ fails CI."""
    commands = setup_commands()
    assert len(commands) == 2 and commands[0][-1].endswith("sgsbatch launch jobs/tiny.toml --wait")
    assert commands[1][-1] == "tests/run.sh"
    lines = [line.strip() for line in (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()]
    lines = [line for line in lines if line and not line.startswith(("#", "stage "))]
    at = -1
    for part in (p for command in commands for p in command):
        found = [i for i, line in enumerate(lines) if i > at and re.search(rf"(^|\s){re.escape(part)}(\s|$)", line)]
        assert found, f".ci/run does not run {part!r} after {lines[at] if at >= 0 else 'its start'!r}"
        at = found[0]


def test_the_cluster_sequence_names_its_variables_and_marks_what_a_test_cannot_run() -> None:
    seq = cluster_sequence()
    assert {"CONFIG", "SITE", "RUN", "EXTRA", "SGSBATCH_RUNS_DIR", "HF_HOME"} <= set(seq.variables)
    assert seq.variables["CONFIG"] == "jobs/sgs.toml" and seq.variables["EXTRA"] == ""
    commands = seq.commands()
    installs = [c.split("#")[0].split() for c in commands if marked(c, INSTALL)]
    assert [words[:2] for words in installs] == [["./setup.sh", "--gpu"], ["hf", "download"], ["hf", "download"]]
    assert installs[0] == ["./setup.sh", "--gpu", "--lean"]  # one call: a later --lean alone would apply the CPU lock
    assert [c.split()[0] for c in commands if marked(c, SERVER)] == ["tensorboard"]
    text = "\n".join(commands)
    for want in ('sgsbatch canary "$CONFIG"', "--smoke --wait", "--rehearse --wait", 'sgsbatch launch "$CONFIG"',
                 'sgsbatch watch "$RUN" --submit', 'sgsbatch status "$RUN"', 'export SGSBATCH_SITE="$SITE"'):
        assert want in text
    # the models downloaded are the ones jobs/sgs.toml names
    models = {v for v in tomllib.loads((REPO / "jobs" / "sgs.toml").read_text(encoding="utf-8"))["models"].values()
              if isinstance(v, str)}
    assert {c.split()[2] for c in commands if c.startswith("hf download")} == models


def test_the_layout_tree_in_docs_design_is_the_package() -> None:
    """Every module, subpackage and data directory of sgsbatch/ is in the tree, under its own
    directory, and every file the tree names exists where it says."""
    text = (DOCS / "design.md").read_text(encoding="utf-8")
    tree = text.split("## Layout", 1)[1].split("```", 2)[1]
    pkg = REPO / "sgsbatch"
    entries: dict[str, list[str]] = {}  # head of an entry -> its lines
    top: dict[str, list[str]] = {}
    current: list[str] = []
    for line in tree.splitlines()[1:]:
        if re.match(r"  \S", line) and not line.startswith("  #"):
            head = re.split(r"\s{2,}", line.strip(), maxsplit=1)[0]
            current = entries.setdefault(head, [])
        elif re.match(r"\S", line):
            head = re.split(r"\s{2,}", line.strip(), maxsplit=1)[0]
            current = top.setdefault(head, [])
        current.append(line)
    heads = {name for head in entries for name in head.split()}
    want = {p.name + ("/" if p.is_dir() else "") for p in pkg.iterdir()
            if p.name != "__init__.py" and not p.name.startswith((".", "__pycache__"))}
    assert heads == want, f"tree only: {sorted(heads - want)}; package only: {sorted(want - heads)}"
    problems = []
    for head, lines in entries.items():
        if not head.endswith("/"):
            continue
        d, chunk = pkg / head, " ".join(lines)
        named = set(re.findall(r"\b(\w+\.(?:py|json|jsonl))\b", chunk))
        problems += [f"{head}{n}: no such file" for n in sorted(named) if not (d / n).exists()]
        for f in sorted(d.glob("*.py")):
            if f.name != "__init__.py" and f.name not in named and not re.search(rf"\b{f.stem}\b", chunk):
                problems.append(f"{head}{f.name}: not in the tree")
    for head, lines in top.items():
        if head == "sgsbatch/":
            continue
        path = REPO / head.rstrip("/")
        problems += [] if path.exists() else [f"{head}: no such file or directory"]
        for n in sorted(set(re.findall(r"\b([\w.-]+\.(?:py|toml|sh|md|lean|txt))\b", " ".join(lines)))):
            if path.is_dir() and not (path / n).exists() and not (REPO / n).exists():
                problems.append(f"{head}{n}: no such file")
    assert not problems, "\n".join(problems)


def test_the_keys_page_is_the_schema() -> None:
    """docs/keys.md is `sgsbatch config keys --markdown`: a key added, renamed or re-documented in the
    schema without regenerating the page fails here."""
    from sgsbatch.config.keys import config_keys, keys_markdown

    page = (DOCS / "keys.md").read_text(encoding="utf-8")
    assert page == keys_markdown(), "docs/keys.md is stale: run `sgsbatch config keys --markdown > docs/keys.md`"
    assert all(f"- `{k.key}` = " in page for k in config_keys())

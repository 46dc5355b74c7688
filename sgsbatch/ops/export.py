"""`sgsbatch export`: a run's proofs as a Hugging Face dataset repository on disk, with its card.

Two configs, in the layout of a Hub dataset repository (what `Dataset.push_to_hub(repo,
config_name=...)` writes), so that `datasets.load_dataset(DIR, "proofs")` loads a local copy and
the Hub loads the pushed one; each config has one split, `train`, in one Parquet file:
- `proofs/train-00000-of-00001.parquet`: the solved store (views/proofs.py `found_proofs`: id,
  problem id, whether it is a conjecture, round, sample, slot, header, statement, proof, simulated).
  Its rows are `sgsbatch verify` input rows as they are (`statement` reads as `theorem`).
- `conjectures/train-00000-of-00001.parquet`: every unique conjecture with its lineage (target,
  round, statement, the Guide review: whether it was reviewed, whether the reply parsed and the
  parse failure's reason code, the sub-scores (NaN where not reviewed or not parsed: a failed
  review's are stand-ins) and the combined score the reward used (a failed review's is the round's
  stand-in, logic/review.py `fill_failed`; NaN where not reviewed), verified/attempts, first proof or "",
  training weight or NaN, simulated).
Both configs' `simulated` column names the run's SIMULATED parts ("generation, verifier, trainer";
"" for a run with none): a row taken out of the dataset still says so.
A config without rows is left out (`datasets` cannot load a split of none). README.md is the card:
YAML front matter declaring the configs, their data files (`proofs` the default) and their
`dataset_info` (columns, sizes), then the
run's frozen config, counts, the cumulative solve rate per round; a SIMULATED run says so at the
top. The card publishes no absolute path of the machine (`public_config`): a path in the config
under the run directory reads relative to it, any other absolute path (`run.runs_dir`, a
`data.source` file, a model or cache directory, one inside a string such as a setup command) by
its last component; hub ids and relative paths stay as they are.
`--push-to-hub` pushes each config with `push_to_hub(repo, config_name=...)`, then the card; the
export is on disk first, and a Hub that cannot be reached or refuses (`HubError`) is one line naming
the repo, the reason and the local copy.
Not covered: the failed attempts (they stay in the state database).
"""

from __future__ import annotations

import math
import os
import re
import shlex
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sgsbatch.errors import HubError, InputError, RunError, SgsError, is_disk_full
from sgsbatch.run.handle import RunHandle
from sgsbatch.views.proofs import conjecture_lineage, found_proofs
from sgsbatch.views.status import run_status

GUIDE_KEYS = ("relevance", "redundant", "complexity")
SPLIT = "train"
STRING, INT, FLOAT, BOOL = "string", "int64", "float64", "bool"
# the columns of each config, in order, with their Arrow types
FEATURES: dict[str, dict[str, str]] = {
    "proofs": {"id": STRING, "problem_id": STRING, "is_conjecture": BOOL, "round": INT, "sample": INT, "slot": INT,
               "header": STRING, "statement": STRING, "proof": STRING, "simulated": STRING},
    "conjectures": {"conjecture_id": STRING, "target_id": STRING, "round": INT, "statement": STRING,
                    "reviewed": BOOL, "guide_parsed": BOOL, "guide_failure": STRING,
                    **{f"guide_{k}": FLOAT for k in GUIDE_KEYS}, "guide_score": FLOAT,
                    "verified": INT, "attempts": INT, "proof": STRING, "training_weight": FLOAT, "simulated": STRING},
}
CONFIGS = tuple(FEATURES)
CARD_TITLE = "# sgsbatch run "  # the card's first heading: how --force knows an earlier export


def data_file(config: str) -> str:
    """The config's one data file, relative to the export (the name `push_to_hub` gives it on the Hub)."""
    return f"{config}/{SPLIT}-00000-of-00001.parquet"


def _float(x: float | None) -> float:
    return math.nan if x is None else float(x)


def export_rows(h: RunHandle) -> dict[str, list[dict[str, Any]]]:
    """The rows of both configs, flat and typed for Arrow (no None in number columns)."""
    conj = conjecture_lineage(h)
    conj_ids = {c["conjecture_id"] for c in conj}
    proofs = [{**p, "is_conjecture": p["problem_id"] in conj_ids, "header": p["header"] or "",
               "statement": p["statement"] or ""} for p in found_proofs(h)]
    return {"proofs": proofs, "conjectures": [conjecture_row(c) for c in conj]}


def conjecture_row(c: dict[str, Any]) -> dict[str, Any]:
    """A `conjecture_lineage` row as a row of the `conjectures` config (see the module docstring)."""
    g = c["guide"]
    parsed = g is not None and bool(g["parsed"])
    return {
        "conjecture_id": c["conjecture_id"], "target_id": c["target_id"], "round": c["round"],
        "statement": c["statement"] or "", "reviewed": g is not None, "guide_parsed": parsed,
        "guide_failure": "" if g is None or parsed else (g["reason"] or "unparsed"),
        **{f"guide_{k}": _float(g[k]) if parsed else math.nan for k in GUIDE_KEYS},
        "guide_score": math.nan if g is None else _float(g["score"]),
        "verified": c["verified"], "attempts": c["attempts"], "proof": c["proof"] or "",
        "training_weight": _float(c["training_weight"]), "simulated": c["simulated"],
    }


def front_matter(name: str, sizes: dict[str, tuple[int, int, int]]) -> str:
    """The card's YAML front matter: each config of `sizes` with its data files (the first the
    default) and its `dataset_info` (columns; rows, Arrow bytes and Parquet bytes per `sizes[config]`), as
    `push_to_hub` writes them. The sizes also key `datasets`' cache of a local copy: it hashes the
    card's metadata, not the data files, so a re-export to the same directory with the same card
    would load the earlier rows."""
    from huggingface_hub import DatasetCardData

    configs: list[dict[str, Any]] = []
    infos: list[dict[str, Any]] = []
    for config, (rows, nbytes, parquet) in sizes.items():
        configs.append({"config_name": config, "data_files": [{"split": SPLIT, "path": f"{config}/{SPLIT}-*"}],
                        **({"default": True} if not configs else {})})
        infos.append({"config_name": config, "features": [{"name": k, "dtype": t} for k, t in FEATURES[config].items()],
                      "splits": [{"name": SPLIT, "num_bytes": nbytes, "num_examples": rows}],
                      "download_size": parquet, "dataset_size": nbytes})
    extra: dict[str, Any] = {"configs": configs, "dataset_info": infos} if configs else {}
    data = DatasetCardData(pretty_name=f"sgsbatch run {name}: proofs and conjectures",
                           tags=["sgsbatch", "lean4", "theorem-proving"], **extra)
    return f"---\n{data.to_yaml()}\n---\n"


def dataset_card(h: RunHandle, rows: dict[str, list[dict[str, Any]]]) -> str:
    """The card's Markdown (after its front matter)."""
    st = run_status(h, live=False)
    curve = ", ".join(f"{100 * x:.1f}%" for x in st.solve_rate_curve) or "no completed round"
    verified_conj = sum(1 for c in rows["conjectures"] if c["verified"] > 0)
    failed = sum(1 for c in rows["conjectures"] if c["reviewed"] and not c["guide_parsed"])
    lines = [f"{CARD_TITLE}{h.cfg.run.name}: proofs and conjectures", ""]
    labels = sorted({str(x["simulated"]) for config in rows.values() for x in config if x["simulated"]})
    if h.cfg.simulated or labels:  # a fork's inherited rounds keep their parent's labels (proofs.round_labels)
        parts = "; ".join(sorted({h.cfg.simulated_label(), *labels} - {""}))
        lean = ("its proofs were not checked by Lean" if "verifier" in parts or "rehearsal" in parts else
                "its proofs were checked by the configured verifier")
        lines += [f"**SIMULATED**: this run used SIMULATED parts ({parts}; the `simulated` column of every row "
                  f"says so too); {lean}." if h.cfg.simulated else
                  f"**SIMULATED**: the rounds this run inherited from the run it was forked from used SIMULATED "
                  f"parts ({parts}); the `simulated` column of each row says which rows; {lean.replace('its', 'their')}.",
                  ""]
    lines += [
        "Self-Guided Self-Play (arXiv 2604.20209) run by sgsbatch. Configs (one `train` split each; "
        "`datasets.load_dataset(REPO, \"proofs\")`):", "",
        f"- `proofs`: {len(rows['proofs'])} stored proofs of "
        f"{len({p['problem_id'] for p in rows['proofs']})} problems (targets and conjectures); each row "
        "(`id`, `header`, `statement`, `proof`) is an input row of `sgsbatch verify`",
        f"- `conjectures`: {len(rows['conjectures'])} unique conjectures, {verified_conj} of them proved; "
        f"{failed} Guide reviews failed to parse (`guide_parsed` false, `guide_failure` the reason; their "
        "sub-scores are NaN and `guide_score` is the stand-in the reward used)", "",
        f"State: {st.state}, {st.rounds_completed} of {h.cfg.run.rounds} rounds completed, {st.targets} targets.", "",
        f"Cumulative solve rate by round: {curve}", "",
        "## Run config (frozen at launch)", "",
        "Paths under the run directory read relative to it; other absolute paths of the machine that ran it "
        "by their last component.", "",
        "```toml", public_config(h.paths.config.read_text(), h.paths.root).rstrip(), "```", "",
    ]
    return "\n".join(lines)


# an absolute path: `/` or `~` not inside a word, a URL (`https://`) or another path, up to a quote,
# a space or a TOML/shell separator
ABSOLUTE_PATH = re.compile(r"(?<![\w.:/~-])(?:~(?=/)|/)[^\s\"'=,;:()\[\]{}]*")


def public_config(text: str, run_dir: Path) -> str:
    """`text` (a run's config TOML) with every absolute path in it made public: one under `run_dir`
    relative to it (`.` for the run directory itself), any other by its last component (`/` alone stays).
    Text outside paths is kept as it is, comments too."""
    roots = {str(run_dir), str(run_dir.resolve())}

    def public(m: re.Match[str]) -> str:
        path = m.group(0)
        if path in ("/", "~"):
            return path
        full = os.path.expanduser(path).rstrip("/") or "/"
        for root in roots:
            if full == root or full.startswith(root + "/"):
                return os.path.relpath(full, root)
        return Path(full).name or path

    return ABSOLUTE_PATH.sub(public, text)


def is_export(out: Path) -> bool:
    """An earlier export: its card (or, from before the configs, `dataset_dict.json`)."""
    if (out / "dataset_dict.json").is_file():
        return True
    try:
        card = (out / "README.md").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    return card.startswith("---\n") and f"\n{CARD_TITLE}" in card


def write_export(out: Path, rows: dict[str, list[dict[str, Any]]], name: str, body: str) -> None:
    """Write each config's Parquet file into `out` (a new or empty directory), then the card:
    the front matter for run `name` and `body` (Markdown). A config without rows is left out
    (neither written nor declared): `datasets` cannot load a split of no rows."""
    from datasets import Dataset, Features, Value

    sizes: dict[str, tuple[int, int, int]] = {}
    for config, columns in FEATURES.items():
        if not rows[config]:
            continue
        features = Features({k: Value(t) for k, t in columns.items()})
        ds = Dataset.from_dict({k: [r[k] for r in rows[config]] for k in columns}, features=features)  # empty too
        path = out / data_file(config)
        path.parent.mkdir(parents=True, exist_ok=True)
        ds.to_parquet(str(path))
        sizes[config] = (ds.num_rows, ds.data.nbytes, path.stat().st_size)
    (out / "README.md").write_text(front_matter(name, sizes) + body, encoding="utf-8")


def export_run(h: RunHandle, out: Path, force: bool = False) -> dict[str, int]:
    """Write the dataset and its card to `out`; returns the row count per config."""
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        if not force:
            raise InputError(f"--out {out} exists and is not empty; choose another directory or pass --force")
        if not out.is_dir():
            raise InputError(f"--out {out} is a file; choose a directory")
        if not is_export(out):
            raise InputError(f"--out {out} is not an earlier export (no sgsbatch dataset card README.md); --force "
                             "replaces only an export, never another directory: choose an empty or new directory")
    rows = export_rows(h)
    _write_whole(out, lambda staging: write_export(staging, rows, h.cfg.run.name, dataset_card(h, rows)))
    return {name: len(r) for name, r in rows.items()}


def _write_whole(out: Path, write: Callable[[Path], None]) -> None:
    """`write` into a new sibling directory of `out`, then its files into `out` in place of what was there
    (renames): an export that fails (a full disk) leaves `out` as it was and nothing of its own behind."""
    final = out.absolute()
    final.parent.mkdir(parents=True, exist_ok=True)
    staging = final.parent / f".{final.name}.exporting-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    try:
        staging.mkdir()
        write(staging)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    if not final.exists():
        staging.rename(final)
        return
    old = final.parent / f".{final.name}.replaced-{os.getpid()}"  # the earlier export (--force), gone at the end
    old.mkdir()
    for entry in list(final.iterdir()):
        entry.rename(old / entry.name)
    for entry in list(staging.iterdir()):
        entry.rename(final / entry.name)
    staging.rmdir()
    shutil.rmtree(old)


def hub_token() -> str | None:
    if os.environ.get("HF_TOKEN"):
        return os.environ["HF_TOKEN"]
    try:
        from huggingface_hub import get_token
    except ImportError:
        return None
    return get_token()


def hub_failures() -> tuple[type[BaseException], ...]:
    """The exceptions a push that reaches no Hub, or one that refuses it, raises: OSError (requests'
    errors and `HfHubHTTPError` are OSErrors), the HTTP client's errors (the `HTTPError` base of
    `HfHubHTTPError`: httpx's, or httpx2's in huggingface_hub 2.x, whichever the Hub is built on) and the
    Hub's own errors."""
    found: list[type[BaseException]] = [OSError]
    try:
        from huggingface_hub import errors as hub_errors

        found += [c for c in vars(hub_errors).values()
                  if isinstance(c, type) and issubclass(c, Exception) and c.__module__ == hub_errors.__name__]
        found += [c for c in hub_errors.HfHubHTTPError.__mro__[1:] if c.__name__ == "HTTPError"]
    except ImportError:
        pass
    return tuple(found)


def hub_failure_message(repo: str, out: Path, e: BaseException) -> str:
    """One line: the repo, the reason (the exception's class and first line) and where the export is."""
    reason = str(e).strip().splitlines()[0] if str(e).strip() else "no reason given"
    return (f"--push-to-hub {repo}: the push to the Hugging Face Hub failed ({type(e).__name__}: {reason}); "
            f"the export is complete on disk in {out.absolute()}: push it later with "
            f"`hf upload {shlex.quote(repo)} {shlex.quote(str(out.absolute()))} --repo-type dataset`")


def check_repo(repo: str) -> None:
    """`--push-to-hub REPO` checked before anything is written: an InputError (exit 2) naming a repo id the Hub
    refuses (`name` or `namespace/name` of letters, digits, - _ .), so a typo costs no export first."""
    try:
        from huggingface_hub.utils import validate_repo_id
    except ImportError:
        return
    try:
        validate_repo_id(repo)
    except ValueError as e:  # HFValidationError
        reason = str(e).strip().splitlines()[0] if str(e).strip() else "not a repo id"
        raise InputError(f"--push-to-hub {repo!r}: not a Hugging Face repo id ({reason}); give NAMESPACE/NAME, "
                         f"e.g. --push-to-hub me/sgs-proofs") from None


def push_to_hub(out: Path, repo: str) -> None:
    """Upload the exported configs, then the card, to the dataset repo `repo`; a clear error without a
    token, and `HubError` (one line: the repo, the reason, the local copy) when the Hub cannot be reached
    or refuses. A full disk while pushing is left to the CLI's disk-full message."""
    try:
        _push(out, repo)
    except hub_failures() as e:
        if isinstance(e, SgsError) or is_disk_full(e):
            raise
        raise HubError(hub_failure_message(repo, out, e)) from e


def _push(out: Path, repo: str) -> None:
    token = hub_token()
    if token is None:
        raise RunError(f"--push-to-hub {repo}: no Hugging Face token (set HF_TOKEN or run `hf auth login`); "
                       f"the dataset is on disk in {out}")
    card = out / "README.md"
    declared = [c for c in CONFIGS if card.is_file() and f"- config_name: {c}\n" in card.read_text(encoding="utf-8")]
    missing = [data_file(c) for c in declared if not (out / data_file(c)).is_file()]
    if missing or not card.is_file():
        raise RunError(f"--push-to-hub {repo}: {out} is not a complete export (missing "
                       f"{', '.join(missing or ['README.md'])}); run `sgsbatch export` again with --force")
    if not declared:
        raise RunError(f"--push-to-hub {repo}: the export in {out} has no rows (no proof, no conjecture); nothing to push")
    import tempfile

    from datasets import Dataset

    for config in declared:
        with tempfile.TemporaryDirectory(prefix="sgsbatch-export-") as cache:  # no copy left in the HF cache
            ds = Dataset.from_parquet(str(out / data_file(config)), cache_dir=cache)
            ds.push_to_hub(repo, config_name=config, split=SPLIT, data_dir=config, token=token)
    from huggingface_hub import HfApi

    # last: push_to_hub writes a card of its own; ours declares the same configs and data files
    HfApi(token=token).upload_file(path_or_fileobj=str(out / "README.md"), path_in_repo="README.md", repo_id=repo,
                                   repo_type="dataset")

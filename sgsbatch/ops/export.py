"""`sgsbatch export`: a run's proofs as a Hugging Face dataset on disk, with a dataset card.

Two splits (`datasets.DatasetDict.save_to_disk`): `proofs`, the solved store (ops/proofs.py
`found_proofs`: problem id, whether it is a conjecture, round, sample, slot, statement, proof), and
`conjectures`, every unique conjecture with its lineage (target, round, statement, Guide
sub-scores, verified/attempts, first proof or "", training weight or NaN). README.md in the output
is the card: the run's frozen config, counts, the cumulative solve rate per round; a SIMULATED run
says so at the top. `push_to_hub` uploads the same DatasetDict where a Hugging Face token exists.
Not covered: the failed attempts (they stay in the state database).
"""

from __future__ import annotations

import math
import os
import shutil
from pathlib import Path
from typing import Any

from sgsbatch.errors import RunError
from sgsbatch.ops.proofs import conjecture_lineage, found_proofs
from sgsbatch.ops.status import run_status
from sgsbatch.run.handle import RunHandle

GUIDE_KEYS = ("relevance", "redundant", "complexity", "score")


def export_rows(h: RunHandle) -> dict[str, list[dict[str, Any]]]:
    """The rows of both splits, flat and typed for Arrow (no None in number columns)."""
    conj = conjecture_lineage(h)
    conj_ids = {c["conjecture_id"] for c in conj}
    proofs = [{**p, "is_conjecture": p["problem_id"] in conj_ids, "statement": p["statement"] or ""}
              for p in found_proofs(h)]
    conjectures = []
    for c in conj:
        g = c["guide"] or {}
        conjectures.append({
            "conjecture_id": c["conjecture_id"], "target_id": c["target_id"], "round": c["round"],
            "statement": c["statement"] or "", "reviewed": c["guide"] is not None,
            **{f"guide_{k}": float(g.get(k, math.nan)) for k in GUIDE_KEYS},
            "verified": c["verified"], "attempts": c["attempts"], "proof": c["proof"] or "",
            "training_weight": math.nan if c["training_weight"] is None else float(c["training_weight"]),
        })
    return {"proofs": proofs, "conjectures": conjectures}


def dataset_card(h: RunHandle, rows: dict[str, list[dict[str, Any]]]) -> str:
    st = run_status(h, live=False)
    curve = ", ".join(f"{100 * x:.1f}%" for x in st.solve_rate_curve) or "no completed round"
    verified_conj = sum(1 for c in rows["conjectures"] if c["verified"] > 0)
    lines = [f"# sgsbatch run {h.cfg.run.name}: proofs and conjectures", ""]
    if h.cfg.simulated:
        lines += ["**SIMULATED**: this run used a simulated component (generation, verifier or trainer); its "
                  "proofs were not checked by Lean.", ""]
    lines += [
        "Self-Guided Self-Play (arXiv 2604.20209) run by sgsbatch. Splits:", "",
        f"- `proofs`: {len(rows['proofs'])} stored proofs of "
        f"{len({p['problem_id'] for p in rows['proofs']})} problems (targets and conjectures)",
        f"- `conjectures`: {len(rows['conjectures'])} unique conjectures, {verified_conj} of them proved", "",
        f"State: {st.state}, {st.rounds_completed} of {h.cfg.run.rounds} rounds completed, {st.targets} targets.", "",
        f"Cumulative solve rate by round: {curve}", "",
        "## Run config (frozen at launch)", "", "```toml", h.paths.config.read_text().rstrip(), "```", "",
    ]
    return "\n".join(lines)


def export_run(h: RunHandle, out: Path, force: bool = False) -> dict[str, int]:
    """Write the dataset and its card to `out`; returns the row count per split."""
    from datasets import Dataset, DatasetDict

    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        if not force:
            raise RunError(f"--out {out} exists and is not empty; choose another directory or pass --force")
        if not out.is_dir():
            raise RunError(f"--out {out} is a file; choose a directory")
        if not (out / "dataset_dict.json").is_file():
            raise RunError(f"--out {out} is not an earlier export (no dataset_dict.json); --force replaces only "
                           "an export, never another directory: choose an empty or new directory")
        shutil.rmtree(out)
    rows = export_rows(h)
    dd = DatasetDict({name: Dataset.from_list(r) for name, r in rows.items() if r})
    dd.save_to_disk(str(out))
    (out / "README.md").write_text(dataset_card(h, rows), encoding="utf-8")
    return {name: len(r) for name, r in rows.items()}


def hub_token() -> str | None:
    if os.environ.get("HF_TOKEN"):
        return os.environ["HF_TOKEN"]
    try:
        from huggingface_hub import get_token
    except ImportError:
        return None
    return get_token()


def push_to_hub(out: Path, repo: str) -> None:
    """Upload the exported dataset (and its card) to `repo`; a clear error without a token."""
    if hub_token() is None:
        raise RunError(f"--push-to-hub {repo}: no Hugging Face token (set HF_TOKEN or run `huggingface-cli login`); "
                       f"the dataset is on disk in {out}")
    from datasets import load_from_disk

    dd = load_from_disk(str(out))
    dd.push_to_hub(repo)
    from huggingface_hub import HfApi

    HfApi().upload_file(path_or_fileobj=str(out / "README.md"), path_in_repo="README.md", repo_id=repo,
                        repo_type="dataset")

"""`sgsbatch proofs`: found proofs and conjecture lineage equal what the run recorded.

The run: a 2-round local rehearsal of jobs/sgs.toml (SIMULATED generation, verifier and trainer,
24 D_3k targets), so that proofs, conjectures, Guide reviews (half of the replies malformed, so
that failed reviews exist) and Conjecturer training exist.
Compared against the database read with sqlite3 and the train job's own `prepared.json`; the
export loaded back with `datasets.load_dataset` per config, and `proofs --json` piped to `verify -`.
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from runlib import REPO, sgsbatch  # noqa: E402

pytestmark = pytest.mark.slow
D3K = REPO.parent / "shared" / "data" / "d3k" / "D_3k_small_prover_dataset.json"
NAME = "sgs-rehearsal"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not D3K.is_file():
        pytest.skip(f"{D3K} is missing")
    runs = tmp_path_factory.mktemp("proofs")
    args = ["launch", str(REPO / "jobs" / "sgs.toml"), "--rehearse"]
    # records kept whole (no compaction) so that lineage's recomputation from the shard files, for runs
    # prepared before conjecturer_rewards.json existed, has shard files to read; the test compacts a round itself
    for o in (f"run.runs_dir={runs}", "run.executor=local", "run.rounds=2", f"data.source={D3K}", "data.limit=24",
              "run.poll_interval_s=1", "records.keep_sample_tokens=true",
              "generation.simulated_malformed_guide=0.5",  # failed Guide reviews for the export to flag
              "shards.conjecture=2", "shards.solve=2", "shards.guide=1", "shards.verify=0"):  # proofs and lineage do not depend on the shape
        args += ["--set", o]
    proc = sgsbatch(*args, "--wait")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return runs


def _cli(runs: Path, *args: str) -> list[dict[str, Any]]:
    proc = sgsbatch("proofs", NAME, "--runs-dir", str(runs), "--json", *args)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines()]


def _db(runs: Path, q: str, *params: Any) -> list[tuple[Any, ...]]:
    con = sqlite3.connect(f"file:{runs / NAME / 'state.db'}?mode=ro", uri=True)
    try:
        return [tuple(r) for r in con.execute(q, params)]
    finally:
        con.close()


def test_found_proofs_are_the_solved_store_with_statements(runs: Path) -> None:
    before = (runs / NAME / "state.db").read_bytes()
    rows = _cli(runs)
    stored = _db(runs, "select s.problem_id, s.round, s.sample, s.slot, s.proof, p.theorem from stored_proofs s "
                       "left join problems p on p.problem_id = s.problem_id and p.run_id = s.run_id")
    assert stored, "the rehearsal stored no proof"
    assert sorted((r["problem_id"], r["round"], r["sample"], r["slot"], r["proof"], r["statement"]) for r in rows) \
        == sorted(stored)
    headers = dict(_db(runs, "select problem_id, header from problems"))
    assert all(r["header"] == headers[r["problem_id"]] and r["id"] == f"{r['problem_id']}#{r['slot']}" for r in rows)
    assert len({r["id"] for r in rows}) == len(rows)
    one = rows[0]["problem_id"]
    assert {r["problem_id"] for r in _cli(runs, "--target", one)} == {one}
    assert all(r["round"] == 1 for r in _cli(runs, "--round", "1"))
    assert len(_cli(runs, "--round", "1")) == len([s for s in stored if s[1] == 1])
    text = sgsbatch("proofs", NAME, "--runs-dir", str(runs), "--target", one).stdout
    assert f"== {one} (round" in text and rows[0]["proof"] in text
    assert (runs / NAME / "state.db").read_bytes() == before  # read-only


def test_conjecture_lineage_is_one_query_away(runs: Path) -> None:
    rows = _cli(runs, "--conjectures")
    conj = {cid: (tgt, r, st) for cid, tgt, r, st in _db(
        runs, "select conjecture_id, target_id, round, statement from conjectures where status = 'ok'")}
    assert rows and {r["conjecture_id"] for r in rows} == set(conj)
    reviews = {cid: (bool(ok), why, rel, red, cx, sc) for cid, ok, why, rel, red, cx, sc in _db(
        runs, "select conjecture_id, parsed, reason, relevance, redundant, complexity, score from reviews")}
    counts = {pid: (v, n) for pid, v, n in _db(
        runs, "select problem_id, sum(verdict = 'verified'), count(*) from attempts group by problem_id")}
    for row in rows:
        cid = row["conjecture_id"]
        assert (row["target_id"], row["round"], row["statement"]) == conj[cid]
        if cid in reviews:
            g = row["guide"]
            assert (g["parsed"], g["reason"], g["relevance"], g["redundant"], g["complexity"], g["score"]) == reviews[cid]
        else:
            assert row["guide"] is None
        assert (row["verified"], row["attempts"]) == counts.get(cid, (0, 0))
        assert (row["proof"] is not None) == (row["verified"] > 0)
    for r in (0, 1):
        prepared = json.loads((runs / NAME / "rounds" / f"r{r:04d}" / "train" / "prepared.json").read_text())
        weights = [x["training_weight"] for x in rows if x["round"] == r and x["training_weight"] is not None]
        assert len(weights) == prepared["conjecturer"]["examples"]
        if weights:
            assert sum(weights) / len(weights) == pytest.approx(prepared["conjecturer"]["reward_mean"])
    one = rows[0]["target_id"]
    assert {x["target_id"] for x in _cli(runs, "--conjectures", "--target", one)} == {one}
    failed = [x for x in rows if x["guide"] is not None and not x["guide"]["parsed"]]
    text = sgsbatch("proofs", NAME, "--runs-dir", str(runs), "--conjectures").stdout
    assert failed and f"guide review failed to parse ({failed[0]['guide']['reason']}): stand-in score" in text


def _weights_by_round(rows: list[dict[str, Any]]) -> dict[int, dict[str, float]]:
    out: dict[int, dict[str, float]] = {0: {}, 1: {}}
    for x in rows:
        if x["training_weight"] is not None:
            out[x["round"]][x["conjecture_id"]] = x["training_weight"]
    return out


def test_lineage_reads_the_rewards_the_train_job_wrote(runs: Path) -> None:
    """The train job writes each round's Conjecturer rewards once; lineage reads them without the
    round's shard files, and recomputes them from the shard files only for a run without that file
    (unknown where those are unfinished or compacted: round 0, compacted here as a train job would)."""
    rows = _cli(runs, "--conjectures")
    weights = _weights_by_round(rows)
    rounds = runs / NAME / "rounds"
    for r in (0, 1):
        written = json.loads((rounds / f"r{r:04d}" / "train" / "conjecturer_rewards.json").read_text())
        assert written == weights[r]
    assert weights[1], "no in-band conjecture in round 1: the recomputation below compares nothing"
    solve, rewards = rounds / "r0001" / "solve", rounds / "r0001" / "train" / "conjecturer_rewards.json"
    saved = rewards.read_bytes()
    solve.rename(solve.with_name("solve.moved"))
    try:
        assert _cli(runs, "--conjectures") == rows  # the file, not the shard files
        rewards.unlink()  # a run prepared before the file existed, its shard files gone: weight unknown
        assert _weights_by_round(_cli(runs, "--conjectures")) == {0: weights[0], 1: {}}
    finally:
        solve.with_name("solve.moved").rename(solve)
        rewards.write_bytes(saved)
    rewards.unlink()
    try:  # without the file, with the shard files: recomputed, the same weights
        assert _cli(runs, "--conjectures") == rows
    finally:
        rewards.write_bytes(saved)
    from sgsbatch.round.compaction import compact_round, is_compacted
    from sgsbatch.run.handle import read_frozen_config
    from sgsbatch.run.paths import RunPaths

    paths = RunPaths(runs / NAME)
    compact_round(read_frozen_config(paths), paths, 0)  # what a run's train job does (round/compaction.py)
    assert is_compacted(paths, 0) and not is_compacted(paths, 1)
    old = rounds / "r0000" / "train" / "conjecturer_rewards.json"
    saved = old.read_bytes()
    old.unlink()
    try:  # without the file, compacted (token ids gone): unknown, not a crash
        assert _weights_by_round(_cli(runs, "--conjectures")) == {0: {}, 1: weights[1]}
    finally:
        old.write_bytes(saved)


def test_bad_input_is_a_clean_message(runs: Path) -> None:
    proc = sgsbatch("proofs", NAME, "--runs-dir", str(runs), "--round", "7")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and "rounds 0..1" in proc.stderr
    proc = sgsbatch("proofs", "nope", "--runs-dir", str(runs))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and "nope" in proc.stderr
    proc = sgsbatch("proofs", NAME, "--runs-dir", str(runs), "--target", "no_such_problem")
    assert proc.returncode == 2 and "has no target or conjecture with this id" in proc.stderr


def test_export_loads_each_config_with_load_dataset(runs: Path, tmp_path: Path) -> None:
    """The export is a Hub dataset repository on disk: `load_dataset(DIR, config)` loads each config
    (offline), with the rows `proofs --json` prints and a failed Guide review flagged with its reason."""
    import datasets

    out, cache = tmp_path / "ds", str(tmp_path / "cache")
    env = {**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    proc = sgsbatch("export", NAME, "--runs-dir", str(runs), "--out", str(out), env=env)
    assert proc.returncode == 0, proc.stderr
    proofs, conj = _cli(runs), _cli(runs, "--conjectures")
    assert f"{len(proofs)} proofs, {len(conj)} conjectures" in proc.stdout
    card = (out / "README.md").read_text()
    assert card.startswith("---\n") and "- config_name: proofs" in card and "- config_name: conjectures" in card
    got = datasets.load_dataset(str(out), "proofs", cache_dir=cache)["train"]
    cols = ("id", "problem_id", "round", "sample", "slot", "header", "proof", "statement")
    assert sorted(tuple(r[k] for k in cols) for r in got) == sorted(tuple(p[k] or "" if k in ("header", "statement")
                                                                          else p[k] for k in cols) for p in proofs)
    conj_ids = {c["conjecture_id"] for c in conj}
    assert all(r["is_conjecture"] == (r["problem_id"] in conj_ids) for r in got)
    by_id = {c["conjecture_id"]: c for c in conj}
    got = datasets.load_dataset(str(out), "conjectures", cache_dir=cache)["train"]
    assert sorted(r["conjecture_id"] for r in got) == sorted(by_id)
    failed = 0
    for r in got:
        c = by_id[r["conjecture_id"]]
        g = c["guide"]
        assert (r["target_id"], r["round"], r["verified"], r["attempts"]) == (c["target_id"], c["round"],
                                                                              c["verified"], c["attempts"])
        assert r["reviewed"] == (g is not None) and r["guide_parsed"] == (g is not None and g["parsed"])
        if g is not None:
            assert r["guide_score"] == g["score"]
            if g["parsed"]:
                assert (r["guide_relevance"], r["guide_failure"]) == (g["relevance"], "")
            else:  # not a silent 0.0: flagged, with the parse failure's reason; sub-scores NaN
                failed += 1
                assert r["guide_failure"] == g["reason"] and r["guide_failure"]
                assert r["guide_relevance"] != r["guide_relevance"]
        assert (r["training_weight"] == c["training_weight"]) or (c["training_weight"] is None
                                                                   and r["training_weight"] != r["training_weight"])
    assert failed and failed == len(_db(runs, "select 1 from reviews where not parsed"))
    assert "SIMULATED" in card and f"{len(proofs)} stored proofs" in card and "Cumulative solve rate" in card
    assert f"{failed} Guide reviews failed to parse" in card and "[run]" in card  # the frozen config
    again = sgsbatch("export", NAME, "--runs-dir", str(runs), "--out", str(out))
    assert again.returncode != 0 and "--force" in again.stderr and "Traceback" not in again.stderr
    forced = sgsbatch("export", NAME, "--runs-dir", str(runs), "--out", str(out), "--force")
    assert forced.returncode == 0, forced.stderr
    other = tmp_path / "home"
    other.mkdir()
    (other / "precious.txt").write_text("x")
    refused = sgsbatch("export", NAME, "--runs-dir", str(runs), "--out", str(other), "--force")
    assert refused.returncode != 0 and "not an earlier export" in refused.stderr
    assert (other / "precious.txt").read_text() == "x"  # --force never deletes a directory that is not an export


def test_proofs_json_piped_to_verify_rechecks_every_proof(runs: Path, tmp_path: Path) -> None:
    """`sgsbatch proofs RUN --json | sgsbatch verify - --out OUT`: every stored proof is re-checked
    under its id (here by the simulated verifier the rehearsal used: no Lean in this tier)."""
    rows = _cli(runs)
    out = tmp_path / "recheck.jsonl"
    proc = sgsbatch("verify", "-", "--out", str(out), "--set", "verification.backend=simulated", "--quiet",
                    stdin="".join(json.dumps(r) + "\n" for r in rows))
    assert proc.returncode == 0, proc.stderr
    verdicts = {v["id"]: v for v in map(json.loads, out.read_text().splitlines())}
    assert set(verdicts) == {r["id"] for r in rows}
    assert {v["verdict"] for v in verdicts.values()} == {"verified"}, [v for v in verdicts.values()
                                                                        if v["verdict"] != "verified"][:3]
    conj = [dict(c, id=c["conjecture_id"]) for c in _cli(runs, "--conjectures")]  # lineage rows have no header
    bad = sgsbatch("verify", "-", "--out", str(tmp_path / "bad.jsonl"), "--set", "verification.backend=simulated",
                   stdin="".join(json.dumps(c) + "\n" for c in conj))
    assert bad.returncode == 2 and "standard input: no row could be read" in bad.stderr
    assert not (tmp_path / "bad.jsonl").exists()


def test_push_to_hub_without_a_token_is_refused_after_the_local_copy(runs: Path, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "HF_TOKEN"}
    env["HF_HOME"] = str(tmp_path / "hf")  # no stored login
    out = tmp_path / "ds"
    proc = sgsbatch("export", NAME, "--runs-dir", str(runs), "--out", str(out), "--push-to-hub", "me/x", env=env)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "no Hugging Face token" in proc.stderr and (out / "README.md").is_file()


def test_push_to_hub_that_reaches_no_hub_names_the_repo_and_the_local_copy(runs: Path, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    env.update(HF_TOKEN="hf_test", HF_HOME=str(tmp_path / "hf"), HF_ENDPOINT="http://127.0.0.1:9",
               HF_HUB_ETAG_TIMEOUT="5", HF_HUB_DOWNLOAD_TIMEOUT="5")  # a closed local port: a real push fails fast
    out = tmp_path / "ds"
    proc = sgsbatch("export", NAME, "--runs-dir", str(runs), "--out", str(out), "--push-to-hub", "me/x", env=env)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "--push-to-hub me/x: the push to the Hugging Face Hub failed" in proc.stderr
    assert f"the export is complete on disk in {out}" in proc.stderr and (out / "README.md").is_file()

"""Old rounds compacted in a whole run (round/compaction.py): the same results, flat disk, rebuildable.

Covered: two 2-round local rehearsals of jobs/sgs.toml (24 targets of D_3k, 2 solve shards), one with the default
(`records.keep_sample_tokens = false`) and one keeping everything, end with identical databases
(attempts, verdicts, store, conjectures, reviews, trained steps and every metric but wall times
and engine rates); in the compacted run every round (the last one too, once its train job's
marker is written) holds gzip-compressed outputs without token ids, logprobs or prompt ids, no
item logs, no example files once the next round has trained, and is several times smaller than the same round kept whole; a lost
database of the compacted run is rebuilt with the same rows. A third run with `records.keep_text = "verified"` ends with the same
database too, its compacted rounds keeping reply text exactly for the verified Solver samples.
Not covered: Slurm (the same train job code runs there; the rehearsal benchmark measures it at
full shape, bench/README.md, and tests/slurm/test_rehearsal_slurm.py runs it).
"""

from __future__ import annotations

import gzip
import shutil
import sqlite3
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from runlib import REPO, outcome, sgsbatch  # noqa: E402

from sgsbatch.run.shards import Shard  # noqa: E402

pytestmark = pytest.mark.slow
SGS = REPO / "jobs" / "sgs.toml"
D3K = REPO.parent / "shared" / "data" / "d3k" / "D_3k_small_prover_dataset.json"
TIMING = ("wall_s/", "tokens_per_s", "startup_s")
SHARDS = {"conjecture": 2, "solve": 2, "guide": 1, "verify": 2}  # a small shape; compaction is per round and shard


def _launch(runs: Path, name: str, env: dict[str, str], *extra: str) -> Path:
    args = ["launch", str(SGS), "--rehearse", "--wait"]
    for o in (f"run.runs_dir={runs}", f"run.name={name}", "run.executor=local", "run.rounds=2",
              f"data.source={D3K}", "data.limit=24", "run.poll_interval_s=1",
              # a small shape (3 runs of 150 tasks a round cost minutes of CI): compaction is per round
              f"shards.conjecture={SHARDS['conjecture']}", f"shards.solve={SHARDS['solve']}",
              f"shards.guide={SHARDS['guide']}", f"shards.verify={SHARDS['verify']}", *extra):
        args += ["--set", o]
    proc = sgsbatch(*args, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # `--wait` returns once the database says completed; the last train task still ends the round
    # (TensorBoard), writes its marker and compacts the round
    done = runs / name / "rounds" / "r0001" / ("train/shard_00000.done" if "records.keep_sample_tokens=true" in extra
                                               else "compacted")
    for _ in range(600):
        if done.exists():
            break
        time.sleep(0.1)
    assert done.exists()
    return runs / name


def _metrics(run: Path) -> dict[tuple[int, str], float]:
    con = sqlite3.connect(run / "state.db")
    try:
        return {(r, n): v for r, n, v in con.execute("SELECT round, name, value FROM metrics")
                if not any(t in n for t in TIMING)}
    finally:
        con.close()


def _bytes(d: Path) -> int:
    return sum(f.stat().st_size for f in d.rglob("*") if f.is_file())


def test_compacted_run_equals_a_whole_one_and_rebuilds(tmp_path: Path, cli_env: dict[str, str]) -> None:
    if not D3K.is_file():
        pytest.skip(f"{D3K} is missing")
    compact = _launch(tmp_path, "c", cli_env)
    whole = _launch(tmp_path, "w", cli_env, "records.keep_sample_tokens=true")
    lean = _launch(tmp_path, "v", cli_env, "records.keep_text=verified")
    assert outcome(compact) == outcome(whole) == outcome(lean)
    assert _metrics(compact) == _metrics(whole) == _metrics(lean)
    solve0 = [x for sh in range(SHARDS['solve']) for x in Shard(lean / "rounds" / "r0000" / "solve", sh).read()]
    verdicts = {x["key"]: x["verdicts"] for sh in range(SHARDS['verify'])
                for x in Shard(lean / "rounds" / "r0000" / "verify", sh).read()}
    kept = [("text" in smp, v["verdict"] == "verified") for x in solve0
            for smp, v in zip(x["samples"], verdicts[x["key"]], strict=True)]
    assert (True, True) in kept and (False, False) in kept and all(a == b for a, b in kept)
    assert _bytes(lean / "rounds" / "r0000") < _bytes(compact / "rounds" / "r0000")
    assert _metrics(compact)[(1, "tokens/round")] > 0
    for r in (0, 1):  # the last round too, once its train job's marker is written
        rd = compact / "rounds" / f"r{r:04d}"
        assert (rd / "compacted").exists()
        phases = ("conjecture", "solve", "guide", "verify")
        outputs = [p for ph in phases for p in (rd / ph).glob("shard_*.jsonl.gz")]
        assert len(outputs) == sum(SHARDS.values()) and not [p for ph in phases for p in (rd / ph).glob("shard_*[0-9].jsonl")]
        assert not any(w in gzip.decompress(p.read_bytes()).decode() for p in outputs
                       for w in ('"token_ids"', '"logprobs"', '"prompt_ids"'))
        assert not list(rd.glob("*/shard_*.partial.jsonl"))
        # example files stay until the next round has trained (the last round's: for good)
        assert bool(list(rd.glob("train/examples/*.npz"))) == (r == 1)
        assert _bytes(rd) * 3 < _bytes(whole / "rounds" / f"r{r:04d}"), r
    assert not (whole / "rounds" / "r0000" / "compacted").exists()

    want, want_metrics = outcome(compact), _metrics(compact)
    (compact / "state.db").unlink()
    shutil.rmtree(compact / "tb")
    proc = sgsbatch("rebuild", compact.name, "--runs-dir", str(tmp_path), env=cli_env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert outcome(compact) == want
    assert {k: v for k, v in _metrics(compact).items()} == want_metrics

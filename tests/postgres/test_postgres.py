"""PostgreSQL for real (issue 17 part 6): the state database on a real server (pgserver.py).

Schema creation and migrations; two processes writing at once; tiny runs whose database is
PostgreSQL, equal to the same run on SQLite, also with injected crashes; `rebuild` into
PostgreSQL after its tables were lost. Skipped without the PostgreSQL binaries or psycopg,
except under SGSBATCH_REQUIRE_POSTGRES=1 (CI), where that is a failure.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pgserver import PgServer
from runlib import launch_args, outcome, sgsbatch, status
from sqlalchemy import create_engine, inspect, text

from sgsbatch.state.db import SCHEMA_VERSION, open_db

pytestmark = pytest.mark.postgres


def test_schema_is_created_and_migrated(pg_url: str) -> None:
    db = open_db(pg_url)
    assert db.version() == SCHEMA_VERSION and not db.is_sqlite
    names = set(inspect(db.engine).get_table_names())
    assert {"runs", "attempts", "stored_proofs", "run_environments", "schema_version"} <= names
    # a database of the first schema version is upgraded in place, never recreated
    with db.engine.begin() as conn:
        conn.execute(text("DROP TABLE run_environments"))
        conn.execute(text("UPDATE schema_version SET version = 1"))  # a database stamped by version 1
    db.engine.dispose()
    again = open_db(pg_url)
    assert again.version() == SCHEMA_VERSION
    assert "run_environments" in inspect(again.engine).get_table_names()


WRITER = """
import sys, time
from sgsbatch.state.db import open_db
from sgsbatch.state.schema import Metric
db = open_db(sys.argv[1])
for i in range(200):
    with db.write() as s:
        s.add(Metric(run_id=1, round=int(sys.argv[2]), name=f"m{i}", value=float(i)))
"""


def test_two_processes_write_at_once(pg_url: str, tmp_path: Path) -> None:
    from runlib import TINY

    from sgsbatch.config.loading import load_config
    from sgsbatch.logic.data import Target
    from sgsbatch.run.handle import create_run

    cfg = load_config(TINY, [f"run.runs_dir={tmp_path}", "run.name=w", f"run.database_url={pg_url}"])
    create_run(cfg, [Target("t0", "", "theorem t0 : True := by")], "local")  # run id 1
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, pg_url, str(k)], stderr=subprocess.PIPE, text=True)
             for k in range(2)]
    errors = [p.communicate(timeout=300)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], errors
    engine = create_engine(pg_url)
    with engine.connect() as conn:
        counts = conn.execute(text("SELECT round, count(*) FROM metrics GROUP BY round ORDER BY round")).all()
    engine.dispose()
    assert [tuple(c) for c in counts] == [(0, 200), (1, 200)]


@pytest.fixture(scope="module")
def runs(pg_server: PgServer, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The same 2-round tiny run (local executor) on SQLite, on PostgreSQL, and on PostgreSQL with
    a crash and a kill -9 injected."""
    root = tmp_path_factory.mktemp("pg-runs")
    urls = {"pg": pg_server.createdb("run_pg"), "faults": pg_server.createdb("run_faults")}
    common = ("run.executor=local", "run.rounds=2")
    out: dict[str, Any] = {"root": root, "urls": urls}
    for name, extra, env in (
        ("sqlite", (), None),
        ("pg", (f"run.database_url={urls['pg']}",), None),
        ("faults", (f"run.database_url={urls['faults']}",),
         {"SGSBATCH_FAULT_INJECT": "solve:0:raise:1,verify:1:kill9:1"}),
    ):
        import os

        proc = sgsbatch(*launch_args(root, name, *common, *extra), "--wait",
                        env=None if env is None else {**os.environ, **env})
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return out


@pytest.mark.slow
def test_a_tiny_run_on_postgres_equals_the_same_run_on_sqlite(runs: dict[str, Any]) -> None:
    root, urls = runs["root"], runs["urls"]
    st = status(root, "pg")
    assert st["state"] == "completed" and st["rounds_completed"] == 2
    assert not (root / "pg" / "state.db").exists()  # nothing was written to SQLite
    on_pg, on_sqlite = outcome(root / "pg", urls["pg"]), outcome(root / "sqlite")
    assert on_pg["attempts"] and on_pg == on_sqlite


@pytest.mark.slow
def test_injected_faults_on_postgres_end_like_the_clean_run(runs: dict[str, Any]) -> None:
    root, urls = runs["root"], runs["urls"]
    assert status(root, "faults")["state"] == "completed"
    assert outcome(root / "faults", urls["faults"]) == outcome(root / "pg", urls["pg"])
    failures = list((root / "faults" / "rounds").glob("r0000/*/shard_*.failures"))
    assert failures, "the injected faults happened and were retried"


@pytest.mark.slow
def test_rebuild_into_postgres_after_its_tables_were_lost(runs: dict[str, Any]) -> None:
    root, urls = runs["root"], runs["urls"]
    before = outcome(root / "pg", urls["pg"])
    engine = create_engine(urls["pg"])
    with engine.begin() as conn:
        conn.execute(text("DROP SCHEMA public CASCADE"))
        conn.execute(text("CREATE SCHEMA public"))
    engine.dispose()
    proc = sgsbatch("rebuild", "pg", "--runs-dir", str(root))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    after = outcome(root / "pg", urls["pg"])
    assert after == before
    assert status(root, "pg")["state"] == "completed"

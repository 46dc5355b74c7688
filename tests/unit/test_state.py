"""The state database: schema version, idempotent ingestion, the solved store cap, lock retries."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import func
from sqlmodel import select

from sgsbatch.config.loading import load_config
from sgsbatch.logic.data import Target
from sgsbatch.run.handle import RunHandle, create_run, open_run
from sgsbatch.state.db import SCHEMA_VERSION, open_db
from sgsbatch.state.ingest import RoundRows, ingest_rows
from sgsbatch.state.schema import Attempt, Metric, StoredProof

REPO = Path(__file__).resolve().parents[2]


def _run(tmp_path: Path) -> RunHandle:
    cfg = load_config(REPO / "jobs" / "tiny.toml", [f"run.runs_dir={tmp_path}", "run.name=t", "run.executor=local"])
    targets = [Target(f"t{i}", "import Mathlib\n", f"theorem t{i} : True := by") for i in range(3)]
    return create_run(cfg, targets, "local")


def _rows(verified_per_target: int, samples: int = 20) -> RoundRows:
    rows = RoundRows(metrics={"pass@8": 0.5}, store_metric="store/new_proofs")
    for t in range(3):
        for k in range(samples):
            ok = k < verified_per_target
            rows.attempts.append({"problem_id": f"t{t}", "is_target": True, "sample": k, "extracted": True,
                                  "extract_reason": None, "proof": f"  simp -- {k}", "verdict": "verified" if ok
                                  else "failed", "verify_reason": None, "tokens": 5, "finish_reason": "stop",
                                  "verify_s": 0.0})
    return rows


def test_fresh_database_has_current_schema_version(tmp_path: Path) -> None:
    db = open_db(f"sqlite:///{tmp_path / 's.db'}")
    assert db.version() == SCHEMA_VERSION
    assert open_db(db.url).version() == SCHEMA_VERSION  # reopening migrates nothing


def test_ingestion_is_idempotent_and_caps_the_store(tmp_path: Path) -> None:
    h = _run(tmp_path)
    assert ingest_rows(h.db, h.run_id, 0, _rows(20), store_cap=16)
    assert not ingest_rows(h.db, h.run_id, 0, _rows(20), store_cap=16)
    with h.db.read() as s:
        assert s.exec(select(func.count()).select_from(Attempt)).one() == 60
        assert s.exec(select(func.count()).select_from(Metric)).one() == 2
        per = dict(s.exec(select(StoredProof.problem_id, func.count()).group_by(StoredProof.problem_id)).all())
    assert per == {"t0": 16, "t1": 16, "t2": 16}
    # next round: the store is full, nothing more is kept
    assert ingest_rows(h.db, h.run_id, 1, _rows(3), store_cap=16)
    with h.db.read() as s:
        assert s.exec(select(func.count()).select_from(StoredProof)).one() == 48


def test_open_run_reads_the_frozen_config(tmp_path: Path) -> None:
    h = _run(tmp_path)
    again = open_run(tmp_path, "t")
    assert again.cfg == h.cfg and again.run_id == h.run_id
    assert (tmp_path / "t" / "config.toml").read_text().count("simulated") >= 1


def test_write_waits_for_a_lock_held_by_another_writer(tmp_path: Path) -> None:
    h = _run(tmp_path)
    other = sqlite3.connect(h.paths.db, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")
    released = []

    def release() -> None:
        time.sleep(1.0)
        released.append(time.time())
        other.execute("COMMIT")

    threading.Thread(target=release).start()
    assert ingest_rows(h.db, h.run_id, 0, _rows(1), store_cap=16)
    assert released and time.time() >= released[0]


def test_an_older_database_is_migrated_not_recreated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from sqlalchemy import text

    from sgsbatch.state import db as dbmod

    h = _run(tmp_path)
    assert ingest_rows(h.db, h.run_id, 0, _rows(2), store_cap=16)
    h.db.close()

    def add_note_column(conn: object) -> None:
        conn.exec_driver_sql("ALTER TABLE runs ADD COLUMN note TEXT DEFAULT ''")  # type: ignore[attr-defined]

    monkeypatch.setitem(dbmod.MIGRATIONS, dbmod.SCHEMA_VERSION + 1, add_note_column)
    monkeypatch.setattr(dbmod, "SCHEMA_VERSION", dbmod.SCHEMA_VERSION + 1)
    again = open_db(h.db.url)
    assert again.version() == dbmod.SCHEMA_VERSION
    with again.read() as s:
        assert s.exec(text("SELECT count(*) FROM attempts")).one()[0] == 60  # type: ignore[call-overload]
        assert s.exec(text("SELECT note FROM runs")).one()[0] == ""  # type: ignore[call-overload]

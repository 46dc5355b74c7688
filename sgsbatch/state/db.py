"""Opening the state database: engine setup, schema migrations, single-writer transactions.

SQLite discipline for shared (network) filesystems, as in DESIGN.md: the rollback journal
(WAL does not work across hosts), `busy_timeout`, `BEGIN IMMEDIATE` for every write
transaction, short transactions, and tenacity retries when SQLite still says "database is
locked". Reads use deferred transactions. A fresh database gets the current schema and
version; an older one is upgraded by the migrations in order, never recreated.
`database_url` may name another database (e.g. PostgreSQL); then the SQLite pragmas are skipped.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import event, inspect, text
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import OperationalError
from sqlmodel import Session, SQLModel, create_engine, select
from tenacity import retry, retry_if_exception, stop_after_attempt, wait_random_exponential

from sgsbatch.state import schema
from sgsbatch.state.schema import SchemaVersion


def _add_run_environments(conn: Connection) -> None:
    schema.RunEnvironment.__table__.create(conn, checkfirst=True)  # type: ignore[attr-defined]


def _add_amendments(conn: Connection) -> None:
    schema.Amendment.__table__.create(conn, checkfirst=True)  # type: ignore[attr-defined]


# version -> upgrade from version-1. Version 1 is the first schema; add entries, never edit them.
MIGRATIONS: dict[int, Callable[[Connection], None]] = {2: _add_run_environments, 3: _add_amendments}
SCHEMA_VERSION = 1 + len(MIGRATIONS)
BUSY_TIMEOUT_MS = 30_000


def _is_locked(exc: BaseException) -> bool:
    return isinstance(exc, OperationalError) and "locked" in str(exc).lower()


locked_retry = retry(
    retry=retry_if_exception(_is_locked),
    wait=wait_random_exponential(multiplier=0.05, max=2.0),
    stop=stop_after_attempt(12),
    reraise=True,
)


def sqlite_url(path: Path) -> str:
    return f"sqlite:///{path}"


class EmptyDatabase(RuntimeError):
    """An existing run's database holds no sgsbatch schema (a 0-byte or foreign file)."""


class Database:
    """`create`: give a database without the schema the current one (launch, rebuild); else an
    empty one raises EmptyDatabase. `readonly`: never write (no migration; SQLite `query_only`)."""

    def __init__(self, url: str, create: bool = True, readonly: bool = False) -> None:
        self.url = url
        self.create = create
        self.readonly = readonly
        self.is_sqlite = url.startswith("sqlite")
        kwargs: dict[str, Any] = {}
        if self.is_sqlite:
            kwargs["connect_args"] = {"timeout": BUSY_TIMEOUT_MS / 1000, "check_same_thread": False}
        self.engine: Engine = create_engine(url, **kwargs)
        if self.is_sqlite:
            self._sqlite_hooks()
        self._migrate()

    def _sqlite_hooks(self) -> None:
        @event.listens_for(self.engine, "connect")
        def _on_connect(dbapi_conn: Any, _rec: Any) -> None:
            dbapi_conn.isolation_level = None  # we issue BEGIN ourselves
            cur = dbapi_conn.cursor()
            cur.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            if self.readonly:
                cur.execute("PRAGMA query_only=ON")
                cur.close()
                return
            cur.execute("PRAGMA journal_mode=DELETE")
            cur.execute("PRAGMA synchronous=FULL")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.close()

        @event.listens_for(self.engine, "begin")
        def _on_begin(conn: Connection) -> None:
            conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.info.get("write") else "BEGIN")

    def _current_version(self) -> int | None:
        with self.read() as s:
            conn = s.connection()
            if not inspect(conn).has_table("schema_version"):
                return None
            return int(conn.exec_driver_sql("SELECT max(version) FROM schema_version").scalar() or 0)

    @locked_retry
    def _migrate(self) -> None:
        current = self._current_version()
        if current is None and not self.create:
            raise EmptyDatabase(f"{self.url} holds no sgsbatch tables (an empty or foreign database)")
        if current == SCHEMA_VERSION or self.readonly:
            return  # the common case: no write transaction, so readers never take the write lock
        with self.write() as s:
            conn = s.connection()
            if not inspect(conn).has_table("schema_version"):
                SQLModel.metadata.create_all(conn)
                s.add(SchemaVersion(version=SCHEMA_VERSION, applied_at=time.time()))
                return
            current = s.exec(select(SchemaVersion.version).order_by(SchemaVersion.version.desc())).first()  # type: ignore[attr-defined]
            current = current or 0
            if current > SCHEMA_VERSION:
                raise RuntimeError(f"{self.url}: schema version {current} is newer than this sgsbatch "
                                   f"({SCHEMA_VERSION}); upgrade sgsbatch")
            for v in range(current + 1, SCHEMA_VERSION + 1):
                MIGRATIONS[v](conn)
                s.add(SchemaVersion(version=v, applied_at=time.time()))

    def version(self) -> int:
        with self.read() as s:
            return int(s.exec(text("SELECT max(version) FROM schema_version")).one()[0])  # type: ignore[call-overload]

    @contextmanager
    def write(self) -> Iterator[Session]:
        """One short write transaction (BEGIN IMMEDIATE on SQLite); commits on success."""
        with self.engine.connect() as conn:
            conn.info["write"] = True
            try:
                with conn.begin(), Session(bind=conn) as s:
                    yield s
                    s.flush()
            finally:
                conn.info["write"] = False

    @contextmanager
    def read(self) -> Iterator[Session]:
        with self.engine.connect() as conn, conn.begin(), Session(bind=conn) as s:
            yield s

    def close(self) -> None:
        self.engine.dispose()


def open_db(url: str, create: bool = True, readonly: bool = False) -> Database:
    return Database(url, create=create, readonly=readonly)


__all__ = ["Database", "EmptyDatabase", "SCHEMA_VERSION", "locked_retry", "open_db", "schema", "sqlite_url"]

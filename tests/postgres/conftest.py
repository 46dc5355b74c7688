"""Fixtures of the PostgreSQL tier: one real server per session (pgserver.py)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from pgserver import REQUIRE_ENV, PgServer, start


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    pytest.importorskip("psycopg", reason="psycopg (v3) is not installed: ./setup.sh installs it")
    # not under pytest's own temporary directory: that is private to root, and the server runs as `postgres`
    root = Path(tempfile.mkdtemp(prefix="sgsbatch-pg-"))
    server = start(root)
    if isinstance(server, str):
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(f"{REQUIRE_ENV}=1 but no PostgreSQL server: {server}", pytrace=False)
        pytest.skip(f"no PostgreSQL server: {server}; set {REQUIRE_ENV}=1 to make this a failure")
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def pg_url(pg_server: PgServer, request: pytest.FixtureRequest) -> str:
    """A fresh database for one test."""
    name = "t_" + "".join(c if c.isalnum() else "_" for c in request.node.name.lower())[:50]
    return pg_server.createdb(name)

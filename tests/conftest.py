"""Shared fixtures: the real embedding model (loaded once) and real stores in tmp dirs.

PostgreSQL: ``postgres`` is a throwaway server for the session (see
``tests/pgserver.py``; skipped with the reason when this machine has no
PostgreSQL binaries), ``postgres_url`` a fresh migrated database on it per
test. ``pytest --postgres`` (or ``TRIBAL_TEST_POSTGRES=1``) runs every test
with ``TRIBAL_DATABASE_URL`` set to such a database, so the whole suite
exercises PostgreSQL instead of SQLite.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from pgserver import PostgresServer, find_binaries, start_server

from tribal_memory.base.config import Settings
from tribal_memory.embeddings.fastembed import FastEmbedEmbedder
from tribal_memory.service.memory_service import MemoryService

_TEMPLATE = "tribal_migrated"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--postgres",
        action="store_true",
        default=os.environ.get("TRIBAL_TEST_POSTGRES") == "1",
        help="run every test against a throwaway PostgreSQL database (TRIBAL_DATABASE_URL)",
    )


def pytest_report_header(config: pytest.Config) -> str:
    bin_dir, why = find_binaries()
    where = f"PostgreSQL tests: server binaries in {bin_dir}" if bin_dir else f"SKIPPED: {why}"
    mode = "every test on PostgreSQL (--postgres)" if config.getoption("--postgres") else "SQLite"
    return f"SQL database: {mode}; {where}"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.getoption("--postgres"):
        return
    for item in items:
        marker = item.get_closest_marker("sqlite_only")
        if marker is not None:
            reason = marker.kwargs.get("reason") or (marker.args[0] if marker.args else "")
            item.add_marker(pytest.mark.skip(reason=f"SQLite only: {reason}"))


@pytest.fixture(scope="session")
def embedder() -> FastEmbedEmbedder:
    """The packaged all-MiniLM-L6-v2, loaded once per test session."""
    return FastEmbedEmbedder()


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """A PostgreSQL server for the session (skipped, with the reason, when none can run)."""
    server, why = start_server()
    if server is None:
        pytest.skip(why)
    try:
        migrated = server.create_database(_TEMPLATE)
        from tribal_memory.base.db import make_engine, migrate

        engine = make_engine(migrated)
        try:
            migrate(engine)
        finally:
            engine.dispose()
        yield server
    finally:
        server.stop()


@pytest.fixture
def postgres_url(postgres: PostgresServer) -> Iterator[str]:
    """URL of a fresh database, already migrated to head, dropped after the test."""
    name = f"t_{uuid.uuid4().hex[:16]}"
    url = postgres.create_database(name, template=_TEMPLATE)
    try:
        yield url
    finally:
        postgres.drop_database(name)


@pytest.fixture
def fresh_database(request: pytest.FixtureRequest) -> Iterator[Callable[[], str | None]]:
    """Makes one more empty database per call: None on SQLite (the data dir has its own file),
    a new migrated PostgreSQL database with ``--postgres`` (dropped after the test)."""
    names: list[str] = []

    def make() -> str | None:
        if not request.config.getoption("--postgres"):
            return None
        server: PostgresServer = request.getfixturevalue("postgres")
        names.append(f"t_{uuid.uuid4().hex[:16]}")
        return server.create_database(names[-1], template=_TEMPLATE)

    yield make
    for name in names:
        request.getfixturevalue("postgres").drop_database(name)


@pytest.fixture(autouse=True)
def _database_url(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """With ``--postgres``: TRIBAL_DATABASE_URL names a fresh PostgreSQL database."""
    if request.config.getoption("--postgres"):
        monkeypatch.setenv("TRIBAL_DATABASE_URL", request.getfixturevalue("postgres_url"))


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """Settings over a fresh data dir."""
    return Settings(data_dir=tmp_path / "data")


@pytest.fixture
def service(settings: Settings, embedder: FastEmbedEmbedder) -> Iterator[MemoryService]:
    """A service over real LanceDB and SQLite in a temp dir, sharing the session's model."""
    with MemoryService(settings, embedder=embedder) as svc:
        yield svc

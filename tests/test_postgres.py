"""PostgreSQL as the SQL database: migrations, the service, errors, and several replicas.

The server is started by the tests themselves (``tests/pgserver.py``: initdb
and postgres in a temp dir, 127.0.0.1 only); without PostgreSQL's binaries
the tests that need one are skipped, naming what is missing. The error tests
need no server (they point at a closed port).

The replica test runs real ``tribal-memory serve`` processes over one
PostgreSQL database and one LanceDB directory and checks what
docs/operations/replicas.md promises: SQL-side data (feedback, the query cache, weights, anchors,
deletions of learned data) is shared at once; memories written or deleted by
one replica are seen by another within ``TRIBAL_READ_CONSISTENCY_S``.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from pgserver import PostgresServer
from replicas import running_replicas, until
from sqlalchemy import inspect, select, text
from typer.testing import CliRunner

from tribal_memory.base.config import Settings
from tribal_memory.base.db import (
    SharedLock,
    _alembic_config,
    current_revision,
    head_revision,
    make_engine,
    migrate,
)
from tribal_memory.base.errors import StoreUnavailable
from tribal_memory.base.models import MemoryInput, MemoryPatch, SearchFilters
from tribal_memory.base.sql import read_generation
from tribal_memory.base.tables import Base, QueryCacheRow
from tribal_memory.bench.server_process import child_env, free_port
from tribal_memory.embeddings.fastembed import FastEmbedEmbedder
from tribal_memory.interfaces import cli
from tribal_memory.ops.backup import create_backup
from tribal_memory.service.memory_service import MemoryService

FACTS = (
    "We chose PostgreSQL for the billing database",
    "The billing database is backed up nightly at 02:00 UTC",
    "Alice prefers green tea over coffee",
    "The VPN gateway is vpn.example.org",
)
QUERY = "which database does billing use?"
ANN = SearchFilters(owner="ann")

READ_CONSISTENCY_S = 1.0
"""TRIBAL_READ_CONSISTENCY_S of the replicas: the stated bound for LanceDB writes."""
SLACK_S = 3.0
"""Allowance on top of that bound for the HTTP round trips and searches of the poll
on a busy 2-core machine (each poll is a search, tens to hundreds of ms)."""


def _fresh_database(postgres: PostgresServer) -> tuple[str, str]:
    name = f"e_{uuid.uuid4().hex[:16]}"
    return name, postgres.create_database(name)


# -- migrations ---------------------------------------------------------------------------


def test_migrations_upgrade_to_head_on_postgresql(postgres: PostgresServer) -> None:
    name, url = _fresh_database(postgres)
    engine = make_engine(url)
    try:
        assert engine.dialect.name == "postgresql" and engine.dialect.driver == "psycopg"
        assert current_revision(engine) is None
        assert migrate(engine) == head_revision()
        assert migrate(engine) == head_revision()  # idempotent
        assert set(Base.metadata.tables) <= set(inspect(engine).get_table_names())
        with engine.connect() as connection:
            assert compare_metadata(MigrationContext.configure(connection), Base.metadata) == []
            assert connection.execute(text("SHOW timezone")).scalar() == "UTC"
        # All the way down and up again: every migration is reversible on PostgreSQL too.
        config = _alembic_config(engine)
        with engine.begin() as connection:
            config.attributes["connection"] = connection
            command.downgrade(config, "base")
        assert current_revision(engine) is None
        assert set(inspect(engine).get_table_names()) <= {"alembic_version"}
        assert migrate(engine) == head_revision()
    finally:
        engine.dispose()
        postgres.drop_database(name)


def test_generation_triggers_count_every_change(postgres_url: str) -> None:
    engine = make_engine(postgres_url)
    try:
        with engine.begin() as connection:
            for owner, key in (("ann", "a"), ("ann", "b"), ("bob", "a")):
                connection.execute(
                    QueryCacheRow.__table__.insert().values(
                        owner=owner,
                        query_key=key,
                        query_text=key,
                        memory_ids=[],
                        hits=[],
                        success_count=0,
                        failure_count=0,
                    )
                )
            connection.execute(text("UPDATE query_cache SET success_count = 1 WHERE owner = 'ann'"))
            connection.execute(text("DELETE FROM query_cache WHERE owner = 'bob'"))
            connection.execute(
                text("INSERT INTO fact_anchors VALUES ('m', 'o', 'q', 'manual', 1.0, now(), 0)")
            )
        from sqlalchemy.orm import Session

        with Session(engine) as session:
            # ann: 2 inserts + 2 updates (each counts its old and new owner); bob: insert + delete
            assert read_generation(session, "query_cache:ann") == 6
            assert read_generation(session, "query_cache:bob") == 2
            assert read_generation(session, "fact_anchors") == 1
            assert read_generation(session, "query_cache:nobody") == 0
    finally:
        engine.dispose()


# -- the service --------------------------------------------------------------------------


@pytest.fixture
def pg_settings(tmp_path: Path, postgres_url: str) -> Settings:
    return Settings(data_dir=tmp_path / "data", database_url=postgres_url)


def _feedback_rounds(service: MemoryService, memory_id: str, rounds: int = 3) -> str:
    retrieval_id = ""
    for _ in range(rounds):
        result = service.recall_with_feedback(QUERY, filters=ANN, k=3)
        assert result.hits[0].memory.memory_id == memory_id
        retrieval_id = result.retrieval_id or ""
        service.record_usage_feedback(retrieval_id, [memory_id])
    return retrieval_id


def test_capture_search_feedback_and_cache_on_postgresql(
    pg_settings: Settings, embedder: FastEmbedEmbedder
) -> None:
    with MemoryService(pg_settings, embedder=embedder) as service:
        assert service.db.engine.dialect.name == "postgresql"
        ids = [
            r.memory.memory_id
            for r in service.capture_batch([MemoryInput(fact, owner="ann") for fact in FACTS])
        ]
        assert service.capture(MemoryInput(FACTS[0], owner="ann")).status == "exists"
        billing = ids[0]
        plain = service.search(QUERY, filters=ANN, k=3)
        assert plain.hits[0].memory.memory_id == billing and not plain.cached

        retrieval_id = _feedback_rounds(service, billing)
        cached = service.search(QUERY, filters=ANN, k=3)
        assert cached.cached and cached.hits[0].memory.memory_id == billing
        again = service.record_usage_feedback(retrieval_id, [billing])
        assert again.duplicate

        # Timestamps come back timezone-aware UTC from timestamptz columns.
        event = service.retrieval(retrieval_id)
        assert event.created_at.utcoffset() == timedelta(0)
        relation = service.relate(billing, ids[1], "supports")
        assert relation.created_at.utcoffset() == timedelta(0)
        anchors = service.anchors(billing)
        assert anchors and anchors[0].active and anchors[0].created_at.utcoffset() == timedelta(0)

        stats = service.retrieval_stats(owner="ann")
        assert stats.overall.with_feedback == 3 and stats.cache_eligible == 1
        assert stats.weights >= 1 and stats.anchors >= 1

        service.pin_variant("ann", "baseline")
        service.pin_variant("ann", "baseline")  # an upsert: the second pin is no conflict
        assert service.variant_for("ann") == "baseline"
        service.pin_variant("ann", None)
        assert service.variant_for("ann") == "learned"

        # Changing the memory drops the cache entry (LIKE over the JSON column cast to
        # text), its weights and anchors, in the same call.
        service.update(billing, MemoryPatch(tags=["db"]))
        assert not service.search(QUERY, filters=ANN, k=3).cached
        assert service.anchors(billing) == []
        with service.db.session() as session:
            assert session.scalars(select(QueryCacheRow)).all() == []
        assert service.check_consistency().ok

        lines = list(service.export_jsonl())
        assert '"learned_generations"' not in "".join(lines)


def test_backup_of_a_postgresql_instance_is_a_sqlite_data_dir(
    pg_settings: Settings, embedder: FastEmbedEmbedder, tmp_path: Path
) -> None:
    with MemoryService(pg_settings, embedder=embedder) as service:
        ids = [
            r.memory.memory_id
            for r in service.capture_batch([MemoryInput(fact, owner="ann") for fact in FACTS])
        ]
        _feedback_rounds(service, ids[0])
        service.relate(ids[0], ids[1], "supports")
        report = create_backup(pg_settings, tmp_path / "backup")
    assert report.memories == len(FACTS) and report.pruned_rows == 0
    restored = Settings(data_dir=tmp_path / "backup", database_url=None)  # SQLite
    with MemoryService(restored, embedder=embedder) as copy:
        assert copy.db.engine.dialect.name == "sqlite"
        assert copy.check_consistency().ok
        assert copy.search(QUERY, filters=ANN, k=3).cached  # the query cache came along
        assert [r.target_id for r in copy.relations(ids[0])] == [ids[1]]
        assert copy.retrieval_stats(owner="ann").overall.with_feedback == 3


def test_a_second_process_sees_learned_changes_at_once(
    pg_settings: Settings, embedder: FastEmbedEmbedder
) -> None:
    """Two services on one database (as two replicas): caches follow the other's writes."""
    with (
        MemoryService(pg_settings, embedder=embedder) as a,
        MemoryService(pg_settings, embedder=embedder) as b,
    ):
        ids = [
            r.memory.memory_id
            for r in a.capture_batch([MemoryInput(fact, owner="ann") for fact in FACTS])
        ]
        b.store.refresh()
        assert b.learner.cache.past_queries("ann") is None  # cached: nothing yet
        assert b.learner.anchors.active_count() == 0
        _feedback_rounds(a, ids[0])
        # No waiting: B's in-process indexes notice A's writes at their next read.
        past = b.learner.cache.past_queries("ann")
        assert past is not None and len(past.keys) == 1 and bool(past.eligible[0])
        assert b.learner.anchors.active_count() == 1
        assert b.search(QUERY, filters=ANN, k=3).cached
        a.delete(ids[0])
        assert b.learner.cache.past_queries("ann") is None
        assert b.learner.anchors.active_count() == 0
        assert not b.search(QUERY, filters=ANN, k=3).cached


def test_shared_lock_excludes_other_processes(postgres_url: str) -> None:
    first_engine, second_engine = make_engine(postgres_url), make_engine(postgres_url)
    first = SharedLock(first_engine, "test")
    second = SharedLock(second_engine, "test", timeout_s=0.3)
    try:
        # Re-entrant within a process; exclusive across processes (connections).
        with first, first, pytest.raises(StoreUnavailable, match="held the test lock for over 0.3"):
            second.__enter__()
        with second:  # free again once the first released it
            pass
    finally:
        first_engine.dispose()
        second_engine.dispose()


# -- errors without a server --------------------------------------------------------------


def _closed_port_url() -> str:
    return f"postgresql://ann:s3cret-pw@127.0.0.1:{free_port()}/tribal"


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("this is not a url", "cannot be parsed"),
        ("mysql://ann:s3cret-pw@127.0.0.1/tribal", "is not supported"),
        ("postgresql+asyncpg://ann:s3cret-pw@127.0.0.1/tribal", "is not supported"),
        (None, "cannot migrate the database postgresql+psycopg://ann:***@127.0.0.1:"),
    ],
)
def test_bad_database_urls_are_one_line_without_the_password(
    tmp_path: Path, url: str | None, words: str
) -> None:
    env = {"TRIBAL_DATABASE_URL": url or _closed_port_url(), "TRIBAL_DATA_DIR": str(tmp_path)}
    for args in (["migrate"], ["keys", "list"]):
        result = CliRunner().invoke(cli.app, args, env=env)
        assert result.exit_code == 1, result.output
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and words in lines[0], lines
        assert "s3cret" not in result.output + result.stderr


@pytest.mark.slow
def test_server_start_with_unreachable_postgresql_exits_cleanly(tmp_path: Path) -> None:
    env = child_env({"TRIBAL_DATABASE_URL": _closed_port_url(), "TRIBAL_DATA_DIR": str(tmp_path)})
    for args in (["-m", "tribal_memory.interfaces.api.server"], ["-m", "tribal_memory", "serve"]):
        result = subprocess.run(
            [sys.executable, *args, *(["--port", str(free_port())] if "serve" in args else [])],
            env={**env, "TRIBAL_PORT": str(free_port())},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert result.returncode == 1, result.stdout + result.stderr
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: cannot "), result.stderr
        assert "the database postgresql+psycopg://ann:***@127.0.0.1:" in lines[0]
        assert "Connection refused" in lines[0]
        assert "s3cret" not in result.stdout + result.stderr
        assert "Traceback" not in result.stdout + result.stderr


# -- several replicas -----------------------------------------------------------------------


@pytest.fixture
def replicas(tmp_path: Path, postgres: PostgresServer) -> Iterator[list[httpx.Client]]:
    """Two ``tribal-memory serve`` processes over one new database and one LanceDB dir.

    Both start at once on an empty database and an empty LanceDB directory,
    so they race to migrate and to create the table (the startup lock decides).
    """
    name, url = _fresh_database(postgres)
    env = {
        "TRIBAL_DATABASE_URL": url,
        "TRIBAL_READ_CONSISTENCY_S": str(READ_CONSISTENCY_S),
        "TRIBAL_AUTH": "off",
    }
    try:
        with running_replicas(tmp_path, [tmp_path / "shared"] * 2, env) as clients:
            yield clients
    finally:
        postgres.drop_database(name)


def _search(client: httpx.Client, query: str, **extra: Any) -> dict[str, Any]:
    response = client.post("/v1/search", json={"query": query, "owner": "ann", "k": 5, **extra})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def _hit_ids(body: dict[str, Any]) -> list[str]:
    return [hit["memory_id"] for hit in body["hits"]]


@pytest.mark.slow
def test_replicas_share_writes_feedback_and_deletes(
    replicas: list[httpx.Client], tmp_path: Path, embedder: FastEmbedEmbedder
) -> None:
    a, b = replicas
    bound = READ_CONSISTENCY_S + SLACK_S
    seeded = a.post(
        "/v1/memories/batch", json={"memories": [{"content": f, "owner": "ann"} for f in FACTS]}
    )
    assert seeded.status_code == 200, seeded.text
    billing = seeded.json()["results"][0]["memory"]["memory_id"]
    seen: dict[str, float] = {}
    seen["seed batch on B"] = until(lambda: billing in _hit_ids(_search(b, QUERY)), bound, "seed")

    # A capture on A is found by a search on B within the bound.
    fact = "The staging cluster runs in the Frankfurt region"
    created = a.post("/v1/memories", json={"content": fact, "owner": "ann"})
    assert created.status_code == 201, created.text
    new_id = created.json()["memory"]["memory_id"]
    seen["capture on A, search on B"] = until(
        lambda: new_id in _hit_ids(_search(b, "where does the staging cluster run?")),
        bound,
        "capture on A visible on B",
    )

    # Feedback alternates between the replicas; the cache, weights and anchors it
    # builds are in PostgreSQL, so both answer from them at once (no waiting).
    for n in range(3):
        asked, told = (a, b) if n % 2 == 0 else (b, a)
        found = _search(asked, QUERY, feedback=True)
        assert found["hits"][0]["memory_id"] == billing and not found["cached"]
        fed = told.post(
            "/v1/feedback", json={"retrieval_id": found["retrieval_id"], "used_ids": [billing]}
        )
        assert fed.status_code == 200, fed.text
    for replica in (b, a):
        hit = _search(replica, QUERY)
        assert hit["cached"] and hit["hits"][0]["memory_id"] == billing
        stats = replica.get("/v1/stats/retrieval", params={"owner": "ann"}).json()
        assert stats["overall"]["with_feedback"] == 3
        assert stats["cache_eligible"] == 1 and stats["weights"] >= 1
        anchors = replica.get(f"/v1/memories/{billing}/anchors").json()
        assert [x["text"] for x in anchors["anchors"] if x["active"]] == [QUERY]

    # Concurrent captures of the same content on both replicas make one memory.
    twins = [f"Release train {n} leaves on Thursday" for n in range(4)]
    answers: dict[str, list[dict[str, Any]]] = {"a": [], "b": []}

    def capture(name: str, client: httpx.Client) -> None:
        for content in twins:
            answers[name].append(
                client.post("/v1/memories", json={"content": content, "owner": "ann"}).json()
            )

    threads = [threading.Thread(target=capture, args=p) for p in (("a", a), ("b", b))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    for left, right in zip(answers["a"], answers["b"], strict=True):
        assert left["memory"]["memory_id"] == right["memory"]["memory_id"]
        assert sorted([left["status"], right["status"]]) == ["created", "exists"]

    # A delete on A: the learned data goes at once, the memory within the bound.
    assert a.delete(f"/v1/memories/{billing}").status_code == 204
    assert not _search(b, QUERY)["cached"]
    assert b.get(f"/v1/memories/{billing}/anchors").status_code in (200, 404)
    seen["delete on A, gone on B"] = until(
        lambda: (
            b.get(f"/v1/memories/{billing}").status_code == 404
            and billing not in _hit_ids(_search(b, QUERY))
        ),
        bound,
        "delete on A visible on B",
    )
    stats = [client.get("/v1/stats").json()["memories"] for client in (a, b)]
    assert stats == [len(FACTS) + 1 + len(twins) - 1] * 2

    print(f"\nreplica visibility (bound {READ_CONSISTENCY_S} s + {SLACK_S} s slack):")
    for what, seconds in seen.items():
        print(f"  {what}: {seconds:.2f} s")

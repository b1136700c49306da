"""LanceDB on object storage: two replicas on one PostgreSQL sharing one S3 bucket.

What docs/operations/replicas.md promises for several replicas, checked on an
S3-compatible server instead of a shared directory: two real ``tribal-memory
serve`` processes, each with its own local data dir (as on two machines),
``TRIBAL_LANCEDB_URI=s3://<bucket>/lancedb`` and one PostgreSQL database.

- A capture on one replica is found by a search on the other within the
  consistency window, ``TRIBAL_READ_CONSISTENCY_S`` (1 s here) plus
  :data:`SLACK_S` for the polling searches; a delete is gone within the same.
- Captures, tag updates and deletes from both replicas at once, with both
  replicas' compaction running meanwhile, lose no commit: every write
  answered is there on both (read back, counted, found by a search), and the
  two replicas' ``optimize()`` runs never race each other's commits.

``bench perf --store-uri`` runs, at a tiny size, on the same S3 server.

The S3 server is moto's standalone server (``tests/s3server.py``, from the dev
extra) and PostgreSQL the suite's throwaway server (``tests/pgserver.py``);
without them the tests that need them are skipped, naming what is missing.
"""

from __future__ import annotations

import json
import re
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from pgserver import PostgresServer
from replicas import running_replicas, until
from s3server import S3Server, start_server
from typer.testing import CliRunner

from tribal_memory.interfaces.cli import app

pytestmark = pytest.mark.slow

READ_CONSISTENCY_S = 1.0
"""TRIBAL_READ_CONSISTENCY_S of the replicas: the documented bound for LanceDB writes."""
SLACK_S = 4.0
"""Allowance on top of that bound for the polling searches on a busy 2-core machine
(each is an HTTP search whose LanceDB reads go to the S3 server, tens to hundreds of ms)."""
WRITERS_PER_REPLICA = 2
CAPTURES_PER_WRITER = 12
TAGS = {"tags": ["approved"]}
OPTIMIZE_RACE = re.compile(
    r"(Rewrite|CreateIndex) transaction was preempted"
    r" by concurrent transaction (Rewrite|CreateIndex)"
)
"""LanceDB's message when two ``optimize()`` runs (compaction, index update) commit at once."""


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """An S3-compatible server for the module (skipped, with the reason, without moto)."""
    server, why = start_server(tmp_path_factory.mktemp("s3") / "moto.log")
    if server is None:
        pytest.skip(why)
    try:
        yield server
    finally:
        server.stop()


def _replicas(
    tmp_path: Path, postgres: PostgresServer, s3: S3Server, extra: dict[str, str]
) -> Iterator[tuple[list[httpx.Client], str]]:
    """Two replicas over a new database and a new bucket; yields their clients and the bucket.

    Both start at once on an empty database and an empty bucket, so they race
    to migrate and to create the table (the startup lock decides).
    """
    database = f"s3_{uuid.uuid4().hex[:16]}"
    url = postgres.create_database(database)
    bucket = s3.create_bucket()
    env = {
        **s3.env(),
        "TRIBAL_DATABASE_URL": url,
        "TRIBAL_LANCEDB_URI": f"s3://{bucket}/lancedb",
        "TRIBAL_READ_CONSISTENCY_S": str(READ_CONSISTENCY_S),
        "TRIBAL_AUTH": "off",
        **extra,
    }
    data_dirs = [tmp_path / "data-a", tmp_path / "data-b"]
    try:
        with running_replicas(tmp_path, data_dirs, env) as clients:
            yield clients, bucket
    finally:
        postgres.drop_database(database)
    # The memories went to the bucket, not to either replica's disk.
    assert not any((tmp_path / f"data-{n}" / "lancedb").exists() for n in "ab")


@pytest.fixture
def replicas(
    tmp_path: Path, postgres: PostgresServer, s3: S3Server
) -> Iterator[tuple[list[httpx.Client], str]]:
    """Two replicas with the default settings."""
    yield from _replicas(tmp_path, postgres, s3, {})


@pytest.fixture
def compacting_replicas(
    tmp_path: Path, postgres: PostgresServer, s3: S3Server
) -> Iterator[tuple[list[httpx.Client], str]]:
    """Two replicas whose automatic ``optimize()`` runs every few writes."""
    yield from _replicas(
        tmp_path,
        postgres,
        s3,
        {
            "TRIBAL_OPTIMIZE_EVERY_ROWS": "8",
            "TRIBAL_OPTIMIZE_SMALL_FRAGMENTS": "4",
            "TRIBAL_OPTIMIZE_INTERVAL_S": "0",
        },
    )


def _hit_ids(client: httpx.Client, query: str, k: int = 5) -> list[str]:
    response = client.post("/v1/search", json={"query": query, "owner": "ann", "k": k})
    assert response.status_code == 200, response.text
    return [hit["memory_id"] for hit in response.json()["hits"]]


def _capture(client: httpx.Client, content: str) -> dict[str, Any]:
    response = client.post("/v1/memories", json={"content": content, "owner": "ann"})
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    return body


def test_a_capture_on_one_replica_is_found_on_the_other(
    replicas: tuple[list[httpx.Client], str], s3: S3Server
) -> None:
    (a, b), bucket = replicas
    bound = READ_CONSISTENCY_S + SLACK_S
    seen: dict[str, float] = {}

    staging = _capture(a, "The staging cluster runs in the Frankfurt region")["memory"]
    seen["capture on A, search on B"] = until(
        lambda: staging["memory_id"] in _hit_ids(b, "where does the staging cluster run?"),
        bound,
        "capture on A found on B",
    )
    tea = _capture(b, "Alice prefers green tea over coffee")["memory"]
    seen["capture on B, search on A"] = until(
        lambda: tea["memory_id"] in _hit_ids(a, "what does Alice like to drink?"),
        bound,
        "capture on B found on A",
    )
    # The same content captured again on the other replica is the same memory.
    again = b.post(
        "/v1/memories",
        json={"content": "The staging cluster runs in the Frankfurt region", "owner": "ann"},
    )
    assert again.status_code == 200, again.text
    again = again.json()
    assert again["status"] == "exists" and again["memory"]["memory_id"] == staging["memory_id"]

    assert a.delete(f"/v1/memories/{staging['memory_id']}").status_code == 204
    seen["delete on A, gone on B"] = until(
        lambda: (
            b.get(f"/v1/memories/{staging['memory_id']}").status_code == 404
            and staging["memory_id"] not in _hit_ids(b, "where does the staging cluster run?")
        ),
        bound,
        "delete on A gone on B",
    )
    assert [c.get("/v1/stats").json()["memories"] for c in (a, b)] == [1, 1]
    assert any(key.startswith("lancedb/") for key in s3.object_bytes(bucket))

    print(f"\nobject-store replica visibility (bound {READ_CONSISTENCY_S} s + {SLACK_S} s):")
    for what, seconds in seen.items():
        print(f"  {what}: {seconds:.2f} s")


def test_concurrent_writers_on_both_replicas_lose_no_commit(
    compacting_replicas: tuple[list[httpx.Client], str], tmp_path: Path
) -> None:
    """Captures, tag updates and deletes from both replicas at once, compaction running.

    The replicas optimise one at a time (an advisory lock): LanceDB may reject
    a compaction that loses to the other replica's update or delete, never one
    replica's ``optimize()`` commit racing the other's.
    """
    (a, b), _ = compacting_replicas
    captured: dict[str, str] = {}  # memory id -> content
    tagged: set[str] = set()
    deleted: set[str] = set()
    failures: list[str] = []
    lock = threading.Lock()

    def call(
        client: httpx.Client, method: str, url: str, status: int, body: object = None
    ) -> httpx.Response | None:
        try:
            response = client.request(method, url, json=body)
        except httpx.HTTPError as exc:
            failures.append(f"{method} {url}: {exc!r}")
            return None
        if response.status_code != status:
            failures.append(f"{method} {url}: {response.status_code} {response.text}")
            return None
        return response

    def write(client: httpx.Client, writer: str) -> None:
        ids: list[str] = []
        for n in range(CAPTURES_PER_WRITER):
            content = f"Ticket {writer}-{n}: the {writer} deploy step {n} needs approval"
            made = call(client, "POST", "/v1/memories", 201, {"content": content, "owner": "ann"})
            if made is None:
                continue
            ids.append(made.json()["memory"]["memory_id"])
            with lock:
                captured[ids[-1]] = content
            # Tag this one, delete one written a moment ago: rewrites of fragments
            # that either replica's compaction may be moving at the same time.
            if n % 4 == 1 and call(client, "PATCH", f"/v1/memories/{ids[-1]}", 200, TAGS):
                with lock:
                    tagged.add(ids[-1])
            if n % 4 == 3 and call(client, "DELETE", f"/v1/memories/{ids[-2]}", 204):
                with lock:
                    deleted.add(ids[-2])

    threads = [
        threading.Thread(target=write, args=(client, f"{name}{w}"))
        for name, client in (("a", a), ("b", b))
        for w in range(WRITERS_PER_REPLICA)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert not any(t.is_alive() for t in threads), "writers still running after 300 s"
    assert not failures, failures
    assert len(captured) == 2 * WRITERS_PER_REPLICA * CAPTURES_PER_WRITER
    assert tagged and deleted and not tagged & deleted
    kept = {i: c for i, c in captured.items() if i not in deleted}

    bound = READ_CONSISTENCY_S + SLACK_S
    for client in (a, b):
        until(
            lambda c=client: c.get("/v1/stats").json()["memories"] == len(kept),
            bound,
            "every capture counted, every delete gone",
        )
        for memory_id in deleted:
            assert client.get(f"/v1/memories/{memory_id}").status_code == 404, memory_id
        for memory_id, content in kept.items():
            got = client.get(f"/v1/memories/{memory_id}")
            assert got.status_code == 200, (memory_id, got.text)
            assert got.json()["content"] == content
            assert got.json()["tags"] == (["approved"] if memory_id in tagged else [])
            assert memory_id in _hit_ids(client, content, k=3), content

    logs = [(tmp_path / f"replica-{n}.log").read_text(errors="replace") for n in "ab"]
    assert sum(log.count("store maintenance finished") for log in logs) >= 2
    for log in logs:
        assert not OPTIMIZE_RACE.search(log), OPTIMIZE_RACE.search(log)


def test_bench_perf_measures_a_server_whose_store_is_on_object_storage(
    s3: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bucket = s3.create_bucket()
    for name, value in s3.env().items():  # for the server process and the in-process checks
        monkeypatch.setenv(name, value)
    out = tmp_path / "perf.json"
    args = ["bench", "perf", "--sizes", "300", "--samples", "5", "--warmup", "1"]
    args += ["--capture-n", "20", "--clients", "0", "--feedback-searches", "0"]
    args += ["--cache-dir", str(tmp_path / "cache"), "--out", str(out), "--json"]
    result = CliRunner().invoke(app, [*args, "--store-uri", f"s3://{bucket}/perf"])
    assert result.exit_code == 0, result.output

    report = json.loads(out.read_text())
    assert report["settings"]["store_uri"] == f"s3://{bucket}/perf"
    figures = report["sizes"]["300"]
    assert figures["search_p50_ms"] > 0 and figures["capture_per_s"] > 0
    assert figures["ann_recall_at_10"] == 1.0  # exact search at 300 rows, read from the bucket
    stored = s3.object_bytes(bucket, "perf/data-300/")
    assert any(key.endswith(".lance") for key in stored), sorted(stored)[:5]

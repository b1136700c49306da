"""The HTTP API over a real model, real LanceDB and real SQLite in tmp dirs."""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from litestar import Litestar
from litestar.testing import TestClient
from local import LOCAL_URL

from tribal_memory.base.config import Settings
from tribal_memory.base.errors import EmbeddingError, EmbeddingModelMismatch
from tribal_memory.base.models import MEMORY_FIELDS, memory_id_for
from tribal_memory.embeddings.base import Embedder, Vector
from tribal_memory.embeddings.fastembed import FastEmbedEmbedder
from tribal_memory.interfaces.api import create_app
from tribal_memory.interfaces.api.schemas import HitOut, MemoryOut
from tribal_memory.service.memory_service import MemoryService

JSON = {"content-type": "application/json"}


class HashEmbedder(Embedder):
    """Deterministic 8-d embedder: a text's vector comes from its sha256.

    Content containing ``explode`` raises a RuntimeError (an unexpected bug),
    content containing ``unembeddable`` an EmbeddingError (a known failure).
    """

    model_id = "test/hash-8d"
    dim = 8

    def embed_batch(self, texts: Sequence[str], *, query: bool = False) -> Vector:
        rows = []
        for text in texts:
            if "explode" in text:
                raise RuntimeError("secret-boom from the embedder")
            if "unembeddable" in text:
                raise EmbeddingError("the model cannot embed this")
            digest = hashlib.sha256(text.encode()).digest()[: self.dim]
            rows.append(np.frombuffer(digest, dtype=np.uint8).astype(np.float32) + 1.0)
        matrix = np.asarray(rows, dtype=np.float32).reshape(len(texts), self.dim)
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        normalised: Vector = (matrix / np.maximum(norms, 1e-12)).astype(np.float32)
        return normalised


def _no_traceback(response: httpx.Response) -> None:
    response.read()
    assert "Traceback" not in response.text, response.text


def _client(app: Litestar) -> TestClient[Litestar]:
    client = TestClient(app, base_url=LOCAL_URL)
    client.event_hooks["response"].append(_no_traceback)
    return client


@pytest.fixture
def client(settings: Settings, embedder: FastEmbedEmbedder) -> Iterator[TestClient[Litestar]]:
    """A started app over a fresh data dir, sharing the session's model."""
    with _client(create_app(settings, embedder=embedder)) as test_client:
        yield test_client


@pytest.fixture
def small_client(tmp_path: Path, embedder: FastEmbedEmbedder) -> Iterator[TestClient[Litestar]]:
    """An app with tiny limits, to reach every 413 cheaply."""
    limits = Settings(
        data_dir=tmp_path / "small",
        max_content_chars=100,
        max_batch_size=3,
        max_k=5,
        max_request_bytes=2048,
    )
    with _client(create_app(limits, embedder=embedder)) as test_client:
        yield test_client


@pytest.fixture
def hash_client(settings: Settings) -> Iterator[TestClient[Litestar]]:
    """An app over the deterministic fake embedder (for failure paths)."""
    with _client(create_app(settings, embedder=HashEmbedder())) as test_client:
        yield test_client


def capture(client: TestClient[Litestar], content: str, **fields: Any) -> dict[str, Any]:
    response = client.post("/v1/memories", json={"content": content, **fields})
    assert response.status_code in (200, 201), response.text
    body: dict[str, Any] = response.json()
    return body


def assert_error(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body: dict[str, Any] = response.json()
    assert set(body) == {"error", "detail", "status"}
    assert body["error"] == code
    assert body["status"] == status
    assert isinstance(body["detail"], str) and body["detail"]
    return body


# -- memories -------------------------------------------------------------------


def test_capture_is_idempotent(client: TestClient[Litestar]) -> None:
    first = client.post(
        "/v1/memories",
        json={"content": "Alice's favourite tea is jasmine", "owner": "alice", "tags": ["tea"]},
    )
    assert first.status_code == 201
    created = first.json()
    assert created["status"] == "created"
    assert created["memory"]["owner"] == "alice"
    assert created["memory"]["tags"] == ["tea"]
    assert created["memory"]["kind"] == "fact"
    assert created["near_duplicate_of"] is None

    again = client.post(
        "/v1/memories", json={"content": "Alice's favourite tea is jasmine", "owner": "alice"}
    )
    assert again.status_code == 200
    assert again.json()["status"] == "exists"
    assert again.json()["memory"]["memory_id"] == created["memory"]["memory_id"]
    assert client.get("/v1/stats").json()["memories"] == 1


def test_capture_keeps_optional_fields(client: TestClient[Litestar]) -> None:
    body = capture(
        client,
        "The launch moved to March",
        kind="chunk",
        source="notes/launch.md",
        event_time="2024-02-01T09:30:00+01:00",
        metadata={"page": 3, "draft": True},
    )["memory"]
    assert body["kind"] == "chunk"
    assert body["source"] == "notes/launch.md"
    assert body["event_time"] == "2024-02-01T08:30:00Z"
    assert body["metadata"] == {"page": 3, "draft": True}


def test_near_duplicate_is_reported(client: TestClient[Litestar]) -> None:
    first = capture(client, "The office wifi password is hunter2")
    second = capture(client, "The office wifi password is hunter2.")
    assert second["status"] == "created"
    assert second["near_duplicate_of"] == first["memory"]["memory_id"]
    assert 0.95 <= second["near_duplicate_score"] <= 1.0


def test_batch_capture_can_skip_the_near_duplicate_check(client: TestClient[Litestar]) -> None:
    first = capture(client, "The office wifi password is hunter2")
    body = {
        "memories": [
            {"content": "The office wifi password is hunter2."},
            {"content": "The office wifi password is hunter2"},
        ],
        "near_duplicates": False,
    }
    response = client.post("/v1/memories/batch", json=body)
    assert response.status_code == 200, response.text
    near, repeat = response.json()["results"]
    assert near["status"] == "created" and near["near_duplicate_of"] is None
    assert repeat["status"] == "exists"
    assert repeat["memory"]["memory_id"] == first["memory"]["memory_id"]
    found = client.post("/v1/search", json={"query": "wifi password", "k": 5}).json()["hits"]
    assert {h["memory_id"] for h in found} >= {
        first["memory"]["memory_id"],
        near["memory"]["memory_id"],
    }


def test_concurrent_identical_captures_store_one_memory(client: TestClient[Litestar]) -> None:
    def post(_: int) -> str:
        response = client.post("/v1/memories", json={"content": "Captured by eight agents"})
        status: str = response.json()["status"]
        return status

    with ThreadPoolExecutor(max_workers=8) as pool:
        statuses = list(pool.map(post, range(8)))
    assert client.get("/v1/stats").json()["memories"] == 1
    assert sorted(statuses) == ["created"] + ["exists"] * 7


def test_batch_capture(client: TestClient[Litestar]) -> None:
    items: list[dict[str, Any]] = [
        {"content": "Bob lives in Lyon", "owner": "bob"},
        {"content": "Carol plays the cello", "tags": ["music"]},
        {"content": "Bob lives in Lyon", "owner": "bob"},
    ]
    response = client.post("/v1/memories/batch", json={"memories": items})
    assert response.status_code == 200
    results = response.json()["results"]
    assert [r["status"] for r in results] == ["created", "created", "exists"]
    assert [r["memory"]["content"] for r in results] == [i["content"] for i in items]
    assert results[0]["memory"]["memory_id"] == results[2]["memory"]["memory_id"]
    for result in results:
        fetched = client.get(f"/v1/memories/{result['memory']['memory_id']}")
        assert fetched.status_code == 200

    repeat = client.post("/v1/memories/batch", json={"memories": items[:2]})
    assert [r["status"] for r in repeat.json()["results"]] == ["exists", "exists"]


def test_batch_is_all_or_nothing(client: TestClient[Litestar]) -> None:
    items = [{"content": "A valid memory"}, {"content": "   "}]
    assert_error(client.post("/v1/memories/batch", json={"memories": items}), 400, "invalid_input")
    assert client.get("/v1/stats").json()["memories"] == 0


def test_get_patch_delete(client: TestClient[Litestar]) -> None:
    memory = capture(client, "The deploy key rotates monthly", tags=["ops"])["memory"]
    url = f"/v1/memories/{memory['memory_id']}"

    fetched = client.get(url)
    assert fetched.status_code == 200
    assert fetched.json() == memory

    patched = client.patch(url, json={"content": "The deploy key rotates weekly", "tags": ["sec"]})
    assert patched.status_code == 200
    body = patched.json()
    # New content, new id: the one capture gives the new content (so capturing the
    # old text again stores it anew).
    assert body["memory_id"] == memory_id_for("shared", "The deploy key rotates weekly")
    assert body["content"] == "The deploy key rotates weekly"
    assert body["tags"] == ["sec"]
    assert body["updated_at"] > memory["updated_at"]
    assert_error(client.get(url), 404, "not_found")
    url = f"/v1/memories/{body['memory_id']}"
    assert client.get(url).json()["content"] == "The deploy key rotates weekly"
    hits = client.post("/v1/recall", json={"query": "how often does the deploy key rotate"})
    assert hits.json()["hits"][0]["content"] == "The deploy key rotates weekly"

    deleted = client.delete(url)
    assert deleted.status_code == 204
    assert deleted.content == b""
    assert_error(client.get(url), 404, "not_found")
    assert_error(client.delete(url), 404, "not_found")
    assert_error(client.patch(url, json={"tags": ["x"]}), 404, "not_found")


def test_patch_to_existing_content_conflicts(client: TestClient[Litestar]) -> None:
    capture(client, "Dana prefers mornings")
    other = capture(client, "Dana prefers evenings")["memory"]
    response = client.patch(
        f"/v1/memories/{other['memory_id']}", json={"content": "Dana prefers mornings"}
    )
    assert_error(response, 409, "conflict")


def test_owner_scoping_on_get_and_delete(client: TestClient[Litestar]) -> None:
    memory = capture(client, "Erin's locker code is 4512", owner="erin")["memory"]
    url = f"/v1/memories/{memory['memory_id']}"
    assert_error(client.get(url, params={"owner": "frank"}), 404, "not_found")
    assert_error(client.delete(url, params={"owner": "frank"}), 404, "not_found")
    assert client.get(url, params={"owner": "erin"}).status_code == 200
    assert client.get(url).status_code == 200


# -- retrieval ------------------------------------------------------------------


FACTS = [
    ("Alice is allergic to peanuts", "alice", ["health"]),
    ("Alice's daughter is called Maya", "alice", ["family"]),
    ("Bob drives a red bicycle to work", "bob", ["transport"]),
    ("The team standup is at 9:15 every weekday", "shared", ["work"]),
    ("The staging database runs PostgreSQL 16", "shared", ["work", "infra"]),
]


def _capture_facts(client: TestClient[Litestar]) -> None:
    items = [{"content": c, "owner": o, "tags": t} for c, o, t in FACTS]
    assert client.post("/v1/memories/batch", json={"memories": items}).status_code == 200


def _assert_scores(hits: list[dict[str, Any]]) -> None:
    assert [h["rank"] for h in hits] == list(range(1, len(hits) + 1))
    # Hits come in ranking order; the calibrated score need not fall with it.
    ranking = [h["rank_score"] for h in hits]
    assert ranking == sorted(ranking, reverse=True)
    for hit in hits:
        for key in ("score", "vector_score", "text_score", "rank_score"):
            assert hit[key] is None or 0.0 <= hit[key] <= 1.0, hit
        assert hit["cosine"] is None or -1.0 <= hit["cosine"] <= 1.0, hit


def test_search_falls_back_to_vector_on_a_small_store(client: TestClient[Litestar]) -> None:
    capture(client, "Grace's birthday is on the 3rd of May")
    capture(client, "The printer on floor 2 is out of toner")
    response = client.post("/v1/search", json={"query": "When is Grace's birthday?"})
    assert response.status_code == 200
    body = response.json()
    assert body["fallback"] == "vector"
    assert body["mode"] == "vector"
    assert body["took_ms"] >= 0
    assert body["hits"][0]["content"] == "Grace's birthday is on the 3rd of May"
    _assert_scores(body["hits"])


def test_hybrid_search(client: TestClient[Litestar]) -> None:
    _capture_facts(client)
    body = client.post("/v1/search", json={"query": "which database does staging use"}).json()
    assert body["mode"] == "hybrid"
    assert body["fallback"] is None
    top = body["hits"][0]
    assert top["content"] == "The staging database runs PostgreSQL 16"
    assert top["vector_score"] is not None and top["text_score"] is not None
    assert set(top) >= {"memory_id", "owner", "kind", "tags", "source", "metadata", "created_at"}
    _assert_scores(body["hits"])


def test_search_filters(client: TestClient[Litestar]) -> None:
    _capture_facts(client)
    query = {"query": "what do we know", "k": 10}

    mine = client.post("/v1/search", json={**query, "owner": "alice"}).json()["hits"]
    assert {h["owner"] for h in mine} == {"alice", "shared"}
    assert len(mine) == 4

    only_mine = client.post(
        "/v1/search", json={**query, "owner": "alice", "include_shared": False}
    ).json()["hits"]
    assert {h["owner"] for h in only_mine} == {"alice"}

    tagged = client.post("/v1/search", json={**query, "tags": ["work"]}).json()["hits"]
    assert sorted(h["content"] for h in tagged) == sorted(c for c, _, t in FACTS if "work" in t)

    future = client.post("/v1/search", json={**query, "since": "2999-01-01T00:00:00Z"}).json()
    assert future["hits"] == []
    # Years before 1000 (found by schemathesis: once a 503) bound the search like any other.
    for mode in ("hybrid", "vector"):
        ancient = {**query, "mode": mode, "since": "0999-01-01T00:00:00Z"}
        assert len(client.post("/v1/search", json=ancient).json()["hits"]) == len(FACTS)
        before = {**query, "mode": mode, "until": "0999-01-01T00:00:00Z"}
        assert client.post("/v1/search", json=before).json()["hits"] == []
    text = {"query": "PostgreSQL", "mode": "text", "since": "0999-01-01T00:00:00Z"}
    assert client.post("/v1/search", json=text).json()["hits"]
    edge = client.post("/v1/search", json={**query, "until": "0001-01-01T00:00:00+01:00"})
    assert edge.status_code in (200, 400), edge.text


def test_text_search(client: TestClient[Litestar]) -> None:
    _capture_facts(client)
    body = client.post("/v1/search", json={"query": "PostgreSQL", "mode": "text"}).json()
    assert body["mode"] == "text"
    assert body["hits"][0]["content"] == "The staging database runs PostgreSQL 16"
    assert body["hits"][0]["vector_score"] is None
    _assert_scores(body["hits"])


def test_recall(client: TestClient[Litestar]) -> None:
    _capture_facts(client)
    body = client.post("/v1/recall", json={"query": "what is Alice allergic to?", "k": 2}).json()
    assert body["mode"] == "vector"
    assert len(body["hits"]) == 2
    assert body["hits"][0]["content"] == "Alice is allergic to peanuts"
    top = body["hits"][0]
    assert top["vector_score"] == pytest.approx(max(0.0, top["cosine"]))
    assert top["score"] > body["hits"][1]["score"]
    _assert_scores(body["hits"])

    scoped = client.post("/v1/recall", json={"query": "peanuts", "owner": "bob"}).json()
    assert all(h["owner"] in ("bob", "shared") for h in scoped["hits"])

    miss = client.post("/v1/recall", json={"query": "peanuts", "min_score": 1.0})
    assert miss.status_code == 200
    assert miss.json()["hits"] == []


# -- relations ------------------------------------------------------------------


def test_relations_and_neighbors(client: TestClient[Litestar]) -> None:
    a, b, c = (
        capture(client, text)["memory"]["memory_id"]
        for text in ("Project Falcon started in 2021", "Falcon is led by Ida", "Ida reports to Jo")
    )
    edge = client.post("/v1/relations", json={"source_id": a, "target_id": b, "type": "about"})
    assert edge.status_code == 200
    assert edge.json()["weight"] == 1.0
    reweighted = client.post(
        "/v1/relations", json={"source_id": a, "target_id": b, "type": "about", "weight": 2.5}
    )
    assert reweighted.json()["weight"] == 2.5
    client.post("/v1/relations", json={"source_id": b, "target_id": c, "type": "mentions"})

    relations = client.get(f"/v1/memories/{b}/relations").json()["relations"]
    assert {(r["source_id"], r["target_id"], r["type"]) for r in relations} == {
        (a, b, "about"),
        (b, c, "mentions"),
    }

    near = client.get(f"/v1/memories/{a}/neighbors").json()["neighbors"]
    assert [(n["memory"]["memory_id"], n["steps"]) for n in near] == [(b, 1)]
    assert near[0]["via"]["type"] == "about"
    far = client.get(f"/v1/memories/{a}/neighbors", params={"steps": 2}).json()["neighbors"]
    assert [(n["memory"]["memory_id"], n["steps"]) for n in far] == [(b, 1), (c, 2)]

    by_query = {"source_id": a, "target_id": b, "type": "about"}
    assert client.delete("/v1/relations", params=by_query).status_code == 204
    assert_error(client.delete("/v1/relations", params=by_query), 404, "not_found")
    by_body = {"source_id": b, "target_id": c, "type": "mentions"}
    assert client.request("DELETE", "/v1/relations", json=by_body).status_code == 204
    assert client.get(f"/v1/memories/{b}/relations").json()["relations"] == []
    assert client.get("/v1/stats").json()["relations"] == 0


def test_relation_errors(client: TestClient[Litestar]) -> None:
    a = capture(client, "Kim owns the billing service")["memory"]["memory_id"]
    missing = "00000000-0000-0000-0000-000000000000"
    relate = {"source_id": a, "target_id": missing, "type": "x"}
    assert_error(client.post("/v1/relations", json=relate), 404, "not_found")
    itself = {"source_id": a, "target_id": a, "type": "x"}
    assert_error(client.post("/v1/relations", json=itself), 400, "invalid_input")
    negative = {"source_id": a, "target_id": missing, "type": "x", "weight": -1}
    assert_error(client.post("/v1/relations", json=negative), 400, "invalid_request")
    assert_error(client.delete("/v1/relations"), 400, "invalid_input")
    steps = client.get(f"/v1/memories/{a}/neighbors", params={"steps": 9})
    assert_error(steps, 400, "invalid_input")
    assert_error(client.get(f"/v1/memories/{missing}/relations"), 404, "not_found")


def test_deleting_a_memory_drops_its_relations(client: TestClient[Litestar]) -> None:
    a = capture(client, "Leo wrote the parser")["memory"]["memory_id"]
    b = capture(client, "The parser is in Rust")["memory"]["memory_id"]
    client.post("/v1/relations", json={"source_id": a, "target_id": b, "type": "wrote"})
    assert client.delete(f"/v1/memories/{b}").status_code == 204
    assert client.get(f"/v1/memories/{a}/relations").json()["relations"] == []


# -- stats, health, docs --------------------------------------------------------


def test_stats_and_health(client: TestClient[Litestar], embedder: FastEmbedEmbedder) -> None:
    _capture_facts(client)
    stats = client.get("/v1/stats").json()
    assert stats["memories"] == len(FACTS)
    assert stats["owners"] == {"alice": 2, "bob": 1, "shared": 2}
    assert stats["kinds"] == {"fact": 5}
    assert stats["embedding_model"] == embedder.model_id
    assert stats["embedding_dim"] == 384

    health = client.get("/health")
    assert health.status_code == 200
    assert health.json()["status"] == "ok"
    assert health.json()["embedding_dim"] == 384


def test_openapi_and_offline_swagger_ui(client: TestClient[Litestar]) -> None:
    spec = client.get("/schema/openapi.json")
    assert spec.status_code == 200
    paths = spec.json()["paths"]
    assert {"/v1/memories", "/v1/search", "/v1/recall", "/v1/relations", "/health"} <= set(paths)

    page = client.get("/schema/swagger")
    assert page.status_code == 200
    assets = re.findall(r"""(?:src|href)=["']([^"']+)["']""", page.text)
    assert len(assets) >= 3
    assert not [url for url in assets if re.match(r"(https?:)?//", url)], assets
    for url in assets:
        assert client.get(url).status_code == 200, url
    script = client.get("/schema/static/swagger-ui-bundle.js")
    assert "javascript" in script.headers["content-type"]
    assert "SwaggerUIBundle" in script.text


def test_lifespan_opens_and_closes_the_service(
    settings: Settings, embedder: FastEmbedEmbedder
) -> None:
    app = create_app(settings, embedder=embedder)
    assert "service" not in app.state
    with _client(app) as test_client:
        assert isinstance(app.state["service"], MemoryService)
        assert test_client.get("/health").status_code == 200
    assert "service" not in app.state


# -- errors ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (b'{"content": "unterminated', "malformed JSON"),
        (b"not json at all", "not JSON"),
        (b'{"content": 42}', "wrong type"),
        (b'{"owner": "alice"}', "missing field"),
        (b'{"content": "x", "colour": "red"}', "unknown field"),
        (b'{"content": "x", "kind": "poem"}', "unknown kind"),
        (b'{"content": "x", "event_time": "2024-01-01T10:00:00"}', "naive time"),
        (b'{"content": "x", "tags": "not-a-list"}', "tags not a list"),
        (b'["content"]', "array"),
        (b'{"content": "caf\xe9"}', "latin-1 byte"),
        (b'\xff\xfe{"content": "x"}', "invalid UTF-8"),
    ],
)
def test_bad_bodies_are_400(client: TestClient[Litestar], body: bytes, why: str) -> None:
    response = client.post("/v1/memories", content=body, headers=JSON)
    assert_error(response, 400, "invalid_request")


def test_validation_errors_name_the_field(client: TestClient[Litestar]) -> None:
    response = client.post("/v1/memories/batch", json={"memories": [{"content": 1}]})
    detail = assert_error(response, 400, "invalid_request")["detail"]
    assert "content" in detail and "str" in detail


def test_missing_body_is_400(client: TestClient[Litestar]) -> None:
    detail = assert_error(client.post("/v1/memories", headers=JSON), 400, "invalid_request")
    assert "body is required" in detail["detail"]


def test_search_request_errors(client: TestClient[Litestar]) -> None:
    assert_error(client.post("/v1/search", json={"query": "  "}), 400, "invalid_input")
    assert_error(client.post("/v1/search", json={"query": "x", "k": 0}), 400, "invalid_input")
    assert_error(
        client.post("/v1/search", json={"query": "x", "mode": "magic"}), 400, "invalid_request"
    )
    assert_error(
        client.post("/v1/search", json={"query": "x", "tag": ["a"]}), 400, "invalid_request"
    )
    assert_error(
        client.post("/v1/recall", json={"query": "x", "min_score": 2}), 400, "invalid_request"
    )


def test_empty_content_is_400(client: TestClient[Litestar]) -> None:
    assert_error(client.post("/v1/memories", json={"content": " \n "}), 400, "invalid_input")
    assert_error(
        client.post("/v1/memories", json={"content": "x", "owner": ""}), 400, "invalid_input"
    )


def test_limits_are_413(small_client: TestClient[Litestar]) -> None:
    too_long = small_client.post("/v1/memories", json={"content": "x" * 101})
    assert "100" in assert_error(too_long, 413, "too_large")["detail"]

    batch = {"memories": [{"content": f"fact {i}"} for i in range(4)]}
    assert_error(small_client.post("/v1/memories/batch", json=batch), 413, "too_large")
    assert small_client.get("/v1/stats").json()["memories"] == 0

    assert_error(small_client.post("/v1/search", json={"query": "x", "k": 6}), 413, "too_large")
    assert_error(small_client.post("/v1/recall", json={"query": "x", "k": 6}), 413, "too_large")

    oversize = small_client.post(
        "/v1/memories", content=b" " * 4096 + b'{"content": "x"}', headers=JSON
    )
    assert "2048" in assert_error(oversize, 413, "too_large")["detail"]


def test_oversize_body_without_content_length_is_413(small_client: TestClient[Litestar]) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"content": "'
        for _ in range(10):
            yield b"y" * 512
        yield b'"}'

    response = small_client.post("/v1/memories", content=chunks(), headers=JSON)
    assert_error(response, 413, "too_large")


def test_not_found_and_wrong_method(client: TestClient[Litestar]) -> None:
    assert_error(client.get("/v1/memories/no-such-id"), 404, "not_found")
    assert_error(client.get("/v1/nothing-here"), 404, "not_found")
    assert_error(client.post("/nope", json={}), 404, "not_found")
    assert_error(client.put("/v1/stats"), 405, "method_not_allowed")


def test_unexpected_error_is_a_bare_500(
    hash_client: TestClient[Litestar], caplog: pytest.LogCaptureFixture
) -> None:
    logger = logging.getLogger("tribal_memory.interfaces.api")
    logger.addHandler(caplog.handler)
    try:
        response = hash_client.post("/v1/memories", json={"content": "please explode"})
    finally:
        logger.removeHandler(caplog.handler)
    body = assert_error(response, 500, "internal_error")
    assert body["detail"] == "internal server error"
    assert "secret-boom" not in response.text
    logged = [r for r in caplog.records if r.exc_info]
    assert logged, "the traceback must be logged server-side"
    assert "secret-boom" in caplog.text and "Traceback" in caplog.text


def test_embedding_failure_is_503(hash_client: TestClient[Litestar]) -> None:
    response = hash_client.post("/v1/memories", json={"content": "unembeddable text"})
    assert_error(response, 503, "embedding_unavailable")
    assert hash_client.get("/health").status_code == 200


def test_store_built_with_another_model_is_refused(
    settings: Settings, embedder: FastEmbedEmbedder
) -> None:
    with _client(create_app(settings, embedder=embedder)) as test_client:
        capture(test_client, "Made with MiniLM")

    other = HashEmbedder()
    with pytest.raises(EmbeddingModelMismatch) as direct:
        MemoryService(settings, embedder=other)
    message = str(direct.value)
    assert embedder.model_id in message and other.model_id in message
    assert "384" in message and "8-d" in message

    # Startup failures reach the test client wrapped in an exception group.
    with pytest.raises(BaseException) as started, _client(create_app(settings, embedder=other)):
        pass
    mismatch = _find(started.value, EmbeddingModelMismatch)
    assert embedder.model_id in str(mismatch) and other.model_id in str(mismatch)


def _find(exc: BaseException, kind: type[BaseException]) -> BaseException:
    """The first ``kind`` in an exception, its exception groups and causes."""
    if isinstance(exc, kind):
        return exc
    inner: list[BaseException] = list(getattr(exc, "exceptions", []))
    inner += [e for e in (exc.__cause__, exc.__context__) if e is not None]
    for candidate in inner:
        try:
            return _find(candidate, kind)
        except LookupError:
            continue
    raise LookupError(f"no {kind.__name__} in {exc!r}")


def test_memory_out_is_the_wire_shape_of_memory_and_hits_extend_it() -> None:
    assert MemoryOut.__struct_fields__ == MEMORY_FIELDS
    assert HitOut.__struct_fields__[: len(MEMORY_FIELDS)] == MEMORY_FIELDS

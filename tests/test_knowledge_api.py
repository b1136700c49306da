"""Knowledge management over HTTP: list with paging and filters, clear an owner, search by vector.

Real model, real LanceDB and SQLite in a tmp dir.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from litestar import Litestar
from litestar.testing import TestClient
from local import LOCAL_URL
from sqlalchemy import func, select
from sqlalchemy.orm import Session
from test_api import assert_error, capture

from tribal_memory.base.config import Settings
from tribal_memory.base.tables import (
    FactAnchorRow,
    QueryCacheRow,
    QueryExpansionRow,
    QueryFactWeightRow,
    RetrievalEventRow,
)
from tribal_memory.embeddings.fastembed import FastEmbedEmbedder
from tribal_memory.interfaces.api import create_app
from tribal_memory.service.memory_service import MemoryService

FACTS = (
    ("alice", "fact", "Alice deploys on Mondays", ["ops"]),
    ("alice", "fact", "Alice's laptop is a ThinkPad", []),
    ("alice", "chunk", "The rollback runbook lives in the wiki", ["ops"]),
    ("bob", "fact", "Bob prefers tea", []),
    ("bob", "fact", "Bob is on call this week", ["ops"]),
    ("shared", "fact", "The office opens at eight", []),
    ("shared", "fact", "Standup is at ten", ["ops"]),
)


@pytest.fixture
def client(settings: Settings, embedder: FastEmbedEmbedder) -> Iterator[TestClient[Litestar]]:
    """A started app over a fresh data dir (``max_k`` 50)."""
    settings = settings.model_copy(update={"max_k": 50})
    with TestClient(create_app(settings, embedder=embedder), base_url=LOCAL_URL) as test_client:
        yield test_client


@pytest.fixture
def ids(client: TestClient[Litestar]) -> list[str]:
    """Ids of :data:`FACTS`, in order."""
    return [
        capture(client, text, owner=owner, kind=kind, tags=tags)["memory"]["memory_id"]
        for owner, kind, text, tags in FACTS
    ]


def _pages(client: TestClient[Litestar], **params: Any) -> list[list[str]]:
    pages: list[list[str]] = []
    after = None
    while True:
        query = {**params, **({"after": after} if after else {})}
        response = client.get("/v1/memories", params=query)
        assert response.status_code == 200, response.text
        body = response.json()
        pages.append([m["memory_id"] for m in body["memories"]])
        after = body["next_after"]
        if after is None:
            return pages
        assert after == pages[-1][-1]


def test_list_memories_pages_through_everything(
    client: TestClient[Litestar], ids: list[str]
) -> None:
    pages = _pages(client, limit=3)
    assert [len(p) for p in pages] == [3, 3, 1]
    listed = [i for p in pages for i in p]
    assert listed == sorted(ids)
    assert _pages(client) == [sorted(ids)]
    # Keyset paging: a memory deleted after the first page does not shift the rest.
    first = client.get("/v1/memories", params={"limit": 3}).json()
    gone = pages[1][0]
    assert client.delete(f"/v1/memories/{gone}").status_code == 204
    rest = client.get("/v1/memories", params={"after": first["next_after"], "limit": 10}).json()
    assert [m["memory_id"] for m in rest["memories"]] == [i for i in listed[3:] if i != gone]


def test_list_memories_filters(client: TestClient[Litestar], ids: list[str]) -> None:
    def listed(**params: Any) -> set[str]:
        return {i for p in _pages(client, **params) for i in p}

    assert listed(owner="alice", include_shared=False) == set(ids[:3])
    assert listed(owner="alice") == {*ids[:3], *ids[5:]}
    assert listed(kind="chunk") == {ids[2]}
    assert listed(tag="ops", owner="bob") == {ids[4], ids[6]}
    assert listed(tag=["ops"], kind=["fact"], owner="alice", include_shared=False) == {ids[0]}
    assert listed(until="2000-01-01T00:00:00Z") == set()
    assert listed(since="2000-01-01T00:00:00+02:00") == set(ids)
    for params, status, code in (
        ({"limit": 0}, 400, "invalid_input"),
        ({"limit": 51}, 413, "too_large"),
        ({"since": "2000-01-01T00:00:00"}, 400, "invalid_input"),
        ({"kind": "poem"}, 400, "invalid_request"),
    ):
        assert_error(client.get("/v1/memories", params=params), status, code)


def test_clear_owner(client: TestClient[Litestar], ids: list[str]) -> None:
    service = client.app.state["service"]
    assert isinstance(service, MemoryService)
    body = {"relations": [{"source_id": ids[0], "target_id": ids[5], "type": "x"}]}
    body["relations"].append({"source_id": ids[3], "target_id": ids[5], "type": "x"})
    assert client.post("/v1/relations/batch", json=body).status_code == 200
    document = {"path": "notes/a.md", "owner": "alice", "text": "# A\n\nAlice's notes.\n"}
    assert client.post("/v1/documents", json=document).status_code == 201
    found = client.post("/v1/search", json={"query": "deploy", "owner": "alice", "feedback": True})
    retrieval = found.json()
    feedback = {"retrieval_id": retrieval["retrieval_id"], "used_ids": [ids[0]]}
    assert client.post("/v1/feedback", json=feedback).status_code == 200

    for confirm in ({}, {"confirm": "bob"}, {"confirm": ""}):
        refused = client.delete("/v1/owners/alice", params=confirm)
        assert "confirm" in assert_error(refused, 400, "invalid_input")["detail"]
    assert client.get(f"/v1/memories/{ids[0]}").status_code == 200

    with service.db.session() as session:
        learned_before = _learned_rows_of(session, "alice")
    assert learned_before > 0  # at least the retrieval event and its weights
    cleared = client.delete("/v1/owners/alice", params={"confirm": "alice"})
    assert cleared.status_code == 200, cleared.text
    # the document's section and document summaries are two of the memories
    assert cleared.json() == {
        "owner": "alice",
        "memories": 6,
        "documents": 1,
        "learned_rows": cleared.json()["learned_rows"],
    }
    assert 0 < cleared.json()["learned_rows"] <= learned_before
    with service.db.session() as session:
        assert _learned_rows_of(session, "alice") == 0  # the question "deploy" is gone too
    left = {i for p in _pages(client) for i in p}
    assert left == set(ids[3:])
    assert client.get("/v1/documents", params={"owner": "alice"}).json()["documents"] == []
    assert client.get("/v1/stats").json()["relations"] == 1  # bob's edge to the shared memory
    assert service.check_consistency().ok
    again = client.delete("/v1/owners/alice", params={"confirm": "alice"}).json()
    assert again == {"owner": "alice", "memories": 0, "documents": 0, "learned_rows": 0}
    assert_error(
        client.delete("/v1/owners/*team*", params={"confirm": "*team*"}), 400, "invalid_input"
    )


def test_clearing_needs_the_owners_or_an_admin_key(
    tmp_path: Path, embedder: FastEmbedEmbedder
) -> None:
    settings = Settings(data_dir=tmp_path / "data", auth="required")
    with TestClient(create_app(settings, embedder=embedder), base_url=LOCAL_URL) as client:
        service = client.app.state["service"]
        assert isinstance(service, MemoryService)
        keys = {
            name: {"Authorization": f"Bearer {service.keys.create(name, admin=admin)[1]}"}
            for name, admin in (("alice", False), ("bob", False), ("root", True))
        }
        for owner in ("alice", "bob", "shared"):
            body = {"content": f"A note of {owner}", "owner": owner}
            assert client.post("/v1/memories", json=body, headers=keys["root"]).status_code == 201

        def clear(caller: str, owner: str) -> Any:
            return client.delete(
                f"/v1/owners/{owner}", params={"confirm": owner}, headers=keys[caller]
            )

        assert_error(clear("bob", "alice"), 403, "forbidden")
        assert_error(clear("alice", "shared"), 403, "forbidden")
        assert clear("alice", "alice").json()["memories"] == 1
        assert clear("root", "bob").json()["memories"] == 1
        assert clear("root", "shared").json()["memories"] == 1
        assert service.stats().memories == 0


def test_search_by_vector(
    client: TestClient[Litestar], ids: list[str], embedder: FastEmbedEmbedder
) -> None:
    vector = embedder.embed("Bob prefers tea").tolist()
    response = client.post("/v1/search/vector", json={"vector": vector, "k": 3})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["mode"] == "vector" and len(body["hits"]) == 3
    top = body["hits"][0]
    assert top["memory_id"] == ids[3] and top["score"] == pytest.approx(1.0, abs=1e-3)
    assert top["vector_score"] == top["score"] and top["rank"] == 1
    scores = [h["score"] for h in body["hits"]]
    assert scores == sorted(scores, reverse=True)
    # Any length: only the direction counts. Filters apply as in search.
    longer = [3 * v for v in vector]
    scoped = {"vector": longer, "owner": "alice", "include_shared": False}
    found = client.post("/v1/search/vector", json=scoped).json()["hits"]
    assert {h["memory_id"] for h in found} == set(ids[:3])
    body = {"vector": vector, "min_score": 0.99}
    assert [h["memory_id"] for h in client.post("/v1/search/vector", json=body).json()["hits"]] == [
        ids[3]
    ]
    rel = {"relations": [{"source_id": ids[0], "target_id": ids[1], "type": "x"}]}
    assert client.post("/v1/relations/batch", json=rel).status_code == 200
    near = client.post("/v1/search/vector", json={"vector": vector, "near": ids[0]}).json()
    assert {h["memory_id"] for h in near["hits"]} == {ids[0], ids[1]}

    dim = len(vector)
    for bad, status, code in (
        ({"vector": vector[:-1]}, 400, "invalid_input"),
        ({"vector": [*vector, 0.5]}, 400, "invalid_input"),
        ({"vector": []}, 400, "invalid_input"),
        ({"vector": [0.0] * dim}, 400, "invalid_input"),
        ({"vector": [1e39] * dim}, 400, "invalid_input"),  # over float32: not finite
        ({"vector": ["a"] * dim}, 400, "invalid_request"),
        ({"vector": vector, "k": 0}, 400, "invalid_input"),
        ({"vector": vector, "k": 51}, 413, "too_large"),
        ({"vector": vector, "steps": 2}, 400, "invalid_input"),
        ({"vector": vector, "near": "00000000-0000-0000-0000-000000000000"}, 404, "not_found"),
        ({"query": "tea"}, 400, "invalid_request"),
    ):
        detail = assert_error(client.post("/v1/search/vector", json=bad), status, code)["detail"]
        if bad.get("vector") is not None and len(bad["vector"]) != dim:
            assert str(dim) in detail


def test_openapi_documents_knowledge_routes(client: TestClient[Litestar]) -> None:
    paths = client.get("/schema/openapi.json").json()["paths"]
    assert {"400", "413"} <= set(paths["/v1/memories"]["get"]["responses"])
    assert {"400", "403"} <= set(paths["/v1/owners/{owner}"]["delete"]["responses"])
    assert {"400", "404", "413"} <= set(paths["/v1/search/vector"]["post"]["responses"])


def _learned_rows_of(session: Session, owner: str) -> int:
    """Rows of ``owner`` in the learned tables (events, cache, weights, anchors, expansions)."""
    tables = (
        QueryCacheRow,
        RetrievalEventRow,
        QueryFactWeightRow,
        FactAnchorRow,
        QueryExpansionRow,
    )
    return sum(
        session.scalar(select(func.count()).select_from(t).where(t.owner == owner)) or 0
        for t in tables
    )

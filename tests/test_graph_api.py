"""Constrained graph queries over HTTP: intersection, search near a memory, types and block.

Real model, real LanceDB and SQLite in a tmp dir. The graph of every test::

    C -[about]-> A -[depends_on]-> B -[stored_in]-> D        E (unrelated)

with B a document chunk (kind ``chunk``), the rest facts.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from litestar import Litestar
from litestar.testing import TestClient
from local import LOCAL_URL
from test_api import assert_error, capture

from tribal_memory.base.config import Settings
from tribal_memory.embeddings.fastembed import FastEmbedEmbedder
from tribal_memory.interfaces.api import create_app

TEXTS = {
    "A": "The billing service runs on PostgreSQL",
    "B": "PostgreSQL backups run nightly at 02:00 UTC",
    "C": "The billing team meets on Tuesdays",
    "D": "Backups are stored in the eu-west bucket",
    "E": "Lunch is at noon on Fridays",
}
EDGES = (("C", "A", "about"), ("A", "B", "depends_on"), ("B", "D", "stored_in"))
MISSING = "00000000-0000-0000-0000-000000000000"


@pytest.fixture
def client(settings: Settings, embedder: FastEmbedEmbedder) -> Iterator[TestClient[Litestar]]:
    """A started app over a fresh data dir (BM25 from the first memory)."""
    settings = settings.model_copy(update={"fts_min_rows": 1, "max_batch_size": 20})
    with TestClient(create_app(settings, embedder=embedder), base_url=LOCAL_URL) as test_client:
        yield test_client


@pytest.fixture
def graph(client: TestClient[Litestar]) -> dict[str, str]:
    """Letter -> memory id of the graph above."""
    ids = {
        name: capture(client, text, kind="chunk" if name == "B" else "fact")["memory"]["memory_id"]
        for name, text in TEXTS.items()
    }
    for source, target, type_ in EDGES:
        body = {"source_id": ids[source], "target_id": ids[target], "type": type_}
        assert client.post("/v1/relations", json=body).status_code == 200
    return ids


def _intersection(client: TestClient[Litestar], **params: Any) -> list[tuple[str, list[int]]]:
    response = client.get("/v1/graph/intersection", params=params)
    assert response.status_code == 200, response.text
    return [(m["memory"]["memory_id"], m["steps"]) for m in response.json()["memories"]]


def test_intersection(client: TestClient[Litestar], graph: dict[str, str]) -> None:
    a, b, c, d = (graph[n] for n in "ABCD")
    assert _intersection(client, ids=f"{a},{d}") == [(b, [1, 1])]
    # Two steps: C is 1 from A and 3 from D (out of reach); A and D are given, never listed.
    assert _intersection(client, ids=f"{a},{d}", steps=2) == [(b, [1, 1])]
    # A tie (largest hop count 2, sum 3 for both) is broken by id.
    both = sorted([(a, [1, 2]), (b, [2, 1])])
    assert _intersection(client, ids=f"{c},{d}", steps=2) == both
    assert _intersection(client, ids=f"{c},{d}", steps=2, limit=1) == both[:1]
    assert _intersection(client, ids=f"{c},{b},{d}", steps=3) == [(a, [1, 1, 2])]
    assert _intersection(client, ids=f"{c},{graph['E']}", steps=5) == []


def test_intersection_types_and_block(client: TestClient[Litestar], graph: dict[str, str]) -> None:
    a, b, c, d = (graph[n] for n in "ABCD")
    # Only about/depends_on edges: D is cut off.
    assert _intersection(client, ids=f"{c},{d}", steps=3, types="about,depends_on") == []
    assert _intersection(client, ids=f"{c},{b}", steps=2, types="about, depends_on") == [
        (a, [1, 1])
    ]
    # Blocking a relation type, or the kind of the memory in the middle, cuts the path.
    assert _intersection(client, ids=f"{a},{d}", steps=3, block="stored_in") == []
    assert _intersection(client, ids=f"{a},{d}", steps=3, block="chunk") == []
    assert _intersection(client, ids=f"{a},{d}", steps=3, block="fact") == [(b, [1, 1])]


def test_intersection_never_walks_through_another_owners_memory(
    client: TestClient[Litestar],
) -> None:
    ids = [
        capture(client, text, owner=owner)["memory"]["memory_id"]
        for text, owner in (
            ("Ann's project uses Rust", "ann"),
            ("Bob's private note about Rust", "bob"),
            ("Ann's build takes four minutes", "ann"),
        )
    ]
    for source, target in ((ids[0], ids[1]), (ids[1], ids[2])):
        body = {"source_id": source, "target_id": target, "type": "related"}
        assert client.post("/v1/relations", json=body).status_code == 200
    ends = f"{ids[0]},{ids[2]}"
    assert _intersection(client, ids=ends) == [(ids[1], [1, 1])]  # every owner's view
    assert _intersection(client, ids=ends, steps=3, owner="ann") == []
    hidden = {"ids": f"{ids[0]},{ids[1]}", "owner": "ann"}
    assert_error(client.get("/v1/graph/intersection", params=hidden), 404, "not_found")
    near = {"query": "Rust", "near": ids[0], "steps": 3, "owner": "ann"}
    found = client.post("/v1/search", json=near).json()["hits"]
    assert [h["memory_id"] for h in found] == [ids[0]]


def test_intersection_errors(client: TestClient[Litestar], graph: dict[str, str]) -> None:
    a, d = graph["A"], graph["D"]
    for params in (
        {"ids": a},
        {"ids": f"{a},{a}"},
        {"ids": ",".join([a] * 17)},
        {"ids": f"{a},{d}", "steps": 0},
        {"ids": f"{a},{d}", "steps": 6},
        {"ids": f"{a},{d}", "types": "x" * 65},
        {"ids": f"{a},{d}", "limit": 0},
    ):
        assert_error(client.get("/v1/graph/intersection", params=params), 400, "invalid_input")
    assert_error(client.get("/v1/graph/intersection"), 400, "invalid_request")
    missing = client.get("/v1/graph/intersection", params={"ids": f"{a},{MISSING}"})
    assert_error(missing, 404, "not_found")
    big = client.get("/v1/graph/intersection", params={"ids": f"{a},{d}", "limit": 10_000})
    assert_error(big, 413, "too_large")


def _search(client: TestClient[Litestar], route: str = "/v1/search", **body: Any) -> list[str]:
    response = client.post(route, json=body)
    assert response.status_code == 200, response.text
    return [hit["memory_id"] for hit in response.json()["hits"]]


@pytest.mark.parametrize("mode", ["hybrid", "vector", "text"])
def test_search_near_a_memory(
    client: TestClient[Litestar], graph: dict[str, str], mode: str
) -> None:
    a, b, c, d = (graph[n] for n in "ABCD")
    query = "where are the backups stored"
    everywhere = _search(client, query=query, mode=mode)
    assert d in everywhere
    one = _search(client, query=query, mode=mode, near=a)
    assert set(one) <= {a, b, c} and b in one
    two = _search(client, query=query, mode=mode, near=a, steps=2)
    assert set(two) <= {a, b, c, d} and two[0] == d
    # The constraint memory is part of its own neighbourhood.
    assert a in _search(client, query="billing PostgreSQL", mode=mode, near=a)
    # types and block narrow the walk as they do for the intersection.
    assert d not in _search(client, query=query, mode=mode, near=a, steps=3, block=["chunk"])
    assert set(_search(client, query=query, mode=mode, near=a, steps=3, types=["about"])) <= {
        a,
        c,
    }
    if mode != "hybrid":  # (hybrid normalises over its candidates, which the filter changes)
        # The ranking inside the neighbourhood is the plain search's.
        assert [i for i in everywhere if i in set(two)] == two


def test_recall_near_a_memory(client: TestClient[Litestar], graph: dict[str, str]) -> None:
    a, b, c = (graph[n] for n in "ABC")
    found = _search(client, "/v1/recall", query="backups", near=a, feedback=True)
    assert set(found) <= {a, b, c} and found[0] == b


def test_search_near_errors(client: TestClient[Litestar], graph: dict[str, str]) -> None:
    a = graph["A"]
    assert_error(client.post("/v1/search", json={"query": "x", "near": MISSING}), 404, "not_found")
    for body in (
        {"query": "x", "near": a, "steps": 0},
        {"query": "x", "near": a, "steps": 6},
        {"query": "x", "near": a, "block": [""]},
        {"query": "x", "steps": 2},
        {"query": "x", "types": ["about"]},
    ):
        assert_error(client.post("/v1/search", json=body), 400, "invalid_input")
        assert_error(client.post("/v1/recall", json=body), 400, "invalid_input")
    bad_type = client.post("/v1/search", json={"query": "x", "near": a, "steps": "two"})
    assert_error(bad_type, 400, "invalid_request")


def test_neighbors_types_and_block(client: TestClient[Litestar], graph: dict[str, str]) -> None:
    a, b, c = (graph[n] for n in "ABC")

    def walk(**params: Any) -> list[str]:
        response = client.get(f"/v1/memories/{a}/neighbors", params=params)
        assert response.status_code == 200, response.text
        return [n["memory"]["memory_id"] for n in response.json()["neighbors"]]

    assert set(walk(steps=2)) == {b, c, graph["D"]}
    assert walk(steps=3, types="about") == [c]
    assert walk(steps=3, block="chunk") == [c]
    assert walk(steps=3, block="about,depends_on") == []


def test_openapi_documents_the_graph_routes(client: TestClient[Litestar]) -> None:
    paths = client.get("/schema/openapi.json").json()["paths"]
    intersection = paths["/v1/graph/intersection"]["get"]
    assert {"400", "404", "413"} <= set(intersection["responses"])
    assert {p["name"] for p in intersection["parameters"]} >= {"ids", "steps", "types", "block"}
    search = paths["/v1/search"]["post"]
    assert "404" in search["responses"]


# -- bulk edge writes -------------------------------------------------------------


def _edge(source: str, target: str, type_: str = "related", **more: Any) -> dict[str, Any]:
    return {"source_id": source, "target_id": target, "type": type_, **more}


def _relation_count(client: TestClient[Litestar]) -> int:
    count: int = client.get("/v1/stats").json()["relations"]
    return count


def test_relations_batch(client: TestClient[Litestar], graph: dict[str, str]) -> None:
    a, b, c, d, e = (graph[n] for n in "ABCDE")
    before = _relation_count(client)
    body = {
        "relations": [
            _edge(e, a),
            _edge(a, b, "depends_on", weight=2.5),  # exists: re-weighted
            _edge(e, d, "mentions", weight=0.5),
            _edge(e, a),  # twice in the batch: written once
        ]
    }
    response = client.post("/v1/relations/batch", json=body)
    assert response.status_code == 200, response.text
    stored = response.json()["relations"]
    assert [(r["source_id"], r["target_id"], r["type"], r["weight"]) for r in stored] == [
        (e, a, "related", 1.0),
        (a, b, "depends_on", 2.5),
        (e, d, "mentions", 0.5),
        (e, a, "related", 1.0),
    ]
    assert _relation_count(client) == before + 2
    walked = client.get(f"/v1/memories/{e}/neighbors").json()["neighbors"]
    assert {n["memory"]["memory_id"] for n in walked} == {a, d}
    assert c  # (C stays as it was)


def test_relations_batch_rejects_the_whole_batch(
    client: TestClient[Litestar], graph: dict[str, str]
) -> None:
    a, b, e = graph["A"], graph["B"], graph["E"]
    foreign = capture(client, "Bob keeps the spare keys", owner="bob")["memory"]["memory_id"]
    before = _relation_count(client)

    def rejected(edges: list[dict[str, Any]], status: int, code: str, **params: Any) -> str:
        response = client.post("/v1/relations/batch", json={"relations": edges}, params=params)
        detail: str = assert_error(response, status, code)["detail"]
        assert _relation_count(client) == before
        return detail

    good = _edge(e, a)
    assert "relations[1]" in rejected([good, _edge(a, MISSING)], 404, "not_found")
    assert "relations[2]" in rejected([good, good, _edge(b, b)], 400, "invalid_input")
    assert "relations[1]" in rejected([good, _edge(a, b, " ")], 400, "invalid_input")
    assert "relations[1]" in rejected([good, _edge(a, b, "x" * 65)], 400, "invalid_input")
    assert "relations[1]" in rejected([good, _edge(a, b, weight=-1)], 400, "invalid_request")
    assert "relations[0]" in rejected([_edge(a, foreign), good], 404, "not_found", owner="shared")
    rejected([], 400, "invalid_input")
    rejected([good] * 21, 413, "too_large")
    assert_error(client.post("/v1/relations/batch", json={"edges": []}), 400, "invalid_request")
    paths = client.get("/schema/openapi.json").json()["paths"]
    assert {"400", "404", "413"} <= set(paths["/v1/relations/batch"]["post"]["responses"])

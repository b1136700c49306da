"""Property: graph queries see exactly the graph a key may see, and nothing of the rest.

Random graphs of memories owned by two owners and ``shared`` (facts and
chunks) with random typed edges, some across owners (written by the
service itself, as an admin could). For random walks asked by each owner's
key, over HTTP with ``auth=required``:

- ``GET /v1/graph/intersection`` answers what a reference BFS over the
  caller's visible subgraph answers (same memories, same hop counts, same
  order), or 404 when a given memory is not visible;
- ``POST /v1/search`` with ``near`` (vector mode, ``k`` large) returns
  exactly the start memory and what the reference walk reaches from it;
- ``GET /v1/memories/{id}/neighbors`` returns the reference walk;

and no response ever holds the id or content of another owner's memory,
so a foreign memory is never returned, counted or used as a path.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from litestar.testing import TestClient
from local import LOCAL_URL

from tribal_memory.base.config import Settings
from tribal_memory.base.models import MemoryInput
from tribal_memory.embeddings.fastembed import FastEmbedEmbedder
from tribal_memory.interfaces.api import create_app
from tribal_memory.service.memory_service import MemoryService

CALLERS = ("alice", "bob")
OWNERS = (*CALLERS, "shared")
KINDS = ("fact", "chunk")
TYPES = ("about", "cites", "next")
SIZE = 7

node = st.tuples(st.sampled_from(OWNERS), st.sampled_from(KINDS))
index = st.integers(min_value=0, max_value=SIZE - 1)
edge = st.tuples(index, index, st.sampled_from(TYPES))
names = st.lists(st.sampled_from((*TYPES, *KINDS)), max_size=2, unique=True)
query = st.tuples(
    st.sampled_from(CALLERS),
    st.lists(index, min_size=1, max_size=3, unique=True),
    st.integers(min_value=1, max_value=3),
    st.lists(st.sampled_from(TYPES), max_size=2, unique=True),
    names,
)


def _walk(
    start: int,
    nodes: list[tuple[str, str]],
    edges: set[tuple[int, int, str]],
    caller: str,
    steps: int,
    types: list[str],
    block: list[str],
) -> dict[int, int]:
    """Reference BFS: node -> hop count over the caller's visible, unblocked graph."""
    depth = {start: 0}
    frontier = [start]
    for hop in range(1, steps + 1):
        reached: list[int] = []
        for source, target, type_ in sorted(edges):
            if type_ in block or (types and type_ not in types):
                continue
            for here, other in ((source, target), (target, source)):
                if here in frontier and other not in depth and other not in reached:
                    reached.append(other)
        frontier = []
        for other in reached:
            owner, kind = nodes[other]
            depth[other] = hop  # seen, even when it may not be entered
            if owner in (caller, "shared") and kind not in block:
                frontier.append(other)
        # Only memories entered count as reached.
        for other in reached:
            if other not in frontier:
                depth[other] = -1
    return {n: d for n, d in depth.items() if d > 0}


def _check_no_foreign(
    response: httpx.Response, caller: str, secrets: dict[str, list[str]], asked: str
) -> None:
    assert response.status_code < 500, response.text
    for owner, texts in secrets.items():
        if owner in (caller, "shared"):
            continue
        for text in texts:
            if text not in asked:
                assert text not in response.text, (caller, text)


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    nodes=st.lists(node, min_size=SIZE, max_size=SIZE),
    edges=st.lists(edge, min_size=6, max_size=14),
    queries=st.lists(query, min_size=4, max_size=8),
)
def test_graph_queries_see_only_the_callers_graph(
    embedder: FastEmbedEmbedder,
    fresh_database: Callable[[], str | None],
    nodes: list[tuple[str, str]],
    edges: list[tuple[int, int, str]],
    queries: list[tuple[str, list[int], int, list[str], list[str]]],
) -> None:
    edge_set = {(s, t, type_) for s, t, type_ in edges if s != t}
    with tempfile.TemporaryDirectory() as tmp:
        settings_ = Settings(
            data_dir=Path(tmp) / "data", database_url=fresh_database(), auth="required"
        )
        with TestClient(base_url=LOCAL_URL, app=create_app(settings_, embedder=embedder)) as client:
            service = client.app.state["service"]
            assert isinstance(service, MemoryService)
            keys = {c: {"Authorization": f"Bearer {service.keys.create(c)[1]}"} for c in CALLERS}
            items = [
                MemoryInput(f"Note number {i} (marker{i:02d})", owner=owner, kind=kind)
                for i, (owner, kind) in enumerate(nodes)
            ]
            ids = [r.memory.memory_id for r in service.capture_batch(items, near_duplicates=False)]
            for source, target, type_ in edge_set:
                service.relate(ids[source], ids[target], type_)
            secrets: dict[str, list[str]] = {}
            for i, (owner, _) in enumerate(nodes):
                secrets.setdefault(owner, []).extend([ids[i], f"marker{i:02d}"])
            position = {memory_id: i for i, memory_id in enumerate(ids)}

            for caller, starts, steps, types, block in queries:
                visible = [nodes[s][0] in (caller, "shared") for s in starts]
                params: dict[str, Any] = {"steps": steps}
                if types:
                    params["types"] = ",".join(types)
                if block:
                    params["block"] = ",".join(block)
                walks = [_walk(s, nodes, edge_set, caller, steps, types, block) for s in starts]

                def get(path: str, params: dict[str, Any], caller: str = caller) -> Any:
                    response = client.get(path, params=params, headers=keys[caller])
                    _check_no_foreign(response, caller, secrets, f"{path} {params}")
                    return response

                # neighbours of the first start
                response = get(f"/v1/memories/{ids[starts[0]]}/neighbors", params)
                if not visible[0]:
                    assert response.status_code == 404
                else:
                    got = {
                        position[n["memory"]["memory_id"]]: n["steps"]
                        for n in response.json()["neighbors"]
                    }
                    assert got == walks[0]

                # search near the first start: exactly its neighbourhood
                body = {"query": "note", "mode": "vector", "k": 50, "near": ids[starts[0]]}
                body |= {"steps": steps, "types": types, "block": block}
                found = client.post("/v1/search", json=body, headers=keys[caller])
                _check_no_foreign(found, caller, secrets, str(body))
                if not visible[0]:
                    assert found.status_code == 404
                else:
                    hits = {position[h["memory_id"]] for h in found.json()["hits"]}
                    assert hits == {starts[0], *walks[0]}

                # intersection of all starts (two or more)
                if len(starts) < 2:
                    continue
                joined = {"ids": ",".join(ids[s] for s in starts), **params}
                response = get("/v1/graph/intersection", joined)
                if not all(visible):
                    assert response.status_code == 404
                    continue
                assert response.status_code == 200, response.text
                common = set.intersection(*(set(w) for w in walks)) - set(starts)
                expected = sorted(
                    (
                        (max(ds), sum(ds), ids[n], ds)
                        for n in common
                        for ds in [[w[n] for w in walks]]
                    ),
                )
                got_list = [
                    (position[m["memory"]["memory_id"]], m["steps"])
                    for m in response.json()["memories"]
                ]
                assert got_list == [(position[i], ds) for _, _, i, ds in expected]

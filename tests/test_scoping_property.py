"""Property: no route ever hands a key another owner's private memory.

Random sequences of operations by three owners (each with its own key) and an
admin run against one app with ``auth=required``: captures (private or
shared), searches and recalls, feedback rounds that fill the query cache,
weights and anchors, manual anchors, relations (one and in batches),
neighbour walks, graph intersections and searches near a memory, reads,
listings, searches by vector, updates, deletes and clearing an owner, the
agent tools (search, get, feedback), the knowledge-graph context, documents
(ingest, list, read by path, search context) and export. After every
response to a non-admin key, no id and no content marker of a memory private
to another owner may appear in it, and every route given such an id answers
404.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from litestar import Litestar
from litestar.testing import TestClient
from local import LOCAL_URL

from tribal_memory.base.config import Settings
from tribal_memory.base.models import SearchFilters
from tribal_memory.embeddings.fastembed import FastEmbedEmbedder
from tribal_memory.interfaces.api import create_app
from tribal_memory.service.memory_service import MemoryService

OWNERS = ("alice", "bob", "carol")
FACTS = (
    "The deploy key lives in the team vault",
    "Lunch is at noon on Fridays",
    "The build server is called atlas",
    "The tea is kept in the blue tin",
)
QUESTIONS = (
    "where is the deploy key",
    "when is lunch",
    "what is the build server called",
    "where is the tea",
)

owner = st.sampled_from(OWNERS)
pick = st.integers(min_value=0, max_value=1_000)
question = st.integers(min_value=0, max_value=len(QUESTIONS) - 1)
operation = st.one_of(
    st.tuples(st.just("capture"), owner, st.integers(0, len(FACTS) - 1), st.booleans()),
    st.tuples(st.just("search"), owner, question, st.sampled_from(["hybrid", "vector", "text"])),
    st.tuples(st.just("train"), owner, question),
    st.tuples(st.just("tools"), owner, question),
    st.tuples(st.just("context"), owner, question),
    st.tuples(st.just("export"), owner),
    st.tuples(st.just("document"), owner, st.integers(0, len(FACTS) - 1), st.booleans()),
    st.tuples(st.just("probe"), owner, pick),
    st.tuples(st.just("relate"), owner, pick, pick),
    st.tuples(st.just("graph"), owner, pick, pick),
    st.tuples(st.just("batch"), owner, pick, pick),
    st.tuples(st.just("list"), owner),
    st.tuples(st.just("vector"), owner, question),
    st.tuples(st.just("clear"), owner, owner),
    st.tuples(st.just("anchor"), owner, pick, question),
    st.tuples(st.just("update"), owner, pick),
    st.tuples(st.just("delete"), owner, pick),
)


@dataclass
class World:
    """The app under test, its keys, and who owns each memory captured so far."""

    client: TestClient[Litestar]
    keys: dict[str, dict[str, str]]
    memories: list[tuple[str, str, str]] = field(default_factory=list)  # id, owner, marker
    captured: int = 0
    documents: list[str] = field(default_factory=list)

    def secrets_of_others(self, caller: str) -> list[str]:
        """Ids and content markers of memories private to owners other than ``caller``."""
        return [
            text
            for memory_id, holder, marker in self.memories
            if holder not in (caller, "shared")
            for text in (memory_id, marker)
        ]

    def call(self, caller: str, method: str, path: str, **kwargs: Any) -> httpx.Response:
        response = self.client.request(method, path, headers=self.keys[caller], **kwargs)
        assert response.status_code < 500, response.text
        asked = f"{path} {kwargs.get('json', '')}"  # an error may name what was asked for
        for secret in self.secrets_of_others(caller):
            if secret not in asked:
                assert secret not in response.text, (caller, method, path, secret)
        return response

    def memory(self, index: int) -> tuple[str, str, str] | None:
        return self.memories[index % len(self.memories)] if self.memories else None

    def visible(self, caller: str, holder: str) -> bool:
        return holder in (caller, "shared")


def _run(world: World, op: tuple[Any, ...]) -> None:
    kind, caller = op[0], op[1]
    if kind == "capture":
        marker = f"marker{world.captured:04d}"
        world.captured += 1
        body = {"content": f"{FACTS[op[2]]} ({marker})"}
        if op[3]:
            body["owner"] = "shared"
        created = world.call(caller, "POST", "/v1/memories", json=body).json()["memory"]
        world.memories.append((created["memory_id"], created["owner"], marker))
    elif kind == "search":
        world.call(caller, "POST", "/v1/search", json={"query": QUESTIONS[op[2]], "mode": op[3]})
        world.call(caller, "POST", "/v1/recall", json={"query": QUESTIONS[op[2]]})
    elif kind == "train":  # enough used feedback for the cache, weights and anchors to act
        for _ in range(4):
            found = world.call(
                caller, "POST", "/v1/search", json={"query": QUESTIONS[op[2]], "feedback": True}
            ).json()
            used = [hit["memory_id"] for hit in found["hits"][:1]]
            world.call(
                caller,
                "POST",
                "/v1/feedback",
                json={"retrieval_id": found["retrieval_id"], "used_ids": used},
            )
        world.call(caller, "GET", "/v1/stats/retrieval")
    elif kind == "tools":  # the OpenClaw memory slot: search, read every path, feedback
        found = world.call(
            caller, "POST", "/v1/tools/memory_search", json={"query": QUESTIONS[op[2]]}
        ).json()
        for result in found["results"]:
            world.call(caller, "POST", "/v1/tools/memory_get", json={"path": result["path"]})
        used = [result["path"] for result in found["results"][:1]]
        body = {"retrievalId": found["retrievalId"], "usedPaths": used}
        world.call(caller, "POST", "/v1/tools/memory_feedback", json=body)
    elif kind == "document":  # a document of the caller (or shared), then every path read back
        marker = f"marker{world.captured:04d}"
        world.captured += 1
        path = f"notes/doc-{world.captured}.md"  # names no marker: its text must not leak
        body = {"path": path, "text": f"# Note\n\n{FACTS[op[2]]} ({marker})\n"}
        if op[3]:
            body["owner"] = "shared"
        created = world.call(caller, "POST", "/v1/documents", json=body)
        if op[3]:  # shared documents need an admin key
            assert created.status_code == 403, created.text
            return
        assert created.status_code == 201, created.text
        holder = created.json()["owner"]
        chunks = world.client.app.state["service"].list_memories(
            SearchFilters(sources=(path,)), limit=10
        )
        world.memories.extend((chunk.memory_id, holder, marker) for chunk in chunks)
        world.documents.append(path)
        world.call(caller, "GET", "/v1/documents")
        for other in world.documents:
            world.call(caller, "POST", "/v1/tools/memory_get", json={"path": other})
        body = {"query": FACTS[op[2]], "context": True}
        assert world.call(caller, "POST", "/v1/search", json=body).status_code == 200
    elif kind == "context":
        body = {"prompt": QUESTIONS[op[2]], "agent_id": caller, "min_score": 0.0}
        world.call(caller, "POST", "/v1/context", json=body)
    elif kind == "export":
        world.call(caller, "GET", "/v1/export")
    elif kind == "list":
        listed = world.call(caller, "GET", "/v1/memories", params={"limit": 200}).json()
        assert all(world.visible(caller, m["owner"]) for m in listed["memories"])
    elif kind == "vector":
        service = world.client.app.state["service"]
        vector = service.embedder.embed(QUESTIONS[op[2]]).tolist()
        world.call(caller, "POST", "/v1/search/vector", json={"vector": vector, "k": 50})
    elif kind == "clear":
        target = op[2]
        response = world.call(caller, "DELETE", f"/v1/owners/{target}?confirm={target}")
        assert response.status_code == (200 if target == caller else 403), response.text
        if target == caller:
            world.memories = [m for m in world.memories if m[1] != caller]
    elif (target := world.memory(op[2])) is not None:
        memory_id, holder, _ = target
        expected = 200 if world.visible(caller, holder) else 404
        if kind == "probe":
            for path in ("", "/relations", "/neighbors?steps=2", "/anchors"):
                response = world.call(caller, "GET", f"/v1/memories/{memory_id}{path}")
                assert response.status_code == expected, (caller, path, response.text)
            body = {"path": f"memory/{memory_id}.md"}
            read = world.call(caller, "POST", "/v1/tools/memory_get", json=body).json()
            assert bool(read["text"]) == (expected == 200)
        elif kind == "relate" and (other := world.memory(op[3])) is not None:
            if other[0] != memory_id:
                body = {"source_id": memory_id, "target_id": other[0], "type": "related"}
                response = world.call(caller, "POST", "/v1/relations", json=body)
                both = world.visible(caller, holder) and world.visible(caller, other[1])
                assert (response.status_code < 300) == both
        elif kind == "graph" and (other := world.memory(op[3])) is not None:
            if other[0] != memory_id:
                both = world.visible(caller, holder) and world.visible(caller, other[1])
                ids = f"{memory_id},{other[0]}"
                response = world.call(caller, "GET", f"/v1/graph/intersection?ids={ids}&steps=3")
                assert response.status_code == (200 if both else 404), response.text
            body = {"query": QUESTIONS[0], "near": memory_id, "steps": 3}
            response = world.call(caller, "POST", "/v1/search", json=body)
            assert response.status_code == expected, response.text
        elif kind == "batch" and (other := world.memory(op[3])) is not None:
            if other[0] != memory_id:
                edges = [{"source_id": memory_id, "target_id": other[0], "type": "related"}]
                response = world.call(
                    caller, "POST", "/v1/relations/batch", json={"relations": edges}
                )
                both = world.visible(caller, holder) and world.visible(caller, other[1])
                assert response.status_code == (200 if both else 404), response.text
        elif kind == "anchor":
            body = {"text": QUESTIONS[op[3]]}
            response = world.call(caller, "POST", f"/v1/memories/{memory_id}/anchors", json=body)
            assert (response.status_code < 300) == (expected == 200)
        elif kind == "update":  # a shared memory changes only with an admin key
            body = {"tags": ["touched"]}
            response = world.call(caller, "PATCH", f"/v1/memories/{memory_id}", json=body)
            assert response.status_code == (403 if holder == "shared" else expected)
        elif kind == "delete":
            response = world.call(caller, "DELETE", f"/v1/memories/{memory_id}")
            deleted = 403 if holder == "shared" else 204
            assert response.status_code == (deleted if expected == 200 else 404)
            if response.status_code == 204:
                world.memories.remove(target)


@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(operations=st.lists(operation, min_size=4, max_size=12))
def test_no_key_ever_sees_another_owners_private_memory(
    embedder: FastEmbedEmbedder,
    fresh_database: Callable[[], str | None],
    operations: list[tuple[Any, ...]],
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        settings_ = Settings(
            data_dir=Path(tmp) / "data",
            database_url=fresh_database(),  # each example its own (None: SQLite in tmp)
            auth="required",
            fts_min_rows=1,
        )
        with TestClient(base_url=LOCAL_URL, app=create_app(settings_, embedder=embedder)) as client:
            service = client.app.state["service"]
            assert isinstance(service, MemoryService)
            keys = {
                name: {"Authorization": f"Bearer {service.keys.create(name)[1]}"} for name in OWNERS
            }
            world = World(client, keys)
            # Seed every owner with private and shared memories so each run has secrets.
            for name in OWNERS:
                _run(world, ("capture", name, OWNERS.index(name), False))
                _run(world, ("capture", name, 3, True))
                _run(world, ("document", name, OWNERS.index(name), False))
            for op in operations:
                _run(world, op)
            for name in OWNERS:  # after all that happened: every read path, every memory
                _run(world, ("search", name, 0, "hybrid"))
                _run(world, ("tools", name, 0))
                for index in range(len(world.memories)):
                    _run(world, ("probe", name, index))
                for path in world.documents:
                    world.call(name, "POST", "/v1/tools/memory_get", json={"path": path})

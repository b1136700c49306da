"""Session feedback: a query linked to what a later search of the same agent task found."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from litestar import Litestar
from litestar.testing import TestClient
from local import LOCAL_URL

from tribal_memory.base.config import Settings
from tribal_memory.embeddings.fastembed import FastEmbedEmbedder
from tribal_memory.interfaces.api import create_app

FACTS = [
    "Priya's daughter started school in Lisbon this autumn",
    "The quarterly report is due on the tenth",
    "The team offsite will be in Porto in June",
    "Priya is allergic to peanuts",
    "The staging database runs on db-stage-2",
]


@pytest.fixture
def client(tmp_path: Path, embedder: FastEmbedEmbedder) -> Iterator[TestClient[Litestar]]:
    settings = Settings(data_dir=tmp_path / "data")
    with TestClient(base_url=LOCAL_URL, app=create_app(settings, embedder=embedder)) as c:
        batch = {"memories": [{"content": f, "owner": "ana"} for f in FACTS]}
        assert c.post("/v1/memories/batch", json=batch).status_code == 200
        yield c


def _search(client: TestClient[Litestar], query: str, **extra: Any) -> dict[str, Any]:
    body = {"query": query, "owner": "ana", "k": 1, "feedback": True, **extra}
    response = client.post("/v1/search", json=body)
    assert response.status_code == 200, response.text
    found: dict[str, Any] = response.json()
    return found


def test_feedback_may_name_what_a_later_search_of_the_session_found(
    client: TestClient[Litestar],
) -> None:
    first = _search(client, "where is the offsite?", session_id="task-1")
    second = _search(
        client, "which city does Priya's daughter go to school in", session_id="task-1"
    )
    found = second["hits"][0]["memory_id"]
    assert found not in [h["memory_id"] for h in first["hits"]]
    linked = client.post(
        "/v1/feedback", json={"retrieval_id": first["retrieval_id"], "used_ids": [found]}
    )
    assert linked.status_code == 200, linked.text
    assert linked.json()["used"] == [found]
    # The first query is now a (pending) anchor of the memory the session found.
    anchors = client.get(f"/v1/memories/{found}/anchors").json()["anchors"]
    assert [a["text"] for a in anchors] == ["where is the offsite?"]


def test_a_memory_no_retrieval_of_the_session_returned_is_400(
    client: TestClient[Litestar],
) -> None:
    first = _search(client, "where is the offsite?", session_id="task-2")
    elsewhere = _search(client, "what is priya allergic to", session_id="task-3")
    alone = _search(client, "when is the quarterly report due")
    stranger = elsewhere["hits"][0]["memory_id"]
    for retrieval in (first, alone):
        response = client.post(
            "/v1/feedback", json={"retrieval_id": retrieval["retrieval_id"], "used_ids": [stranger]}
        )
        assert response.status_code == 400, response.text
        assert response.json()["error"] == "invalid_input"
    # Nothing was recorded: the right feedback still goes in.
    own = first["hits"][0]["memory_id"]
    again = client.post(
        "/v1/feedback", json={"retrieval_id": first["retrieval_id"], "used_ids": [own]}
    )
    assert again.status_code == 200


def test_session_id_is_checked(client: TestClient[Litestar]) -> None:
    plain = client.post(
        "/v1/search", json={"query": "offsite", "owner": "ana", "session_id": "task-4"}
    )
    assert plain.status_code == 400 and "feedback" in plain.json()["detail"]
    long = {"query": "x", "feedback": True, "session_id": "s" * 129}
    assert client.post("/v1/search", json=long).status_code == 400
    assert client.post("/v1/search", json={**long, "session_id": "  "}).status_code == 400


def test_memory_feedback_resolves_paths_of_the_whole_session(
    client: TestClient[Litestar],
) -> None:
    headers = {"x-agent-id": "ana"}
    search = "/v1/tools/memory_search"
    first = client.post(
        search, json={"query": "offsite city", "sessionId": "t", "minScore": 0}, headers=headers
    ).json()
    second = client.post(
        search,
        json={"query": "Priya peanuts allergy", "sessionId": "t", "minScore": 0},
        headers=headers,
    ).json()
    path = second["results"][0]["path"]
    answer = client.post(
        "/v1/tools/memory_feedback",
        json={"retrievalId": first["retrievalId"], "usedPaths": [path]},
        headers=headers,
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["usedPaths"] == [path] and answer.json()["ignoredPaths"] == []

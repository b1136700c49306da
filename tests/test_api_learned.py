"""The learned layer over HTTP: feedback, cache, anchors, variants and retrieval stats.

Real model, real LanceDB and SQLite in tmp dirs, as in ``test_api.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import httpx
import pytest
from litestar import Litestar
from litestar.testing import TestClient
from local import LOCAL_URL

from tribal_memory.base.config import Settings
from tribal_memory.embeddings.fastembed import FastEmbedEmbedder
from tribal_memory.interfaces.api import create_app

OWNER = "agent-a"
FACTS = {
    "db": "The staging database runs PostgreSQL 15 on host db-stage-2",
    "deploy": "Deploys to production happen on Tuesdays and Thursdays after 10am",
    "oncall": "The on-call rotation changes every Monday at 9am",
    "cluster": "Our Kubernetes cluster runs in the eu-west-1 region",
    "frontend": "The frontend is built with React and TypeScript",
    "limits": "API rate limits are 100 requests per minute per token",
}
QUESTION = "when can I ship to prod?"


def _no_traceback(response: httpx.Response) -> None:
    response.read()
    assert "Traceback" not in response.text, response.text


@pytest.fixture
def client(settings: Settings, embedder: FastEmbedEmbedder) -> Iterator[TestClient[Litestar]]:
    """A started app over a fresh data dir, sharing the session's model."""
    with TestClient(base_url=LOCAL_URL, app=create_app(settings, embedder=embedder)) as test_client:
        test_client.event_hooks["response"].append(_no_traceback)
        yield test_client


@pytest.fixture
def ids(client: TestClient[Litestar]) -> dict[str, str]:
    """The six facts of ``OWNER``, captured; ``{name: memory id}``."""
    memories = [{"content": text, "owner": OWNER} for text in FACTS.values()]
    response = client.post("/v1/memories/batch", json={"memories": memories})
    assert response.status_code == 200, response.text
    results = response.json()["results"]
    return {name: r["memory"]["memory_id"] for name, r in zip(FACTS, results, strict=True)}


def ask(
    client: TestClient[Litestar], query: str = QUESTION, route: str = "search", **fields: Any
) -> dict[str, Any]:
    body = {"query": query, "owner": OWNER, "k": 3, **fields}
    response = client.post(f"/v1/{route}", json=body)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def send_feedback(
    client: TestClient[Litestar], retrieval_id: str, used: list[str], status: int = 200
) -> dict[str, Any]:
    response = client.post("/v1/feedback", json={"retrieval_id": retrieval_id, "used_ids": used})
    assert response.status_code == status, response.text
    result: dict[str, Any] = response.json()
    return result


def teach(client: TestClient[Litestar], memory_id: str, times: int = 3, **fields: Any) -> None:
    """Ask ``QUESTION`` with feedback ``times`` times, each time reporting ``memory_id`` used."""
    for _ in range(times):
        answer = ask(client, feedback=True, **fields)
        assert memory_id in [hit["memory_id"] for hit in answer["hits"]]
        send_feedback(client, answer["retrieval_id"], [memory_id])


def assert_error(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body: dict[str, Any] = response.json()
    assert set(body) == {"error", "detail", "status"}
    assert (body["error"], body["status"]) == (code, status)
    return body


# -- recall / search --------------------------------------------------------------------


def test_plain_search_reports_neutral_learned_fields(
    client: TestClient[Litestar], ids: dict[str, str]
) -> None:
    answer = ask(client)

    assert answer["variant"] == "learned"  # the default variant, with nothing learned yet
    assert answer["cached"] is False
    assert answer["retrieval_id"] is None
    assert answer["hits"][0]["memory_id"] == ids["deploy"]
    for hit in answer["hits"]:
        assert (hit["cached"], hit["expanded_from"], hit["boost"], hit["anchor_match"]) == (
            False,
            None,
            0.0,
            None,
        )


def test_feedback_fills_the_cache_and_deleting_the_memory_empties_it(
    client: TestClient[Litestar], ids: dict[str, str]
) -> None:
    right = ids["deploy"]
    first = ask(client, route="recall", feedback=True)
    assert first["retrieval_id"] and first["mode"] == "vector"
    assert first["cached"] is False
    outcome = send_feedback(client, first["retrieval_id"], [right])
    assert outcome["used"] == [right]
    assert sorted(outcome["unused"]) == sorted(h["memory_id"] for h in first["hits"][1:])
    assert outcome["duplicate"] is False

    teach(client, right, times=2, route="recall")
    fourth = ask(client, route="recall", feedback=True)

    assert fourth["cached"] is True
    assert fourth["hits"][0]["memory_id"] == right
    assert fourth["hits"][0]["cached"] is True

    assert client.delete(f"/v1/memories/{right}").status_code == 204
    after = ask(client, route="recall")

    assert after["cached"] is False
    assert right not in [hit["memory_id"] for hit in after["hits"]]
    assert all(hit["boost"] <= 0.0 for hit in after["hits"])


def test_feedback_errors(client: TestClient[Litestar], ids: dict[str, str]) -> None:
    answer = ask(client, feedback=True)
    retrieval_id = answer["retrieval_id"]
    returned = [hit["memory_id"] for hit in answer["hits"]]
    outside = next(i for i in ids.values() if i not in returned)

    unknown = client.post("/v1/feedback", json={"retrieval_id": "nope", "used_ids": []})
    assert_error(unknown, 404, "not_found")
    stranger = client.post(
        "/v1/feedback", json={"retrieval_id": retrieval_id, "used_ids": [outside]}
    )
    assert outside in assert_error(stranger, 400, "invalid_input")["detail"]
    other_owner = client.post(
        "/v1/feedback",
        json={"retrieval_id": retrieval_id, "used_ids": [], "owner": "agent-b"},
    )
    assert_error(other_owner, 404, "not_found")

    send_feedback(client, retrieval_id, [returned[0]])
    again = send_feedback(client, retrieval_id, [returned[0]])
    different = client.post(
        "/v1/feedback", json={"retrieval_id": retrieval_id, "used_ids": [returned[1]]}
    )

    assert again["duplicate"] is True
    assert again["used"] == [returned[0]]
    assert_error(different, 409, "conflict")
    missing_ids = client.post("/v1/feedback", json={"retrieval_id": retrieval_id})
    assert_error(missing_ids, 400, "invalid_request")


def test_feedback_with_nothing_used(client: TestClient[Litestar], ids: dict[str, str]) -> None:
    answer = ask(client, feedback=True)

    outcome = send_feedback(client, answer["retrieval_id"], [])
    again = send_feedback(client, answer["retrieval_id"], [])

    assert outcome["used"] == []
    assert len(outcome["unused"]) == len(answer["hits"])
    assert again["duplicate"] is True


# -- anchors ----------------------------------------------------------------------------


def test_anchor_round_trip(client: TestClient[Litestar], ids: dict[str, str]) -> None:
    memory_id = ids["limits"]
    route = f"/v1/memories/{memory_id}/anchors"

    assert client.get(route).json() == {"anchors": []}
    created = client.post(route, json={"text": "how fast may I call the API?"})
    listed = client.get(route, params={"owner": OWNER}).json()["anchors"]
    memory = client.get(f"/v1/memories/{memory_id}").json()

    assert created.status_code == 201, created.text
    anchor = created.json()
    assert set(anchor) == {
        "memory_id",
        "text",
        "source",
        "confidence",
        "uses",
        "active",
        "created_at",
        "owner",
    }
    assert anchor["memory_id"] == memory_id
    assert (anchor["source"], anchor["confidence"], anchor["active"]) == ("manual", 1.0, True)
    assert listed == [anchor]
    assert "anchor_text" not in memory  # anchors live beside the memory, per owner

    removed = client.delete(route, params={"text": "how fast may I call the API?"})
    assert removed.status_code == 204
    assert client.get(route).json() == {"anchors": []}
    assert_error(client.delete(route, params={"text": "how fast"}), 404, "not_found")


def test_anchor_errors(client: TestClient[Litestar], ids: dict[str, str]) -> None:
    route = f"/v1/memories/{ids['limits']}/anchors"

    assert_error(client.get("/v1/memories/no-such-id/anchors"), 404, "not_found")
    missing = client.post("/v1/memories/no-such-id/anchors", json={"text": "a question"})
    assert_error(missing, 404, "not_found")
    assert_error(client.post(route, json={"text": "   "}), 400, "invalid_input")
    assert_error(client.post(route, json={"text": "x", "extra": 1}), 400, "invalid_request")
    other_owner = client.post(route, params={"owner": "agent-b"}, json={"text": "a question"})
    assert_error(other_owner, 404, "not_found")
    assert_error(client.get(route, params={"owner": "agent-b"}), 404, "not_found")
    assert_error(client.delete(route), 400, "invalid_request")  # no ?text=


def test_manual_anchor_lifts_its_memory_to_the_top(
    client: TestClient[Litestar], ids: dict[str, str]
) -> None:
    query = "what is project codename bluebird?"
    before = ask(client, query, k=6)
    assert before["hits"][0]["memory_id"] != ids["limits"]

    # Shares every content word with the question, none with the memory's text.
    anchor = {"text": "Which project is codenamed Bluebird?"}
    response = client.post(f"/v1/memories/{ids['limits']}/anchors", json=anchor)
    assert response.status_code == 201, response.text
    after = ask(client, query, k=6)
    plain = ask(client, query, k=6, learned=[])

    top = after["hits"][0]
    assert top["memory_id"] == ids["limits"]
    assert top["anchor_match"] is not None and top["anchor_match"] > 0.0
    assert plain["hits"][0]["memory_id"] != ids["limits"]
    assert all(hit["anchor_match"] is None for hit in plain["hits"])


# -- variants ---------------------------------------------------------------------------


def test_variant_routes(client: TestClient[Litestar]) -> None:
    route = f"/v1/variants/{OWNER}"

    assert client.get(route).json() == {"owner": OWNER, "variant": "learned"}
    pinned = client.put(route, json={"variant": "baseline"})
    assert pinned.status_code == 200
    assert pinned.json() == {"owner": OWNER, "variant": "baseline"}
    assert client.get(route).json()["variant"] == "baseline"
    assert client.get("/v1/variants/agent-b").json()["variant"] == "learned"

    assert client.delete(route).status_code == 204
    assert client.get(route).json()["variant"] == "learned"
    assert client.delete(route).status_code == 204  # unpinning twice is fine
    assert_error(client.put(route, json={"variant": "fancy"}), 400, "invalid_request")
    assert_error(client.put("/v1/variants/%20", json={"variant": "learned"}), 400, "invalid_input")


def test_pinned_baseline_ignores_what_was_learned(
    client: TestClient[Litestar], ids: dict[str, str]
) -> None:
    right = ids["deploy"]
    client.put(f"/v1/variants/{OWNER}", json={"variant": "baseline"})

    teach(client, right)
    baseline = ask(client, feedback=True)

    assert baseline["variant"] == "baseline"
    assert baseline["cached"] is False
    assert all(hit["boost"] == 0.0 and hit["anchor_match"] is None for hit in baseline["hits"])
    assert all(hit["expanded_from"] is None for hit in baseline["hits"])

    client.delete(f"/v1/variants/{OWNER}")
    learned = ask(client)
    assert learned["variant"] == "learned"
    assert learned["cached"] is True  # the feedback was recorded all the same


def test_learned_parts_per_request(client: TestClient[Litestar], ids: dict[str, str]) -> None:
    right = ids["deploy"]
    teach(client, right)

    plain = ask(client, learned=[])
    boosts_only = ask(client, learned=["feedback"])
    cache_only = ask(client, learned=["cache"])

    assert plain["variant"] == "baseline"
    assert plain["cached"] is False
    assert all(hit["boost"] == 0.0 and hit["anchor_match"] is None for hit in plain["hits"])
    assert boosts_only["variant"] == "learned"
    assert boosts_only["cached"] is False
    assert boosts_only["hits"][0]["memory_id"] == right
    assert boosts_only["hits"][0]["boost"] > 0.0
    assert cache_only["cached"] is True

    unknown = client.post("/v1/search", json={"query": QUESTION, "learned": ["magic"]})
    assert "magic" in assert_error(unknown, 400, "invalid_input")["detail"]


def test_cache_respects_include_shared(client: TestClient[Litestar], ids: dict[str, str]) -> None:
    shared = client.post("/v1/memories", json={"content": "Production deploys need a CAB ticket"})
    shared_id = shared.json()["memory"]["memory_id"]
    teach(client, shared_id)

    own_only = ask(client, include_shared=False)

    assert shared_id not in [hit["memory_id"] for hit in own_only["hits"]]


# -- stats ------------------------------------------------------------------------------


def test_retrieval_stats(client: TestClient[Litestar], ids: dict[str, str]) -> None:
    used = ask(client, feedback=True)
    send_feedback(client, used["retrieval_id"], [ids["deploy"]])
    useless = ask(client, "who rotates the on-call pager?", feedback=True)
    send_feedback(client, useless["retrieval_id"], [])
    ask(client, "which region is the cluster in?", feedback=True)  # no feedback
    ask(client, "what does the frontend use?")  # not logged

    response = client.get("/v1/stats/retrieval", params={"owner": OWNER})
    assert response.status_code == 200, response.text
    stats = response.json()

    assert set(stats) == {
        "overall",
        "variants",
        "expansion_lift",
        "expanded_hits",
        "learning_curve",
        "cache_entries",
        "cache_eligible",
        "weights",
        "anchors",
        "llm_calls",
        "llm_failures",
        "counters",
    }
    overall = stats["overall"]
    assert (overall["retrievals"], overall["with_feedback"], overall["cache_hits"]) == (3, 2, 0)
    assert overall["usage_rate"] == pytest.approx(0.5)
    assert overall["retrieval_to_usage"] == pytest.approx(1 / 6)  # 1 of 3 + 3 hits
    assert overall["cache_hit_rate"] == 0.0
    assert stats["variants"] == {"learned": overall}
    (point,) = stats["learning_curve"]
    assert point == {"period": datetime.now(UTC).date().isoformat(), **overall}
    assert (stats["cache_entries"], stats["cache_eligible"]) == (2, 0)
    assert stats["weights"] == 6  # 3 hits in each of the two retrievals with feedback
    assert stats["anchors"] == 1  # pending: used once
    assert stats["expansion_lift"] is None and stats["expanded_hits"] == 0

    nobody = client.get("/v1/stats/retrieval", params={"owner": "agent-b"}).json()
    assert nobody["overall"]["retrievals"] == 0
    assert nobody["learning_curve"] == []


def test_retrieval_stats_buckets_and_since(
    client: TestClient[Litestar], ids: dict[str, str]
) -> None:
    ask(client, feedback=True)
    now = datetime.now(UTC)
    monday = (now.date() - timedelta(days=now.weekday())).isoformat()
    five_minutes_ago_east = (now - timedelta(minutes=5)).astimezone(timezone(timedelta(hours=5)))

    def stats(**params: str) -> dict[str, Any]:
        response = client.get("/v1/stats/retrieval", params=params)
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        return body

    assert stats(bucket="week")["learning_curve"][0]["period"] == monday
    assert stats(since=five_minutes_ago_east.isoformat())["overall"]["retrievals"] == 1
    later = (now + timedelta(hours=1)).isoformat()
    assert stats(since=later)["overall"]["retrievals"] == 0

    bad_bucket = client.get("/v1/stats/retrieval", params={"bucket": "month"})
    assert_error(bad_bucket, 400, "invalid_request")
    naive = client.get("/v1/stats/retrieval", params={"since": "2026-01-01T00:00:00"})
    assert_error(naive, 400, "invalid_input")


def test_openapi_lists_the_learned_routes(client: TestClient[Litestar]) -> None:
    paths = client.get("/schema/openapi.json").json()["paths"]

    assert {
        "/v1/feedback",
        "/v1/memories/{memory_id}/anchors",
        "/v1/variants/{owner}",
        "/v1/stats/retrieval",
    } <= set(paths)
    assert {"404", "400", "409"} <= set(paths["/v1/feedback"]["post"]["responses"])

"""Many threads capturing, updating, deleting, relating, searching and giving feedback at once.

Afterwards no call may have failed unexpectedly (no 5xx over HTTP) and the
store must be consistent: every memory id once in LanceDB, and no relation,
cache entry, query weight or anchor pointing at a missing memory.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator

import httpx
import pytest
from litestar import Litestar
from litestar.testing import TestClient
from local import LOCAL_URL

from tribal_memory.base.config import Settings
from tribal_memory.base.errors import Conflict, NotFound
from tribal_memory.base.models import MemoryInput, MemoryPatch
from tribal_memory.embeddings.fastembed import FastEmbedEmbedder
from tribal_memory.interfaces.api import create_app
from tribal_memory.service.memory_service import MemoryService

RUN_S = 6.0
THREADS = 6
# A small pool of texts, so threads capture the same memory at once and
# delete, update and relate memories another thread is using ...
TOPICS = [f"topic {n}: the {w} stays in the cupboard" for n, w in enumerate("abcdefghijkl")]


def _texts(rng: random.Random) -> list[str]:
    """One text from the shared pool and two almost surely new (so deletions mostly stick)."""
    notes = [f"{rng.choice(TOPICS)} with note {rng.randrange(10**6)}" for _ in range(2)]
    return [rng.choice(TOPICS), *notes]


OWNERS = ("alice", "bob")


ACTIONS = ("capture",) * 3 + ("delete", "update", "relate") + ("search", "feedback") * 2


def _settings(settings: Settings) -> Settings:
    # Feedback turns into anchors and cache entries quickly, so those tables fill up.
    return settings.model_copy(update={"anchor_min_uses": 1, "cache_min_successes": 1})


def _hammer(step: Callable[[random.Random], None], seed: int) -> list[BaseException]:
    """Run ``step`` in THREADS threads for RUN_S seconds; the unexpected errors raised."""
    errors: list[BaseException] = []
    deadline = time.monotonic() + RUN_S

    def loop(n: int) -> None:
        rng = random.Random(seed * 100 + n)
        while time.monotonic() < deadline:
            try:
                step(rng)
            except BaseException as exc:  # noqa: BLE001 - collected and asserted on
                errors.append(exc)
                return

    threads = [threading.Thread(target=loop, args=(n,)) for n in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=RUN_S + 60)
    assert not any(thread.is_alive() for thread in threads)
    return errors


def _service_step(service: MemoryService) -> Callable[[random.Random], None]:
    retrievals: list[tuple[str, list[str]]] = []  # logged, awaiting feedback
    seen: list[str] = []  # every id captured

    def step(rng: random.Random) -> None:
        owner = rng.choice(OWNERS)
        action = rng.choice(ACTIONS)
        if action == "capture" or not seen:
            items = [MemoryInput(content=t, owner=owner) for t in _texts(rng)]
            seen.extend(result.memory.memory_id for result in service.capture_batch(items))
            return
        target, other = rng.choice(seen), rng.choice(seen)
        try:
            if action == "delete":  # maybe among the hits awaiting feedback
                service.delete(target)
            elif action == "update":
                content = f"{rng.choice(TOPICS)} (edited {rng.randrange(3)})"
                service.update(target, MemoryPatch(content=content))
            elif action == "relate" and other != target:
                service.relate(target, other, "see-also")
            elif action == "search":
                result = service.recall_with_feedback(rng.choice(TOPICS), k=6)
                assert result.retrieval_id is not None
                retrievals.append(
                    (result.retrieval_id, [h.memory.memory_id for h in result.hits[:1]])
                )
            elif action == "feedback" and retrievals:
                # Feedback comes later, maybe after another thread deleted a hit.
                retrieval_id, used = retrievals.pop(rng.randrange(len(retrievals)))
                service.record_usage_feedback(retrieval_id, used)
        except (NotFound, Conflict):
            pass  # another thread deleted it, or already holds that content

    return step


@pytest.mark.slow
def test_service_threads_leave_a_consistent_store(
    settings: Settings, embedder: FastEmbedEmbedder
) -> None:
    with MemoryService(_settings(settings), embedder=embedder) as service:
        errors = _hammer(_service_step(service), seed=1)
        assert errors == []
        report = service.check_consistency()
        assert report.ok, report.as_dict()
        assert report.memories == service.stats().memories


@pytest.fixture
def client(settings: Settings, embedder: FastEmbedEmbedder) -> Iterator[TestClient[Litestar]]:
    with TestClient(
        base_url=LOCAL_URL, app=create_app(_settings(settings), embedder=embedder)
    ) as test_client:
        yield test_client


@pytest.mark.slow
def test_http_threads_get_no_5xx_and_leave_a_consistent_store(
    client: TestClient[Litestar],
) -> None:
    unexpected: list[str] = []
    retrievals: list[dict[str, object]] = []  # logged, awaiting feedback
    seen: list[str] = []  # every id captured
    lock = threading.Lock()

    def check(response: httpx.Response, *allowed: int) -> None:
        if response.status_code not in allowed:
            with lock:
                unexpected.append(f"{response.status_code}: {response.text[:300]}")

    def step(rng: random.Random) -> None:
        owner = rng.choice(OWNERS)
        action = rng.choice(ACTIONS)
        with lock:
            target, other = (rng.choice(seen), rng.choice(seen)) if seen else ("", "")
        if action == "capture" or not seen:
            body = {"memories": [{"content": t, "owner": owner} for t in _texts(rng)]}
            captured = client.post("/v1/memories/batch", json=body)
            check(captured, 200)
            if captured.status_code == 200:
                with lock:
                    seen.extend(r["memory"]["memory_id"] for r in captured.json()["results"])
        elif action == "delete":
            check(client.delete(f"/v1/memories/{target}"), 204, 404)
        elif action == "update":
            content = f"{rng.choice(TOPICS)} (edited {rng.randrange(3)})"
            check(client.patch(f"/v1/memories/{target}", json={"content": content}), 200, 404, 409)
        elif action == "relate" and other != target:
            edge = {"source_id": target, "target_id": other, "type": "see-also"}
            check(client.post("/v1/relations", json=edge), 200, 201, 404)
        elif action == "search":
            query = {"query": rng.choice(TOPICS), "k": 6, "feedback": True}
            found = client.post("/v1/search", json=query)
            check(found, 200)
            if found.status_code == 200:
                used = [hit["memory_id"] for hit in found.json()["hits"][:1]]
                with lock:
                    retrievals.append(
                        {"retrieval_id": found.json()["retrieval_id"], "used_ids": used}
                    )
        elif action == "feedback":
            with lock:
                feedback = retrievals.pop(rng.randrange(len(retrievals))) if retrievals else None
            if feedback is not None:
                check(client.post("/v1/feedback", json=feedback), 200)

    errors = _hammer(step, seed=2)
    assert errors == []
    assert unexpected == []
    service: MemoryService = client.app.state["service"]
    report = service.check_consistency()
    assert report.ok, report.as_dict()
    assert report.memories == client.get("/v1/stats").json()["memories"]


FACTS = [
    f"{name} {verb} {thing}"
    for name in ("Ana", "Bo", "Chen", "Dev")
    for verb, thing in (
        ("keeps the release notes in", "the wiki"),
        ("prefers reviewing code in", "the afternoon"),
        ("owns the deploy script for", "project Falcon"),
        ("wrote the onboarding guide about", "the build cache"),
        ("debugged the flaky test in", "the payments service"),
    )
]
QUESTIONS = [
    "Where are the release notes kept?",
    "Who owns the deploy script?",
    "When does Bo review code?",
    "Who wrote the onboarding guide?",
    "Which service had a flaky test?",
    "What does Chen own?",
    "What did Dev debug?",
    "What is project Falcon?",
]


def test_concurrent_searches_answer_as_sequential_ones(client: TestClient[Litestar]) -> None:
    body = {"memories": [{"content": fact, "owner": "team"} for fact in FACTS]}
    assert client.post("/v1/memories/batch", json=body).status_code == 200

    def answer(question: str) -> list[tuple[str, float, float | None]]:
        response = client.post("/v1/search", json={"query": question, "k": 5})
        assert response.status_code == 200, response.text
        return [(h["memory_id"], h["score"], h["cosine"]) for h in response.json()["hits"]]

    sequential = {q: answer(q) for q in QUESTIONS}
    assert all(sequential.values())
    # Sixteen clients at once, each question asked by two of them, started together.
    asked = QUESTIONS * 2
    found: dict[int, list[tuple[str, float, float | None]]] = {}
    start = threading.Barrier(len(asked))

    def ask(i: int) -> None:
        start.wait()
        found[i] = answer(asked[i])

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(len(asked))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert {i: found.get(i) for i in range(len(asked))} == {
        i: sequential[q] for i, q in enumerate(asked)
    }

"""Graph-expanded scores: ``hybrid_expanded`` lifts memories whose related memories match."""

from __future__ import annotations

from pathlib import Path

import pytest
from builders import stored_memory
from litestar.testing import TestClient
from local import LOCAL_URL

from tribal_memory.base.config import Settings
from tribal_memory.base.errors import InvalidInput
from tribal_memory.base.models import Memory, MemoryInput, SearchFilters
from tribal_memory.embeddings.fastembed import FastEmbedEmbedder
from tribal_memory.interfaces.api.app import create_app
from tribal_memory.retrieval.fusion import Candidate
from tribal_memory.retrieval.graph_expansion import graph_expanded, related_in_pool
from tribal_memory.service.memory_service import MemoryService


def _memory(
    memory_id: str,
    *,
    owner: str = "o",
    doc_id: str | None = None,
    parent_id: str | None = None,
    section: int | None = None,
) -> Memory:
    return stored_memory(
        memory_id,
        memory_id,
        owner=owner,
        doc_id=doc_id,
        parent_id=parent_id,
        metadata=None if section is None else {"section": section},
    )


def _candidates(*scored: tuple[Memory, float]) -> list[Candidate]:
    return [Candidate(memory, score) for memory, score in scored]


def test_related_memories_are_relations_heading_parents_and_section_mates() -> None:
    pool = _candidates(
        (_memory("a"), 0.9),
        (_memory("b"), 0.5),
        (_memory("h", doc_id="d", section=1), 0.4),
        (_memory("c1", doc_id="d", parent_id="h", section=2), 0.3),
        (_memory("c2", doc_id="d", parent_id="h", section=2), 0.2),
        (_memory("t1", doc_id="session"), 0.2),
        (_memory("t2", doc_id="session"), 0.1),
        (_memory("x", doc_id="session", owner="other"), 0.1),
    )
    related = related_in_pool(pool, [("a", "b"), ("a", "not-a-candidate")])
    assert related["a"] == {"b"} and related["b"] == {"a"}
    assert related["h"] == {"c1", "c2"}  # its children (another section)
    assert related["c1"] == {"h", "c2"}  # its parent and its section mate
    assert related["t1"] == {"t2"}  # a session's turns; another owner's is not a mate
    assert "x" not in related


def test_a_candidate_gains_its_best_related_score_and_scores_stay_in_unit_range() -> None:
    pool = _candidates((_memory("a"), 1.0), (_memory("c"), 0.5), (_memory("b"), 0.4))
    ranked = graph_expanded(pool, [("a", "b")], 0.3)
    scores = {c.memory.memory_id: c.score for c in ranked}
    assert [c.memory.memory_id for c in ranked] == ["a", "b", "c"]
    assert scores["a"] == pytest.approx(1.0 / 1.3 + 0.3 * 0.4 / 1.3)
    assert scores["b"] == pytest.approx((0.4 + 0.3 * 1.0) / 1.3)
    assert scores["c"] == pytest.approx(0.5 / 1.3)
    assert all(0.0 <= s <= 1.0 for s in scores.values())


def test_weight_zero_leaves_the_ranking_alone() -> None:
    pool = _candidates((_memory("a"), 1.0), (_memory("c"), 0.5), (_memory("b"), 0.4))
    assert [c.memory.memory_id for c in graph_expanded(pool, [("a", "b")], 0.0)] == [
        "a",
        "c",
        "b",
    ]


FACTS = [
    "The payments service runs in eu-west-1 behind the main load balancer.",
    "Its on-call rotation is kept in the team wiki under Operations.",
    "Lunch orders go to the office manager before eleven.",
    "The staging cluster is rebuilt every Sunday night.",
    "Printer toner is in the cupboard next to the kitchen.",
]


@pytest.fixture
def graph_service(tmp_path: Path, embedder: FastEmbedEmbedder) -> MemoryService:
    settings = Settings(data_dir=tmp_path / "data")
    return MemoryService(settings, embedder=embedder)


def test_hybrid_expanded_lifts_what_a_matching_memory_is_related_to(
    graph_service: MemoryService,
) -> None:
    with graph_service as svc:
        captured = svc.capture_batch([MemoryInput(f, owner="ops") for f in FACTS])
        ids = [r.memory.memory_id for r in captured]
        payments, rotation = ids[0], ids[1]
        mine = SearchFilters(owner="ops", include_shared=False)
        query = "where does the payments service run"

        def rank_of(memory_id: str, mode: str) -> int:
            hits = svc.search(query, k=5, filters=mine, mode=mode).hits  # type: ignore[arg-type]
            return next(h.rank for h in hits if h.memory.memory_id == memory_id)

        plain = rank_of(rotation, "hybrid")
        assert rank_of(rotation, "hybrid_expanded") == plain  # no relation yet
        svc.relate(payments, rotation, "describes", owner="ops")
        result = svc.search(query, k=5, filters=mine, mode="hybrid_expanded")
        assert result.mode == "hybrid_expanded"
        assert result.hits[0].memory.memory_id == payments
        assert rank_of(rotation, "hybrid_expanded") == 2 < plain
        assert rank_of(rotation, "hybrid") == plain  # plain hybrid ignores relations


def test_hybrid_expanded_never_returns_another_owners_related_memory(
    graph_service: MemoryService,
) -> None:
    with graph_service as svc:
        captured = svc.capture_batch([MemoryInput(f, owner="ops") for f in FACTS])
        ids = [r.memory.memory_id for r in captured]
        secret = svc.capture(MemoryInput("The payments service secret is hunter2.", owner="eve"))
        svc.relate(ids[0], secret.memory.memory_id, "mentions")  # an admin's edge across owners
        hits = svc.search(
            "payments service",
            k=10,
            filters=SearchFilters(owner="ops", include_shared=False),
            mode="hybrid_expanded",
        ).hits
        assert {h.memory.owner for h in hits} == {"ops"}


def test_an_unknown_mode_is_a_clear_error(graph_service: MemoryService) -> None:
    with graph_service as svc, pytest.raises(InvalidInput, match="hybrid_expanded"):
        svc.search("anything", mode="graph")  # type: ignore[arg-type]


def test_hybrid_expanded_over_http(tmp_path: Path, embedder: FastEmbedEmbedder) -> None:
    app = create_app(Settings(data_dir=tmp_path / "data"), embedder=embedder)
    with TestClient(app, base_url=LOCAL_URL) as client:
        captured = client.post(
            "/v1/memories/batch",
            json={"memories": [{"content": f, "owner": "ops"} for f in FACTS]},
        )
        assert captured.status_code == 200, captured.text
        ok = client.post(
            "/v1/search", json={"query": "payments", "owner": "ops", "mode": "hybrid_expanded"}
        )
        assert ok.status_code == 200, ok.text
        assert ok.json()["mode"] == "hybrid_expanded"
        bad = client.post("/v1/search", json={"query": "payments", "mode": "graph"})
        assert bad.status_code == 400
        assert "mode" in bad.text and "Traceback" not in bad.text

"""MemoryService behaviour over the real model, LanceDB and SQLite."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import select

from tribal_memory import (
    Conflict,
    InvalidInput,
    MemoryInput,
    MemoryPatch,
    MemoryService,
    NotFound,
    SearchFilters,
    TooLarge,
)
from tribal_memory.base.config import Settings
from tribal_memory.base.models import memory_id_for
from tribal_memory.base.tables import FactAnchorRow, QueryCacheRow, QueryFactWeightRow
from tribal_memory.embeddings.fastembed import FastEmbedEmbedder

FACTS = [
    MemoryInput("Alice prefers green tea over coffee", owner="alice", tags=("preference",)),
    MemoryInput(
        "The staging deploy failed because the DNS record expired", owner="shared", tags=("ops",)
    ),
    MemoryInput("Bob's daughter is called Maya and she is seven", owner="bob", tags=("people",)),
    MemoryInput(
        "We decided to use PostgreSQL for the billing service",
        owner="alice",
        tags=("decision",),
        event_time=datetime(2024, 3, 1, tzinfo=UTC),
    ),
]


def test_capture_is_idempotent(service: MemoryService) -> None:
    first = service.capture(FACTS[0])
    again = service.capture(FACTS[0])
    assert first.status == "created"
    assert again.status == "exists"
    assert again.memory.memory_id == first.memory.memory_id
    assert service.stats().memories == 1


def test_batch_capture_reports_duplicates_within_batch(service: MemoryService) -> None:
    results = service.capture_batch([FACTS[0], FACTS[1], FACTS[0]])
    assert [r.status for r in results] == ["created", "created", "exists"]
    assert service.stats().memories == 2


def test_near_duplicate_is_reported_and_stored(service: MemoryService) -> None:
    service.capture(MemoryInput("Alice prefers green tea over coffee.", owner="alice"))
    result = service.capture(MemoryInput("Alice prefers green tea over coffee!", owner="alice"))
    assert result.status == "created"
    assert result.near_duplicate_of is not None
    assert result.near_duplicate_score is not None and result.near_duplicate_score >= 0.95
    assert service.stats().memories == 2


def test_near_duplicate_of_other_owner_is_not_reported(service: MemoryService) -> None:
    service.capture(MemoryInput("Alice prefers green tea over coffee", owner="bob"))
    result = service.capture(MemoryInput("Alice prefers green tea over coffee", owner="carol"))
    assert result.near_duplicate_of is None


def test_invalid_batch_stores_nothing(service: MemoryService) -> None:
    service.capture(FACTS[0])
    with pytest.raises(InvalidInput):
        service.capture_batch([FACTS[1], MemoryInput("   ", owner="alice")])
    assert service.stats().memories == 1


def test_limits_raise_too_large(service: MemoryService) -> None:
    limit = service.settings.max_content_chars
    with pytest.raises(TooLarge):
        service.capture(MemoryInput("x" * (limit + 1)))
    with pytest.raises(TooLarge):
        too_many = service.settings.max_batch_size + 1
        service.capture_batch([MemoryInput(f"fact {i}") for i in range(too_many)])
    with pytest.raises(TooLarge):
        service.search("anything", k=service.settings.max_k + 1)
    with pytest.raises(InvalidInput):
        service.search("anything", k=0)
    with pytest.raises(InvalidInput):
        service.search("   ")


def test_search_finds_fact_and_reports_score_parts(service: MemoryService) -> None:
    service.capture_batch(FACTS)
    result = service.search("what does Alice like to drink?", k=3)
    assert result.mode == "hybrid" and result.fallback is None
    top = result.hits[0]
    assert top.memory.content == FACTS[0].content
    for hit in result.hits:
        assert 0.0 <= hit.score <= 1.0
        assert hit.vector_score is None or 0.0 <= hit.vector_score <= 1.0
        assert hit.text_score is None or 0.0 <= hit.text_score <= 1.0
    assert [h.rank for h in result.hits] == list(range(1, len(result.hits) + 1))
    assert [h.score for h in result.hits] == sorted((h.score for h in result.hits), reverse=True)


def test_search_falls_back_to_vector_on_cold_start(service: MemoryService) -> None:
    service.capture(FACTS[0])
    result = service.search("green tea", k=5)
    assert result.fallback == "vector"
    assert result.mode == "vector"
    assert result.hits[0].memory.content == FACTS[0].content


def test_bm25_carries_rare_names(service: MemoryService) -> None:
    service.capture_batch(FACTS)
    result = service.search("Maya", k=1, mode="text")
    assert result.hits[0].memory.owner == "bob"
    assert result.hits[0].text_score == 1.0


def test_owner_filter_sees_own_and_shared_only(service: MemoryService) -> None:
    service.capture_batch(FACTS)
    result = service.search(
        "daughter deploy tea billing", k=10, filters=SearchFilters(owner="alice")
    )
    owners = {h.memory.owner for h in result.hits}
    assert owners <= {"alice", "shared"}
    assert "shared" in owners
    private = service.search(
        "daughter", k=10, filters=SearchFilters(owner="alice", include_shared=False)
    )
    assert {h.memory.owner for h in private.hits} == {"alice"}


def test_tag_kind_source_and_time_filters(service: MemoryService) -> None:
    service.capture_batch(FACTS)
    tagged = service.search("anything at all", k=10, filters=SearchFilters(tags=("ops", "people")))
    assert {h.memory.owner for h in tagged.hits} == {"shared", "bob"}
    since = service.search(
        "database decision", k=10, filters=SearchFilters(until=datetime(2025, 1, 1, tzinfo=UTC))
    )
    assert [h.memory.content for h in since.hits] == [FACTS[3].content]
    none = service.search("tea", k=10, filters=SearchFilters(kinds=("chunk",)))
    assert none.hits == ()
    with pytest.raises(InvalidInput):
        service.search("tea", filters=SearchFilters(since=datetime(2024, 1, 1)))


def test_recall_scores_are_calibrated_and_min_score_drops_the_rest(
    service: MemoryService,
) -> None:
    service.capture_batch(FACTS)
    query = "Which database did we choose for billing?"
    result = service.recall(query, k=4)
    assert result.mode == "vector"
    top = result.hits[0]
    assert top.memory.content == FACTS[3].content
    assert top.vector_score == pytest.approx(max(0.0, top.cosine or 0.0))
    assert all(0.0 <= h.score <= 1.0 and h.text_score is None for h in result.hits)
    # min_score compares with the calibrated score: the unrelated facts fall away.
    kept = service.recall(query, k=4, min_score=top.score)
    assert [h.memory.content for h in kept.hits] == [FACTS[3].content]
    assert [h.rank for h in kept.hits] == [1]


def test_get_update_delete(service: MemoryService) -> None:
    memory = service.capture(FACTS[0]).memory
    assert service.get(memory.memory_id) == memory
    with pytest.raises(NotFound):
        service.get(memory.memory_id, owner="bob")
    updated = service.update(
        memory.memory_id, MemoryPatch(content="Alice now drinks oolong", tags=("preference", "tea"))
    )
    # New content moves the memory to the id capture gives it; the old id is gone.
    assert updated.memory_id == memory_id_for(memory.owner, "Alice now drinks oolong")
    assert updated.updated_at > memory.updated_at
    with pytest.raises(NotFound):
        service.get(memory.memory_id)
    assert service.search("oolong", k=1, mode="vector").hits[0].memory.content == (
        "Alice now drinks oolong"
    )
    retagged = service.update(updated.memory_id, MemoryPatch(tags=("tea",)))
    assert retagged.memory_id == updated.memory_id and retagged.tags == ("tea",)
    service.delete(updated.memory_id)
    with pytest.raises(NotFound):
        service.get(updated.memory_id)
    with pytest.raises(NotFound):
        service.delete(updated.memory_id)


def test_update_to_existing_content_conflicts(service: MemoryService) -> None:
    a = service.capture(MemoryInput("fact one", owner="alice")).memory
    service.capture(MemoryInput("fact two", owner="alice"))
    with pytest.raises(Conflict):
        service.update(a.memory_id, MemoryPatch(content="fact two"))


def test_relations_and_neighbors(service: MemoryService) -> None:
    a, b, c, d = (r.memory for r in service.capture_batch(FACTS))
    service.relate(a.memory_id, d.memory_id, "same_person")
    service.relate(d.memory_id, b.memory_id, "caused")
    again = service.relate(a.memory_id, d.memory_id, "same_person", weight=2.0)
    assert again.weight == 2.0
    assert service.stats().relations == 2
    one = service.neighbors(a.memory_id)
    assert [n.memory.memory_id for n in one] == [d.memory_id]
    two = service.neighbors(a.memory_id, steps=2)
    assert {(n.memory.memory_id, n.steps) for n in two} == {(d.memory_id, 1), (b.memory_id, 2)}
    assert service.neighbors(c.memory_id) == []
    with pytest.raises(InvalidInput):
        service.relate(a.memory_id, a.memory_id, "self")
    with pytest.raises(NotFound):
        service.relate(a.memory_id, "no-such-id", "x")
    service.unrelate(d.memory_id, b.memory_id, "caused")
    assert service.neighbors(a.memory_id, steps=2) == one


def test_neighbors_hide_other_owners(service: MemoryService) -> None:
    a, _, c, _ = (r.memory for r in service.capture_batch(FACTS))
    service.relate(a.memory_id, c.memory_id, "knows")
    assert service.neighbors(a.memory_id, owner="alice") == []
    assert len(service.neighbors(a.memory_id)) == 1


def test_delete_cascades_to_relations_and_learned_rows(service: MemoryService) -> None:
    a, b, *_ = (r.memory for r in service.capture_batch(FACTS))
    service.relate(a.memory_id, b.memory_id, "related")
    with service.db.session() as session:
        session.add(
            QueryCacheRow(
                owner="alice",
                query_key="drink like",
                query_text="q",
                memory_ids=[a.memory_id, b.memory_id],
            )
        )
        session.add(
            QueryCacheRow(
                owner="alice", query_key="deploy", query_text="q", memory_ids=[b.memory_id]
            )
        )
        session.add(
            QueryFactWeightRow(
                owner="alice", query_key="drink like", memory_id=a.memory_id, weight=0.5
            )
        )
        session.add(
            FactAnchorRow(memory_id=a.memory_id, owner="alice", anchor_text="what does alice drink")
        )
    service.delete(a.memory_id)
    assert service.stats().relations == 0
    with service.db.session() as session:
        assert session.scalars(select(QueryCacheRow.query_key)).all() == ["deploy"]
        assert session.scalars(select(QueryFactWeightRow)).all() == []
        assert session.scalars(select(FactAnchorRow)).all() == []


def test_reopen_keeps_data(settings: Settings, embedder: FastEmbedEmbedder) -> None:
    with MemoryService(settings, embedder=embedder) as first:
        memory = first.capture(FACTS[0]).memory
    with MemoryService(settings, embedder=embedder) as second:
        assert second.get(memory.memory_id).content == FACTS[0].content


def test_optimize_keeps_results(service: MemoryService) -> None:
    service.capture_batch(FACTS)
    before = [h.memory.memory_id for h in service.search("green tea", k=4).hits]
    service.optimize()
    after = [h.memory.memory_id for h in service.search("green tea", k=4).hits]
    assert before == after


def test_second_handle_sees_writes(settings: Settings, embedder: FastEmbedEmbedder) -> None:
    fresh = settings.model_copy(update={"read_consistency_s": 0.0})
    with MemoryService(fresh, embedder=embedder) as reader:
        assert reader.stats().memories == 0
        with MemoryService(fresh, embedder=embedder) as writer:
            memory = writer.capture(FACTS[1]).memory
        assert reader.get(memory.memory_id).content == FACTS[1].content
        assert reader.search("DNS record", k=1, mode="text").hits[0].memory == memory

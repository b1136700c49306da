"""Fusion of vector and BM25 candidates."""

from __future__ import annotations

import pytest
from builders import stored_memory

from tribal_memory.base.models import Memory
from tribal_memory.retrieval.fusion import fuse, fused_candidates, smooth_neighbours, vector_scale
from tribal_memory.store.base import ScoredMemory

A, B, C = (stored_memory(memory_id, memory_id) for memory_id in "abc")


def test_weighted_fusion_normalises_and_combines() -> None:
    hits = fuse(
        [ScoredMemory(A, 0.9), ScoredMemory(B, 0.5)],
        [ScoredMemory(B, 8.0), ScoredMemory(C, 2.0)],
        k=3,
        vector_weight=0.6,
    )
    by_id = {h.memory.memory_id: h for h in hits}
    assert by_id["b"].score == pytest.approx(0.6 * 0.5 + 0.4 * 1.0)
    assert by_id["a"].score == pytest.approx(0.6 * 0.9)
    assert by_id["c"].score == pytest.approx(0.4 * 0.25)
    assert by_id["a"].text_score is None and by_id["c"].vector_score is None
    assert [h.memory.memory_id for h in hits] == ["b", "a", "c"]


def test_rrf_scores_lie_in_unit_range_and_reward_agreement() -> None:
    hits = fuse(
        [ScoredMemory(A, 0.9), ScoredMemory(B, 0.5)],
        [ScoredMemory(B, 8.0), ScoredMemory(A, 2.0)],
        k=2,
        method="rrf",
        rrf_k=60,
    )
    assert all(0.0 < h.score <= 1.0 for h in hits)
    expected = (1.0 / 61 + 1.0 / 62) / (2.0 / 61)
    assert hits[0].score == pytest.approx(expected)
    assert {h.memory.memory_id for h in hits} == {"a", "b"}


def test_vector_only_ranking_clips_negative_cosine_to_zero_and_k_limits() -> None:
    vector = [ScoredMemory(A, 0.7), ScoredMemory(B, -0.2), ScoredMemory(C, 0.1)]
    hits = fuse(vector, [], k=2, vector_weight=1.0)
    assert [h.memory.memory_id for h in hits] == ["a", "c"]
    assert [c.score for c in fused_candidates(vector, [], vector_weight=1.0)] == [
        pytest.approx(0.7),
        pytest.approx(0.1),
        0.0,
    ]
    assert fuse(vector[:1], [], k=5, vector_weight=1.0, min_score=0.8) == []


def test_text_only_ranking_divides_by_best_bm25() -> None:
    hits = fuse([], [ScoredMemory(A, 4.0), ScoredMemory(B, 1.0)], k=5, vector_weight=0.0)
    assert [h.score for h in hits] == [1.0, 0.25]


def test_min_score_drops_weak_hits() -> None:
    hits = fuse([ScoredMemory(A, 0.9), ScoredMemory(B, 0.1)], [], k=5, min_score=0.3)
    assert [h.memory.memory_id for h in hits] == ["a"]


def test_min_max_fusion_spreads_each_list_over_the_unit_range() -> None:
    candidates = fused_candidates(
        [ScoredMemory(A, 0.5), ScoredMemory(B, 0.4), ScoredMemory(C, 0.3)],
        [ScoredMemory(C, 9.0), ScoredMemory(B, 5.0), ScoredMemory(A, 1.0)],
        vector_weight=0.4,
        normalisation="min-max",
    )
    by_id = {c.memory.memory_id: c for c in candidates}
    assert (by_id["a"].vector, by_id["b"].vector, by_id["c"].vector) == pytest.approx(
        (1.0, 0.5, 0.0)
    )
    assert (by_id["a"].text, by_id["b"].text, by_id["c"].text) == pytest.approx((0.0, 0.5, 1.0))
    assert by_id["c"].score == pytest.approx(0.6) and by_id["a"].score == pytest.approx(0.4)
    assert by_id["a"].cosine == 0.5  # the raw cosine is kept
    # A memory scored later (outside the pool) goes through the same range.
    scale = vector_scale(candidates, "min-max")
    assert scale(0.45) == pytest.approx(0.75) and scale(0.1) == 0.0


def _turn(memory_id: str, index: int, doc: str = "s1", owner: str = "o") -> Memory:
    return stored_memory(memory_id, memory_id, owner=owner, doc_id=doc, chunk_index=index)


def test_neighbour_smoothing_lifts_the_turn_next_to_a_strong_match() -> None:
    question, answer, far, other_doc, other_owner = (
        _turn("q", 4),
        _turn("a", 5),
        _turn("far", 9),
        _turn("x", 5, doc="s2"),
        _turn("y", 5, owner="p"),
    )
    ranked = fused_candidates(
        [ScoredMemory(m, s) for m, s in ((question, 0.9), (far, 0.5), (answer, 0.4))]
        + [ScoredMemory(other_doc, 0.45), ScoredMemory(other_owner, 0.45)],
        [],
        vector_weight=1.0,
    )
    smoothed = smooth_neighbours(ranked, 0.5)
    scores = {c.memory.memory_id: c.score for c in smoothed}
    assert scores["a"] == pytest.approx((0.4 + 0.5 * 0.9) / 1.5)  # next to the match
    assert scores["q"] == pytest.approx((0.9 + 0.5 * 0.4) / 1.5)
    assert scores["far"] == pytest.approx(0.5 / 1.5)  # no neighbour among the candidates
    assert scores["x"] == scores["y"] == pytest.approx(0.45 / 1.5)  # other session, owner
    assert [c.memory.memory_id for c in smoothed][:2] == ["q", "a"]
    assert all(0.0 <= c.score <= 1.0 for c in smoothed)
    unchanged = fused_candidates([ScoredMemory(far, 0.5)], [], vector_weight=1.0)
    assert smooth_neighbours(unchanged, 0.0) is unchanged

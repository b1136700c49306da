"""Ranking: how the learned signals change the plain candidates' order."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future

import pytest
from builders import stored_memory

from tribal_memory.base.config import Settings
from tribal_memory.base.results import Hit
from tribal_memory.learned.feedback import UsagePrior
from tribal_memory.retrieval.fusion import Candidate
from tribal_memory.retrieval.ranking import ScoreIds, rank
from tribal_memory.retrieval.signals import (
    SignalMap,
    Signals,
    VariantSearch,
    add_boosts,
    add_expansion,
    add_priors,
    expansion_of,
)
from tribal_memory.store.base import RowRef, ScoredMemory

SETTINGS = Settings(
    anchor_weight=0.6,
    max_boost=0.3,
    usage_prior_weight=0.3,
    skip_prior_weight=0.15,
    boost_relevance_gate=1.0,
)


def _pool(*scores: tuple[str, float, float]) -> list[Candidate]:
    """Candidates ``(id, fused score, BM25 part)``, best first, with a cosine each."""
    return [
        Candidate(stored_memory(i, i), score, vector=score, text=text, cosine=score)
        for i, score, text in scores
    ]


def _hits(
    candidates: list[Candidate],
    signals: SignalMap,
    k: int = 3,
    score_ids: ScoreIds | None = None,
) -> list[Hit]:
    return rank(
        candidates,
        signals,
        settings=SETTINGS,
        vector_weight=0.5,
        normalisation="min-max",
        k=k,
        score_ids=score_ids,
    )


def _rank(candidates: list[Candidate], signals: SignalMap, k: int = 3) -> list[tuple[str, float]]:
    return [(h.memory.memory_id, round(h.score, 6)) for h in _hits(candidates, signals, k)]


def _done(found: list[tuple[RowRef, float]]) -> Future[list[tuple[RowRef, float]]]:
    future: Future[list[tuple[RowRef, float]]] = Future()
    future.set_result(found)
    return future


def test_no_signal_keeps_the_plain_order_and_scores() -> None:
    pool = _pool(("a", 0.9, 0.5), ("b", 0.6, 0.4), ("c", 0.3, 0.1))
    assert _rank(pool, {}) == [("a", 0.9), ("b", 0.6), ("c", 0.3)]


def test_an_anchor_match_lifts_its_memory_and_scores_stay_in_unit_range() -> None:
    pool = _pool(("a", 0.9, 0.5), ("b", 0.6, 0.4), ("c", 0.3, 0.1))
    ranked = _rank(pool, {"a": Signals(anchor=1.0), "c": Signals(anchor=1.0)})
    assert ranked[0] == ("a", 1.0)  # 0.9 + 0.6 clipped
    assert ranked[1][0] == "c" and ranked[1][1] == pytest.approx(0.9)
    assert ranked[2][0] == "b"


def test_the_teams_boost_does_not_add_to_the_owners_own() -> None:
    signals: SignalMap = {}
    add_boosts(signals, {"a": 0.2, "b": 0.1})
    add_boosts(signals, {"a": 0.15, "b": 0.25, "c": 0.05}, merge=True)
    assert {i: s.boost for i, s in signals.items()} == {"a": 0.2, "b": 0.25, "c": 0.05}


def test_a_variant_counts_only_where_it_beats_the_querys_own_bm25() -> None:
    pool = _pool(("a", 0.6, 0.9), ("b", 0.5, 0.0))
    signals: SignalMap = {}
    # The store names rows by its own references; the pool's searches map them to memories.
    variant: VariantSearch = ("deploy freeze", _done([(11, 4.0), (12, 4.0), (13, 4.0)]))
    found = expansion_of([variant], weight=0.5, normalisation="max")
    add_expansion(signals, found, {11: "a", 12: "b"})
    assert signals["a"].expansion == signals["b"].expansion == 0.5
    assert set(signals) == {"a", "b"}  # row 13 is outside the pool: its evidence is dropped
    hits = _hits(pool, signals, k=2)
    by_id = {h.memory.memory_id: h for h in hits}
    assert by_id["a"].score == pytest.approx(0.6)  # its own BM25 (0.9) beats 0.5
    assert by_id["a"].expanded_from is None
    assert by_id["b"].score == pytest.approx(0.5 + 0.5 * 0.5)
    assert by_id["b"].expanded_from == "deploy freeze"


def test_a_memory_skipped_before_loses_and_one_used_before_gains() -> None:
    pool = _pool(("a", 0.62, 0.5), ("b", 0.6, 0.5), ("c", 0.58, 0.5))
    signals: SignalMap = {}
    priors = {"a": UsagePrior(used=0.0, skipped=1.0), "c": UsagePrior(used=1.0, skipped=0.0)}
    add_priors(signals, ["a", "b", "c"], [priors])
    ranked = _rank(pool, signals)
    assert [i for i, _ in ranked] == ["c", "b", "a"]
    # The lift is the prior's weight scaled by the memory's own relevance (gate 1).
    assert dict(ranked)["c"] == pytest.approx(0.58 + 0.3 * 0.58)
    assert dict(ranked)["a"] == pytest.approx(0.62 - 0.15 * 0.62)


def test_memories_from_outside_the_pool_are_scored_only_when_they_could_rank() -> None:
    pool = _pool(("a", 0.9, 0.5), ("b", 0.6, 0.4), ("c", 0.3, 0.1))
    asked: list[list[str]] = []

    def score_ids(ids: Sequence[str]) -> list[ScoredMemory]:
        asked.append(sorted(ids))
        return [ScoredMemory(stored_memory(i, i), 0.6) for i in sorted(ids)]

    # The pool's lowest cosine (0.3) bounds an outside memory's vector part at 0,
    # so only a gain that reaches the second score (0.6) can make it a hit.
    signals = {"far": Signals(anchor=1.0), "faint": Signals(anchor=0.1)}
    hits = _hits(pool, signals, k=2, score_ids=score_ids)
    assert asked == [["far"]]
    # Scored: cosine 0.6 is 0.5 on the pool's min-max scale, 0.25 + 0.6 from its anchor.
    assert [(h.memory.memory_id, round(h.score, 6)) for h in hits] == [("a", 0.9), ("far", 0.85)]

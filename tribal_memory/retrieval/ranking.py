"""Ranking: plain candidates plus their learned signals into the final hits.

Each memory's gain, added to its fused score (then clipped to [0, 1]):

- expansion: ``max(0, expansion - text) x (1 - vector_weight)``, i.e. a
  keyword variant counts as BM25 evidence only where it beats the query's
  own BM25 part;
- anchors: ``anchor_weight x anchor match``;
- feedback: the boost of similar past queries plus ``usage_prior_weight x
  used`` (capped at ``max_boost``), a positive total scaled by the memory's
  relevance ``(1 - gate) + gate x fused score``, minus ``skip_prior_weight x
  skipped x relevance``.

Memories that anchors or feedback bring in from outside the candidate pool
are scored against the query vector, but only those whose gain could lift
them into the top ``k`` (:func:`outside_ids`); keyword variants count for
the pool's memories only.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from dataclasses import replace

from tribal_memory.base.config import Settings
from tribal_memory.base.results import Hit
from tribal_memory.retrieval.fusion import Candidate, Normalisation, top_hits, vector_scale
from tribal_memory.retrieval.signals import SignalMap, Signals
from tribal_memory.store.base import ScoredMemory

ScoreIds = Callable[[Sequence[str]], Sequence[ScoredMemory]]
"""Scores these memory ids against the query vector (cosine), those passing the filters."""


def rank(
    candidates: list[Candidate],
    signals: SignalMap,
    *,
    settings: Settings,
    vector_weight: float,
    normalisation: Normalisation,
    k: int,
    score_ids: ScoreIds | None,
) -> list[Hit]:
    """The top ``k`` hits of ``candidates`` (fused, best first) once ``signals`` count.

    Args:
        candidates: The plain pool, fused scores in [0, 1], best first.
        signals: Learned signals per memory id; may name memories outside the pool.
        settings: The learned weights (``anchor_weight``, ``max_boost``, priors, gate).
        vector_weight: Weight of the vector part in this search's fusion, in [0, 1].
        normalisation: How this search's fusion scaled each part.
        k: Hits to return (``min_score`` applies later, to calibrated scores).
        score_ids: Scores memories from outside the pool (None: none is brought in).

    Returns:
        Up to ``k`` hits, score in [0, 1] descending (ties: memory id), each
        carrying its ``boost``, ``anchor_match`` and ``expanded_from``.
        ``signals`` is updated in place (net boosts).
    """
    if not signals:
        return _hits(candidates, {}, k)
    fold_priors(candidates, signals, settings)
    text_weight = 1.0 - vector_weight
    rescored = [gained(c, signals.get(c.memory_id), text_weight, settings) for c in candidates]
    outside = outside_ids(
        signals,
        candidates,
        rescored,
        settings=settings,
        vector_weight=vector_weight,
        normalisation=normalisation,
        floor=_floor(rescored, k),
    )
    if outside and score_ids is not None:
        to_vector = vector_scale(candidates, normalisation)
        for scored in score_ids(outside):
            part = to_vector(scored.score)
            found = Candidate(scored, vector_weight * part, vector=part, cosine=scored.score)
            rescored.append(gained(found, signals[scored.memory_id], text_weight, settings))
    rescored.sort(key=lambda c: (-c.score, c.memory_id))
    return _hits(rescored, signals, k)


def fold_priors(candidates: Sequence[Candidate], signals: SignalMap, settings: Settings) -> None:
    """Fold each memory's usage prior into its ``boost`` and gate the boost by relevance.

    Relevance is ``(1 - gate) + gate x own fused score`` (0 for memories
    outside the pool), so a boost mostly reorders what the query found itself.
    """
    s = settings
    by_id = {c.memory_id: c.score for c in candidates}
    gate = s.boost_relevance_gate
    for memory_id, info in signals.items():
        relevance = (1.0 - gate) + gate * by_id.get(memory_id, 0.0)
        prior = info.prior  # only the pool's memories have one
        if prior is not None:
            info.boost = min(s.max_boost, info.boost + s.usage_prior_weight * prior.used)
        if info.boost > 0:
            info.boost *= relevance
        if prior is not None:
            info.boost -= s.skip_prior_weight * prior.skipped * relevance


def gained(
    candidate: Candidate, extra: Signals | None, text_weight: float, settings: Settings
) -> Candidate:
    """``candidate`` with its learned gain added in place, the score clipped to [0, 1].

    Expansion counts only where the variant's BM25 beats the query's own
    (``expanded_from`` is cleared on ``extra`` where it does not). In place:
    no copy per candidate (150 and more per search).

    Returns:
        ``candidate`` itself.
    """
    if extra is None:
        return candidate
    gain = max(0.0, extra.expansion - (candidate.text or 0.0)) * text_weight
    if gain <= 0:
        extra.expanded_from = None
    gain += settings.anchor_weight * (extra.anchor or 0.0) + extra.boost
    candidate.score = min(1.0, max(0.0, candidate.score + gain))
    return candidate


def outside_ids(
    signals: SignalMap,
    candidates: Sequence[Candidate],
    rescored: Sequence[Candidate],
    *,
    settings: Settings,
    vector_weight: float,
    normalisation: Normalisation,
    floor: float,
) -> list[str]:
    """Ids from outside the pool that their learned gain could lift to ``floor``.

    A memory the vector search did not return has a cosine no higher than
    the pool's lowest (exactly so for an exact search; under an ANN index as
    the index itself judged), so its score is at most the vector part of that
    edge plus its gain. One whose bound is below ``floor`` (the k-th score of
    the rescored pool) cannot become a hit and is not
    scored: each id scored costs the store a vector query.
    """
    pooled = {c.memory_id for c in candidates}
    cosines = [c.cosine for c in candidates if c.cosine is not None]
    edge = vector_scale(candidates, normalisation)(min(cosines)) if cosines else 0.0
    outside: list[str] = []
    for memory_id, extra in signals.items():
        if memory_id in pooled:
            continue
        # Expansion evidence is kept for the pool's memories only (signals.add_expansion).
        gain = settings.anchor_weight * (extra.anchor or 0.0) + extra.boost
        if gain > 0 and vector_weight * edge + gain >= floor:
            outside.append(memory_id)
    return outside


def _floor(rescored: Sequence[Candidate], k: int) -> float:
    """The score a memory must reach to become one of the top ``k`` hits."""
    if len(rescored) >= k:
        return heapq.nlargest(k, (c.score for c in rescored))[-1]
    return 0.0


def _hits(candidates: Sequence[Candidate], signals: SignalMap, k: int) -> list[Hit]:
    hits = top_hits(candidates, k)
    return [
        replace(
            hit, expanded_from=extra.expanded_from, boost=extra.boost, anchor_match=extra.anchor
        )
        if (extra := signals.get(hit.memory.memory_id)) is not None
        else hit
        for hit in hits
    ]

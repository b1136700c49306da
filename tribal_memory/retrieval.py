"""Fusion of vector and BM25 candidates into one ranking (hybrid search).

Weighted fusion: each part is first put on [0, 1] — cosine similarity clipped
at 0, BM25 divided by the query's best BM25 score — and then
``score = w * vector + (1 - w) * text`` with a missing part counted as 0.
RRF: ``sum 1 / (k + rank)`` over the two lists (Cormack, Clarke & Büttcher,
"Reciprocal Rank Fusion outperforms Condorcet and individual rank learning
methods", SIGIR 2009), divided by its largest possible value ``2 / (k + 1)`` so
that it too lies in [0, 1].
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from tribal_memory.models import Hit, Memory
from tribal_memory.store.base import ScoredMemory

FusionMethod = Literal["weighted", "rrf"]


@dataclass(slots=True)
class Candidate:
    """A memory on its way to becoming a hit: fused ``score`` and its parts, all in [0, 1]."""

    memory: Memory
    score: float = 0.0
    vector: float | None = None
    text: float | None = None
    vector_rank: int | None = None
    text_rank: int | None = None


def fused_candidates(
    vector: Sequence[ScoredMemory],
    text: Sequence[ScoredMemory],
    *,
    method: FusionMethod = "weighted",
    vector_weight: float = 0.6,
    rrf_k: int = 60,
) -> list[Candidate]:
    """Every candidate of either list with its fused score, best first (ties: memory id).

    Args:
        vector: Candidates from vector search, scores = cosine similarity.
        text: Candidates from BM25 search, scores = raw BM25.
        method: ``"weighted"`` (normalised weighted sum) or ``"rrf"``.
        vector_weight: Weight of the vector part in weighted fusion, in [0, 1].
        rrf_k: RRF constant.

    Returns:
        Candidates with ``score`` in [0, 1] and normalised ``vector``/``text`` parts.
    """
    pool: dict[str, Candidate] = {}
    for rank, scored in enumerate(vector, start=1):
        entry = pool.setdefault(scored.memory.memory_id, Candidate(scored.memory))
        entry.vector = min(1.0, max(0.0, scored.score))
        entry.vector_rank = rank
    best_text = max((c.score for c in text), default=0.0)
    for rank, scored in enumerate(text, start=1):
        entry = pool.setdefault(scored.memory.memory_id, Candidate(scored.memory))
        entry.text = scored.score / best_text if best_text > 0 else 0.0
        entry.text_rank = rank
    for entry in pool.values():
        if method == "rrf":
            total = sum(1.0 / (rrf_k + r) for r in (entry.vector_rank, entry.text_rank) if r)
            entry.score = min(1.0, total / (2.0 / (rrf_k + 1)))
        else:
            entry.score = min(
                1.0,
                vector_weight * (entry.vector or 0.0) + (1.0 - vector_weight) * (entry.text or 0.0),
            )
    return sorted(pool.values(), key=lambda e: (-e.score, e.memory.memory_id))


def fuse(
    vector: Sequence[ScoredMemory],
    text: Sequence[ScoredMemory],
    *,
    k: int,
    method: FusionMethod = "weighted",
    vector_weight: float = 0.6,
    rrf_k: int = 60,
    min_score: float = 0.0,
) -> list[Hit]:
    """Fuse vector and BM25 candidate lists (each best first) into the top ``k`` hits.

    Args:
        vector: Candidates from vector search, scores = cosine similarity.
        text: Candidates from BM25 search, scores = raw BM25.
        k: Hits to return.
        method: ``"weighted"`` (normalised weighted sum) or ``"rrf"``.
        vector_weight: Weight of the vector part in weighted fusion, in [0, 1].
        rrf_k: RRF constant.
        min_score: Hits whose fused score is below this are dropped.

    Returns:
        Up to ``k`` hits, fused score descending (ties: memory id), ranks 1..n.
        Every hit carries its normalised ``vector_score`` and ``text_score``.
    """
    candidates = fused_candidates(
        vector, text, method=method, vector_weight=vector_weight, rrf_k=rrf_k
    )
    return top_hits(candidates, k, min_score)


def top_hits(candidates: Sequence[Candidate], k: int, min_score: float = 0.0) -> list[Hit]:
    """The first ``k`` candidates (already ranked) scoring at least ``min_score``, as hits.

    Returns:
        Hits ranked 1..n carrying each candidate's ``score``, ``vector_score``
        and ``text_score``; [] when none qualifies.
    """
    hits: list[Hit] = []
    for entry in candidates:
        if len(hits) == k:
            break
        if entry.score < min_score:
            continue
        hits.append(
            Hit(
                entry.memory,
                entry.score,
                len(hits) + 1,
                vector_score=entry.vector,
                text_score=entry.text,
            )
        )
    return hits

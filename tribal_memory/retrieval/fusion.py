"""Fusion of vector and BM25 candidates into one ranking (hybrid search).

Weighted fusion: each part is first put on [0, 1] and then
``score = w * vector + (1 - w) * text``, a missing part counted as 0. The
default normalisation is min-max over each list's own candidates (the best
vector candidate gets 1, the worst 0; likewise for BM25), as in the linear
fusion of Bruch, Gai & Ingber, "An Analysis of Fusion Functions for Hybrid
Retrieval" (ACM TOIS 2023); ``max`` keeps the cosine (clipped at 0) and divides
BM25 by the query's best BM25 score. RRF: ``sum 1 / (k + rank)`` over the two
lists (Cormack, Clarke & Büttcher, "Reciprocal Rank Fusion outperforms
Condorcet and individual rank learning methods", SIGIR 2009), divided by its
largest possible value ``2 / (k + 1)`` so that it too lies in [0, 1].

Neighbour smoothing (:func:`smooth_neighbours`): a memory's fused score is
raised by ``weight`` x the best fused score among its adjacent memories in the
candidate list (same owner and ``doc_id``, ``chunk_index`` one apart: the
turns before and after it in a conversation session, the chunks around it in
a document), then divided by ``1 + weight`` to stay in [0, 1]. A turn that
answers a question often follows or precedes the turn that matches its words
(a question, an answer, a photo shared): the idea of passage-level evidence
and of score propagation between neighbouring passages (e.g. Kaszkiel & Zobel,
"Passage Retrieval Revisited", SIGIR 1997).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from itertools import islice
from typing import Literal

from tribal_memory.base.models import Memory
from tribal_memory.base.results import Hit
from tribal_memory.store.base import ScoredMemory, load_memories

FusionMethod = Literal["weighted", "rrf"]
Normalisation = Literal["min-max", "max"]
Scale = Callable[[float], float]
"""Maps a raw score onto [0, 1]."""


class Candidate:
    """A memory on its way to becoming a hit: fused ``score`` and its parts, all in [0, 1].

    Made from a whole :class:`Memory` or from a path's :class:`ScoredMemory`,
    whose memory is built only when :attr:`memory` is first read: ranking
    reads ``memory_id`` (and smoothing ``owner``, ``doc_id``,
    ``chunk_index``) of every candidate, the whole memory of the hits only.
    """

    __slots__ = (
        "_source",
        "chunk_index",
        "cosine",
        "doc_id",
        "memory_id",
        "owner",
        "score",
        "text",
        "text_rank",
        "vector",
        "vector_rank",
    )

    def __init__(
        self,
        memory: Memory | ScoredMemory,
        score: float = 0.0,
        vector: float | None = None,
        text: float | None = None,
        vector_rank: int | None = None,
        text_rank: int | None = None,
        cosine: float | None = None,
    ) -> None:
        self._source = memory if isinstance(memory, ScoredMemory) else ScoredMemory(memory, score)
        self.memory_id = memory.memory_id
        self.owner = memory.owner
        self.doc_id = memory.doc_id
        self.chunk_index = memory.chunk_index
        self.score = score
        self.vector = vector
        self.text = text
        self.vector_rank = vector_rank
        self.text_rank = text_rank
        self.cosine = cosine

    @property
    def memory(self) -> Memory:
        """The whole memory (read from the store on first use for a path's candidate).

        Raises:
            NotFound: the memory was deleted since the search.
        """
        return self._source.memory

    @property
    def loaded(self) -> bool:
        """Whether :attr:`memory` is at hand (no store read needed)."""
        return self._source.loaded

    def __repr__(self) -> str:
        return f"Candidate(memory_id={self.memory_id!r}, score={self.score!r})"


def load_candidates(candidates: Iterable[Candidate]) -> None:
    """Read the whole memories of ``candidates`` that lack one, in one read per store.

    Raises:
        StoreUnavailable: the read failed.
    """
    load_memories(c._source for c in candidates)


def fused_candidates(
    vector: Sequence[ScoredMemory],
    text: Sequence[ScoredMemory],
    *,
    method: FusionMethod = "weighted",
    vector_weight: float = 0.6,
    rrf_k: int = 60,
    normalisation: Normalisation = "max",
) -> list[Candidate]:
    """Every candidate of either list with its fused score, best first (ties: memory id).

    Args:
        vector: Candidates from vector search, scores = cosine similarity.
        text: Candidates from BM25 search, scores = raw BM25.
        method: ``"weighted"`` (normalised weighted sum) or ``"rrf"``.
        vector_weight: Weight of the vector part in weighted fusion, in [0, 1].
        rrf_k: RRF constant.
        normalisation: How each part is put on [0, 1] (see the module docstring).

    Returns:
        Candidates with ``score`` in [0, 1], normalised ``vector``/``text``
        parts and the raw ``cosine``.
    """
    pool: dict[str, Candidate] = {}
    to_vector = _scale([c.score for c in vector], normalisation, clip=True)
    for rank, scored in enumerate(vector, start=1):
        entry = pool.get(scored.memory_id)
        if entry is None:
            entry = pool[scored.memory_id] = Candidate(scored)
        entry.vector = to_vector(scored.score)
        entry.cosine = scored.score
        entry.vector_rank = rank
    to_text = _scale([c.score for c in text], normalisation, clip=False)
    for rank, scored in enumerate(text, start=1):
        entry = pool.get(scored.memory_id)
        if entry is None:
            entry = pool[scored.memory_id] = Candidate(scored)
        entry.text = to_text(scored.score)
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
    return sorted(pool.values(), key=lambda e: (-e.score, e.memory_id))


def _scale(scores: Sequence[float], normalisation: Normalisation, *, clip: bool) -> Scale:
    """The map of raw scores onto [0, 1] for one candidate list."""
    if not scores:
        return lambda value: 0.0
    high = max(scores)
    if normalisation == "min-max":
        low = min(scores)
        span = high - low
        return lambda value: min(1.0, max(0.0, (value - low) / span)) if span > 0 else 1.0
    if clip:  # cosine as it is, clipped to [0, 1]
        return lambda value: min(1.0, max(0.0, value))
    return lambda value: value / high if high > 0 else 0.0


def text_scale(scores: Sequence[float], normalisation: Normalisation) -> Scale:
    """The map BM25 scores of one list go through in fusion (for a query variant's list)."""
    return _scale(scores, normalisation, clip=False)


def vector_scale(candidates: Sequence[Candidate], normalisation: Normalisation) -> Scale:
    """The map a cosine goes through to become ``vector`` in these candidates' fusion.

    For memories scored after fusion (brought in from outside the pool): the
    same min-max range as the pool's vector candidates, so a cosine under the
    pool's worst counts 0.
    """
    cosines = [c.cosine for c in candidates if c.cosine is not None]
    return _scale(cosines, normalisation, clip=True)


def smooth_neighbours(candidates: list[Candidate], weight: float) -> list[Candidate]:
    """Raise each candidate by ``weight`` x its best adjacent candidate's score (see above).

    Adjacent: same owner and ``doc_id``, ``chunk_index`` one apart; only
    candidates count (nothing is fetched). Scores stay in [0, 1]
    (``(own + weight * neighbour) / (1 + weight)``); ``weight`` 0 returns the
    list unchanged.

    Returns:
        The candidates re-ranked, best first (ties: memory id).
    """
    if weight <= 0 or not candidates:
        return candidates
    at: dict[tuple[str, str, int], float] = {}
    for entry in candidates:
        if entry.doc_id is not None and entry.chunk_index is not None:
            at[(entry.owner, entry.doc_id, entry.chunk_index)] = entry.score
    if not at:
        return candidates
    for entry in candidates:
        neighbour = 0.0
        if entry.doc_id is not None and entry.chunk_index is not None:
            here = (entry.owner, entry.doc_id)
            neighbour = max(
                at.get((*here, entry.chunk_index - 1), 0.0),
                at.get((*here, entry.chunk_index + 1), 0.0),
            )
        entry.score = (entry.score + weight * neighbour) / (1.0 + weight)
    return sorted(candidates, key=lambda e: (-e.score, e.memory_id))


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

    Their memories are read in one go (:func:`load_candidates`); a candidate
    whose memory was deleted since the search is passed over.

    Returns:
        Hits ranked 1..n carrying each candidate's ``score``, ``vector_score``
        and ``text_score``; [] when none qualifies.
    """
    hits: list[Hit] = []
    qualifying = (entry for entry in candidates if entry.score >= min_score)
    while len(hits) < k:
        batch = list(islice(qualifying, k - len(hits)))
        if not batch:
            break
        load_candidates(batch)
        for entry in batch:
            if not entry.loaded:  # deleted since the search
                continue
            hits.append(
                Hit(
                    entry.memory,
                    entry.score,
                    len(hits) + 1,
                    vector_score=entry.vector,
                    text_score=entry.text,
                    cosine=entry.cosine,
                )
            )
    return hits

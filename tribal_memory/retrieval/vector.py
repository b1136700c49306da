"""Search by a raw embedding vector: the caller brings the vector, no query text is embedded."""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np

from tribal_memory.base.errors import InvalidInput
from tribal_memory.base.models import SearchFilters
from tribal_memory.base.results import Hit, SearchResult
from tribal_memory.embeddings.base import Vector
from tribal_memory.store.base import MemoryStore, load_memories


def check_vector(vector: Sequence[float] | Vector, dim: int) -> Vector:
    """``vector`` as a unit-length float32 array of shape ``(dim,)`` (cosine ignores length).

    Raises:
        InvalidInput: not ``dim`` numbers, a value that is not finite, or all zeros
            (a zero vector has no direction to compare).
    """
    try:
        array = np.asarray(vector, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"vector must be a list of {dim} numbers") from exc
    if array.ndim != 1 or array.shape[0] != dim:
        got = array.shape[0] if array.ndim == 1 else "a nested list"
        raise InvalidInput(
            f"vector must have {dim} numbers (this instance's embedding dimension), not {got}"
        )
    if not np.isfinite(array).all() or np.abs(array).max() > np.finfo(np.float32).max:
        raise InvalidInput("vector values must be finite float32 numbers")
    norm = float(np.linalg.norm(array))
    if not array.any() or not norm > 0:
        raise InvalidInput("vector must not be all zeros")
    # Scaled to unit length in float64 first: values that underflow float32 (1e-45)
    # keep their direction instead of becoming a zero vector that matches nothing.
    checked: Vector = (array / norm).astype(np.float32)
    return checked


def search_by_vector(
    store: MemoryStore, vector: Vector, *, k: int, filters: SearchFilters, min_score: float
) -> SearchResult:
    """The ``k`` memories passing ``filters`` nearest to ``vector`` (cosine), best first.

    Plain vector search (exact below the store's index threshold, else its
    ANN index), without the learned layer: there is no query to learn from.

    Args:
        store: The memory store.
        vector: Checked by :func:`check_vector`; need not be unit length.
        k: Most hits.
        filters: Prefilter, as for search.
        min_score: Hits under it are dropped, in [0, 1].

    Returns:
        Mode ``vector``; each hit's ``score`` and ``vector_score`` are its
        cosine similarity clipped to [0, 1], higher is closer. No match: no hits.
    """
    started = time.perf_counter()
    found = store.vector_search(vector, filters, k)
    load_memories(found)  # one read for all hits
    hits: list[Hit] = []
    for scored in found:
        score = min(max(float(scored.score), 0.0), 1.0)
        if score >= min_score and scored.loaded:
            hits.append(Hit(scored.memory, score, len(hits) + 1, vector_score=score))
    took_ms = (time.perf_counter() - started) * 1000
    return SearchResult(tuple(hits), "vector", None, took_ms)

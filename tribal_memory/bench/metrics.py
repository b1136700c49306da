"""Retrieval metrics over ranked id lists, and latency percentiles.

All metrics are in [0, 1], higher is better. ``ranked`` is the retrieved ids
best first; ``relevant`` the gold ids. An empty ``relevant`` set is a caller
error (such questions are skipped by the harness, never scored).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence


def recall_at(ranked: Sequence[str], relevant: Collection[str], k: int) -> float:
    """Share of ``relevant`` ids found in the top ``k``."""
    return len(set(ranked[:k]) & set(relevant)) / len(relevant)


def hit_at(ranked: Sequence[str], relevant: Collection[str], k: int) -> float:
    """1.0 when any relevant id is in the top ``k``, else 0.0."""
    return 1.0 if set(ranked[:k]) & set(relevant) else 0.0


def reciprocal_rank(ranked: Sequence[str], relevant: Collection[str]) -> float:
    """1 / rank of the first relevant id (ranks from 1); 0.0 when none is retrieved."""
    for rank, item in enumerate(ranked, start=1):
        if item in relevant:
            return 1.0 / rank
    return 0.0


def ndcg_at(ranked: Sequence[str], relevant: Collection[str], k: int) -> float:
    """nDCG@k with binary gains (Järvelin & Kekäläinen, TOIS 2002)."""
    gold = set(relevant)
    dcg = sum(1.0 / math.log2(i + 2) for i, item in enumerate(ranked[:k]) if item in gold)
    ideal = sum(1.0 / math.log2(i + 2) for i in range(min(k, len(gold))))
    return dcg / ideal if ideal else 0.0


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) by linear interpolation; 0.0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)

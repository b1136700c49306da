"""Response bodies of ``/v1/stats``, the retrieval statistics and ``/health``."""

from __future__ import annotations

from typing import Literal

import msgspec


class StatsOut(msgspec.Struct):
    """Counts (per owner, per kind), relation count, model and index state.

    Table health (what slows searches; ``tribal-memory optimize`` brings it
    down): ``fragments``, ``small_fragments``, ``unindexed_rows`` (rows the
    full-text and scalar indexes lack yet) and ``versions`` kept on disk.
    ``cache_bytes``: index and metadata data the server keeps in memory
    (part of its RSS; bounded by ``TRIBAL_INDEX_CACHE_MB`` plus a quarter).
    """

    memories: int
    owners: dict[str, int]
    kinds: dict[str, int]
    relations: int
    embedding_model: str
    embedding_dim: int
    fts_indexed: bool
    ann_indexed: bool
    table_version: int
    fragments: int
    small_fragments: int
    unindexed_rows: int
    versions: int
    cache_bytes: int


class OwnerStatsOut(msgspec.Struct):
    """What one owner sees (any key may ask for its own owner).

    ``owner``: the owner counted (null: every owner, open servers and admin
    keys only). ``memories``: its memories; ``shared``: the shared memories
    it also sees (0 for ``shared`` itself); ``documents``: ingested documents
    it sees (its own and shared); ``fts_indexed``: keyword search available.
    """

    owner: str | None
    memories: int
    shared: int
    documents: int
    embedding_model: str
    embedding_dim: int
    fts_indexed: bool


class UsageOut(msgspec.Struct):
    """Counts and rates over a set of retrievals; rates in [0, 1] (0.0 over no retrievals).

    ``usage_rate``: share of retrievals with feedback where some hit was used.
    ``retrieval_to_usage``: used hits over returned hits in those retrievals.
    ``cache_hit_rate``: share of retrievals the query cache answered.
    """

    retrievals: int
    with_feedback: int
    cache_hits: int
    usage_rate: float
    retrieval_to_usage: float
    cache_hit_rate: float


class CurvePointOut(msgspec.Struct):
    """Usage in one period (``period``: ISO date of the day, or of the Monday of the week).

    The counts and rates mean what they mean in :class:`UsageOut`.
    """

    period: str
    retrievals: int
    with_feedback: int
    cache_hits: int
    usage_rate: float
    retrieval_to_usage: float
    cache_hit_rate: float


class RetrievalStatsOut(msgspec.Struct):
    """What the learned layer did and how often its answers were used.

    ``overall`` and ``variants`` (``learned``/``baseline``, those seen) count
    retrievals. ``expansion_lift``: used rate of hits raised by a query
    variant minus that of the others, in [-1, 1] (null without expanded hits).
    ``learning_curve``: one point per day or week, oldest first.
    ``cache_entries``/``cache_eligible``: queries with feedback, and those the
    cache answers. ``weights``: learned (query, memory) weights. ``anchors``:
    anchors of all memories. ``llm_calls``/``llm_failures``/``counters``:
    counts in this server process since it started.
    """

    overall: UsageOut
    variants: dict[str, UsageOut]
    expansion_lift: float | None
    expanded_hits: int
    learning_curve: list[CurvePointOut]
    cache_entries: int
    cache_eligible: int
    weights: int
    anchors: int
    llm_calls: int
    llm_failures: int
    counters: dict[str, int]


class HealthOut(msgspec.Struct):
    """Liveness: ``status`` is ``ok`` whenever the server answers."""

    status: Literal["ok"]
    version: str
    embedding_model: str
    embedding_dim: int

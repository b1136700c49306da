"""Converters from the core's frozen dataclasses to the API's response Structs."""

from __future__ import annotations

import msgspec

from tribal_memory.base.graph import Neighbor, Relation
from tribal_memory.base.models import CaptureResult, Memory, StoreStats
from tribal_memory.base.results import Anchor, ChunkContext, FeedbackResult, Hit, SearchResult
from tribal_memory.interfaces.api.learned_schemas import AnchorOut, FeedbackOut
from tribal_memory.interfaces.api.relation_schemas import NeighborOut, RelationOut
from tribal_memory.interfaces.api.schemas import (
    CaptureOut,
    ChunkContextOut,
    HitOut,
    MemoryOut,
    SearchOut,
)
from tribal_memory.interfaces.api.stats_schemas import (
    CurvePointOut,
    RetrievalStatsOut,
    StatsOut,
    UsageOut,
)
from tribal_memory.interfaces.api.transfer_schemas import ImportOut
from tribal_memory.learned.stats import RetrievalStats, UsageCounts
from tribal_memory.ops.transfer import ImportResult


def memory_out(memory: Memory) -> MemoryOut:
    """Response body of a :class:`Memory`."""
    return msgspec.convert(memory, MemoryOut, from_attributes=True)


def relation_out(relation: Relation) -> RelationOut:
    """Response body of a :class:`Relation`."""
    return msgspec.convert(relation, RelationOut, from_attributes=True)


def stats_out(stats: StoreStats) -> StatsOut:
    """Response body of :class:`StoreStats`."""
    return msgspec.convert(stats, StatsOut, from_attributes=True)


def capture_out(result: CaptureResult) -> CaptureOut:
    """Response body of a :class:`CaptureResult`."""
    return CaptureOut(
        memory=memory_out(result.memory),
        status=result.status,
        near_duplicate_of=result.near_duplicate_of,
        near_duplicate_score=_optional_float(result.near_duplicate_score),
    )


def neighbor_out(neighbor: Neighbor) -> NeighborOut:
    """Response body of a :class:`Neighbor`."""
    return NeighborOut(
        memory=memory_out(neighbor.memory), steps=neighbor.steps, via=relation_out(neighbor.via)
    )


def _optional_float(value: float | None) -> float | None:
    return None if value is None else float(value)


def hit_out(hit: Hit) -> HitOut:
    """Response body of a :class:`Hit`: the memory's fields (:func:`memory_out`), then its scores.

    Scores go through ``float()``: numpy scalars are not JSON-encodable.
    """
    return HitOut(
        **msgspec.structs.asdict(memory_out(hit.memory)),
        score=float(hit.score),
        vector_score=_optional_float(hit.vector_score),
        text_score=_optional_float(hit.text_score),
        rank=hit.rank,
        cached=hit.cached,
        expanded_from=hit.expanded_from,
        boost=float(hit.boost),
        anchor_match=_optional_float(hit.anchor_match),
        rank_score=_optional_float(hit.rank_score),
        cosine=_optional_float(hit.cosine),
    )


def search_out(result: SearchResult) -> SearchOut:
    """Response body of a :class:`SearchResult`."""
    return SearchOut(
        hits=[hit_out(hit) for hit in result.hits],
        mode=result.mode,
        fallback=result.fallback,
        took_ms=float(result.took_ms),
        variant=result.variant,
        cached=result.cached,
        retrieval_id=result.retrieval_id,
        context=[context_out(entry) for entry in result.context],
        mode_reason=result.mode_reason,
        cosine_range=(
            None
            if result.cosine_range is None
            else (float(result.cosine_range[0]), float(result.cosine_range[1]))
        ),
    )


def _optional_memory(memory: Memory | None) -> MemoryOut | None:
    return None if memory is None else memory_out(memory)


def context_out(context: ChunkContext) -> ChunkContextOut:
    """Response body of a :class:`ChunkContext`."""
    return ChunkContextOut(
        memory_id=context.memory_id,
        parent=_optional_memory(context.parent),
        previous=_optional_memory(context.previous),
        next=_optional_memory(context.next),
    )


def feedback_out(result: FeedbackResult) -> FeedbackOut:
    """Response body of a :class:`FeedbackResult`."""
    return msgspec.convert(result, FeedbackOut, from_attributes=True)


def anchor_out(anchor: Anchor) -> AnchorOut:
    """Response body of an :class:`Anchor`."""
    return msgspec.convert(anchor, AnchorOut, from_attributes=True)


def _usage_out(counts: UsageCounts) -> UsageOut:
    return msgspec.convert(counts, UsageOut, from_attributes=True)


def retrieval_stats_out(stats: RetrievalStats) -> RetrievalStatsOut:
    """Response body of :class:`RetrievalStats`; each curve point's counts are flattened in."""
    curve = [
        CurvePointOut(period=point.period, **msgspec.structs.asdict(_usage_out(point.counts)))
        for point in stats.learning_curve
    ]
    return RetrievalStatsOut(
        overall=_usage_out(stats.overall),
        variants={name: _usage_out(counts) for name, counts in stats.variants.items()},
        expansion_lift=_optional_float(stats.expansion_lift),
        expanded_hits=stats.expanded_hits,
        learning_curve=curve,
        cache_entries=stats.cache_entries,
        cache_eligible=stats.cache_eligible,
        weights=stats.weights,
        anchors=stats.anchors,
        llm_calls=stats.llm_calls,
        llm_failures=stats.llm_failures,
        counters=dict(stats.counters),
    )


def import_out(result: ImportResult) -> ImportOut:
    """Response body of an :class:`~tribal_memory.ops.transfer.ImportResult`."""
    return msgspec.convert(result, ImportOut, from_attributes=True)

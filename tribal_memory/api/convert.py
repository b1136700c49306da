"""Converters from the core's frozen dataclasses to the API's response Structs."""

from __future__ import annotations

import msgspec

from tribal_memory.api.schemas import (
    CaptureOut,
    HitOut,
    MemoryOut,
    NeighborOut,
    RelationOut,
    SearchOut,
    StatsOut,
)
from tribal_memory.models import (
    CaptureResult,
    Hit,
    Memory,
    Neighbor,
    Relation,
    SearchResult,
    StoreStats,
)


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
    """Response body of a :class:`Hit`, the memory's fields flattened in.

    Scores go through ``float()``: numpy scalars are not JSON-encodable.
    """
    memory = hit.memory
    return HitOut(
        memory_id=memory.memory_id,
        content=memory.content,
        owner=memory.owner,
        kind=memory.kind,
        tags=list(memory.tags),
        source=memory.source,
        score=float(hit.score),
        vector_score=_optional_float(hit.vector_score),
        text_score=_optional_float(hit.text_score),
        rank=hit.rank,
        metadata=dict(memory.metadata),
        created_at=memory.created_at,
        updated_at=memory.updated_at,
        event_time=memory.event_time,
        doc_id=memory.doc_id,
        chunk_index=memory.chunk_index,
        parent_id=memory.parent_id,
    )


def search_out(result: SearchResult) -> SearchOut:
    """Response body of a :class:`SearchResult`."""
    return SearchOut(
        hits=[hit_out(hit) for hit in result.hits],
        mode=result.mode,
        fallback=result.fallback,
        took_ms=float(result.took_ms),
    )

"""Request and response bodies of ``/v1/relations``: edges and a memory's neighbours."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import msgspec

from tribal_memory.interfaces.api.schemas import MemoryOut, Source, _Request


class RelateRequest(_Request):
    """The edge ``source_id -[type]-> target_id`` with a weight >= 0."""

    source_id: Source
    target_id: Source
    type: Source
    weight: Annotated[float, msgspec.Meta(ge=0.0)] = 1.0


class RelationKey(_Request):
    """Identifies one edge."""

    source_id: Source
    target_id: Source
    type: Source


class RelationOut(msgspec.Struct):
    """A directed, typed, weighted edge between two memories."""

    source_id: str
    target_id: str
    type: str
    weight: float
    created_at: datetime


class RelationsOut(msgspec.Struct):
    """Edges touching a memory (either direction), newest first."""

    relations: list[RelationOut]


class NeighborOut(msgspec.Struct):
    """A memory ``steps`` hops away, reached over the relation ``via``."""

    memory: MemoryOut
    steps: int
    via: RelationOut


class NeighborsOut(msgspec.Struct):
    """Memories reached by breadth-first search, nearest first (empty: none)."""

    neighbors: list[NeighborOut]

"""Request and response bodies of the graph routes: intersections and bulk edge writes."""

from __future__ import annotations

from typing import Annotated

import msgspec

from tribal_memory.base.validation import MAX_BATCH_ITEMS
from tribal_memory.interfaces.api.relation_schemas import RelateRequest, RelationOut
from tribal_memory.interfaces.api.schemas import MemoryOut, _Request


class CommonNeighborOut(msgspec.Struct):
    """A memory within reach of every given memory.

    ``steps``: its hop count from each given memory, in the order of ``ids``
    (each >= 1).
    """

    memory: MemoryOut
    steps: list[int]


class IntersectionOut(msgspec.Struct):
    """Memories within ``steps`` hops of all the given ones, closest first (empty: none).

    Closest means the smallest largest hop count, then the smallest sum.
    The given memories themselves are never listed.
    """

    memories: list[CommonNeighborOut]


class RelateBatchRequest(_Request):
    """Edges to add or re-weight in one write (1 to ``max_batch_size``).

    The whole batch is checked before anything is written: one bad edge
    (unknown or invisible end, self-relation, bad type or weight) rejects it,
    and the error names the edge as ``relations[i]``.
    """

    relations: Annotated[list[RelateRequest], msgspec.Meta(max_length=MAX_BATCH_ITEMS)]


class RelateBatchOut(msgspec.Struct):
    """The stored edges, one per requested edge, in request order."""

    relations: list[RelationOut]

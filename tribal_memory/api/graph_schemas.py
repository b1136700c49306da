"""Request and response bodies of the graph routes: intersections and bulk edge writes."""

from __future__ import annotations

import msgspec

from tribal_memory.api.schemas import MemoryOut


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

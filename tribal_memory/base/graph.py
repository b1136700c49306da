"""The shapes of the relation graph: edges, traversals and the memories they reach."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from tribal_memory.base.models import Memory


@dataclass(frozen=True, slots=True)
class Relation:
    """A directed, typed edge between two memories. ``weight`` is >= 0."""

    source_id: str
    target_id: str
    type: str
    weight: float
    created_at: datetime


@dataclass(frozen=True, slots=True)
class RelationInput:
    """An edge to write: ``source_id -[type]-> target_id`` with ``weight`` >= 0."""

    source_id: str
    target_id: str
    type: str
    weight: float = 1.0


@dataclass(frozen=True, slots=True)
class Neighbor:
    """A memory reached from another by BFS over relations.

    ``steps`` is the hop count (>= 1); ``via`` is the relation that reached it.
    """

    memory: Memory
    steps: int
    via: Relation


MAX_STEPS = 5
"""Most hops any graph walk takes."""


@dataclass(frozen=True, slots=True)
class Traversal:
    """How a walk over relations moves (either direction along each edge).

    ``steps``: most hops, 1 to :data:`MAX_STEPS`. ``types``: follow only
    relations of these types (empty: every type). ``block``: never pass
    through these: an edge whose type is listed is not followed, and a memory
    whose kind is listed (``fact``, ``chunk``, ``document``) is neither
    returned nor walked through (the walk's own start memories excepted). A
    name counts both ways, as a relation type and as a kind; ``block`` wins
    over ``types``.
    """

    steps: int = 1
    types: tuple[str, ...] = ()
    block: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Near:
    """Restrict a search to the graph neighbourhood of one memory.

    ``memory_id``: the constraint memory; it belongs to its own neighbourhood
    (0 steps). ``traversal``: how far and over which relations the
    neighbourhood reaches (see :class:`Traversal`).
    """

    memory_id: str
    traversal: Traversal = field(default_factory=Traversal)


@dataclass(frozen=True, slots=True)
class CommonNeighbor:
    """A memory within reach of every one of several memories (an intersection).

    ``steps``: its hop count from each of them, in the order they were given
    (each >= 1).
    """

    memory: Memory
    steps: tuple[int, ...]

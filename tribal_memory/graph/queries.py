"""Constrained graph queries over relations: walks, neighbourhoods and intersections (DESIGN §7).

Every query walks breadth-first over relations in either direction, one SQL
read of the frontier's edges and one store read of the memories reached per
hop. Visibility holds at every step, as in ``neighbors``: a memory the owner
may not see is never returned, counted or walked through, so no path runs
through it. A :class:`~tribal_memory.base.graph.Traversal` narrows the walk to
some relation types and blocks others (and memory kinds).
"""

from __future__ import annotations

from collections.abc import Sequence

from tribal_memory.base.errors import InvalidInput, NotFound
from tribal_memory.base.graph import MAX_STEPS, CommonNeighbor, Neighbor, Relation, Traversal
from tribal_memory.base.models import Memory, SearchFilters
from tribal_memory.graph.relations import MAX_TYPE_CHARS, RelationGraph
from tribal_memory.store.base import MemoryStore

MAX_NAMES = 32
"""Most names in ``Traversal.types`` or ``Traversal.block``."""
MAX_INTERSECTION_IDS = 16
"""Most memories one intersection may name."""


def check_traversal(traversal: Traversal) -> Traversal:
    """``traversal`` with its names stripped and deduplicated (order kept).

    Raises:
        InvalidInput: steps outside 1..:data:`MAX_STEPS`; more than
            :data:`MAX_NAMES` types or blocked names; an empty or over-long name.
    """
    if not 1 <= traversal.steps <= MAX_STEPS:
        raise InvalidInput(f"steps must be between 1 and {MAX_STEPS}")
    return Traversal(
        traversal.steps,
        _names(traversal.types, "types"),
        _names(traversal.block, "block"),
    )


def _names(values: Sequence[str], field: str) -> tuple[str, ...]:
    if len(values) > MAX_NAMES:
        raise InvalidInput(f"{field} may name at most {MAX_NAMES} entries, not {len(values)}")
    names: list[str] = []
    for value in values:
        name = value.strip()
        if not name or len(name) > MAX_TYPE_CHARS:
            raise InvalidInput(f"each of {field} must be 1 to {MAX_TYPE_CHARS} characters")
        if name not in names:
            names.append(name)
    return tuple(names)


def _follows(edge: Relation, traversal: Traversal) -> bool:
    if edge.type in traversal.block:
        return False
    return not traversal.types or edge.type in traversal.types


class GraphQueries:
    """Walks over ``graph`` whose memories are read from ``store``.

    Args:
        graph: The relations.
        store: The memories (their owner and kind decide what a walk may enter).
    """

    def __init__(self, graph: RelationGraph, store: MemoryStore) -> None:
        self._graph = graph
        self._store = store

    def start(self, memory_id: str, owner: str | None) -> Memory:
        """The memory a walk starts from.

        Raises:
            NotFound: no such memory, or not visible to ``owner`` (one answer).
        """
        memory = self._store.get([memory_id]).get(memory_id)
        if memory is None or not _visible(memory, owner):
            raise NotFound(f"no memory with id {memory_id}")
        return memory

    def walk(self, memory_id: str, traversal: Traversal, owner: str | None) -> list[Neighbor]:
        """Memories within ``traversal.steps`` hops of ``memory_id``, BFS order.

        The start itself is not among them. Each memory appears once, at its
        least hop count, with the edge that first reached it.

        Args:
            memory_id: The start; checked by the caller (see :meth:`start`).
            traversal: Already checked (:func:`check_traversal`).
            owner: Whose view (None: every memory is visible).

        Returns:
            The neighbours (empty: none).
        """
        seen = {memory_id}
        frontier = [memory_id]
        found: list[Neighbor] = []
        for depth in range(1, traversal.steps + 1):
            reached: dict[str, Relation] = {}
            for edge in self._graph.edges_of(frontier):
                if not _follows(edge, traversal):
                    continue
                for other in (edge.source_id, edge.target_id):
                    if other not in seen and other not in reached:
                        reached[other] = edge
            memories = self._store.get(list(reached))
            frontier = []
            for other, edge in reached.items():
                memory = memories.get(other)
                seen.add(other)
                if memory is None or not _visible(memory, owner):
                    continue
                if memory.kind in traversal.block:
                    continue
                found.append(Neighbor(memory, depth, edge))
                frontier.append(other)
            if not frontier:
                break
        return found

    def neighbourhood(self, memory_id: str, traversal: Traversal, owner: str | None) -> list[str]:
        """Ids of ``memory_id`` (first) and of every memory :meth:`walk` reaches from it.

        Raises:
            NotFound: the memory does not exist or is not visible to ``owner``.
        """
        self.start(memory_id, owner)
        return [memory_id, *(n.memory.memory_id for n in self.walk(memory_id, traversal, owner))]

    def intersection(
        self, memory_ids: Sequence[str], traversal: Traversal, owner: str | None, *, limit: int
    ) -> list[CommonNeighbor]:
        """Memories within ``traversal.steps`` hops of every one of ``memory_ids``.

        The given memories themselves are not returned (each is 0 hops from
        itself; the answer is what lies between them).

        Args:
            memory_ids: 2 to :data:`MAX_INTERSECTION_IDS` distinct ids.
            traversal: Already checked (:func:`check_traversal`).
            owner: Whose view (None: every memory is visible).
            limit: Most memories returned (>= 1).

        Returns:
            Closest first: by the largest of the hop counts, then their sum,
            then id. Empty when nothing is within reach of all of them.

        Raises:
            InvalidInput: fewer than 2 or more than :data:`MAX_INTERSECTION_IDS`
                ids, or an id given twice.
            NotFound: one of them does not exist or is not visible to ``owner``.
        """
        if not 2 <= len(memory_ids) <= MAX_INTERSECTION_IDS:
            raise InvalidInput(
                f"intersection needs 2 to {MAX_INTERSECTION_IDS} memory ids, not {len(memory_ids)}"
            )
        if len(set(memory_ids)) != len(memory_ids):
            raise InvalidInput("intersection memory ids must be distinct")
        for memory_id in memory_ids:
            self.start(memory_id, owner)
        common: dict[str, list[int]] | None = None
        memories: dict[str, Memory] = {}
        for memory_id in memory_ids:
            walked = self.walk(memory_id, traversal, owner)
            memories.update((n.memory.memory_id, n.memory) for n in walked)
            depths = {n.memory.memory_id: n.steps for n in walked}
            if common is None:
                common = {i: [d] for i, d in depths.items()}
            else:
                common = {i: [*ds, depths[i]] for i, ds in common.items() if i in depths}
            if not common:
                return []
        assert common is not None  # two or more ids were walked
        given = set(memory_ids)
        found = [
            CommonNeighbor(memories[i], tuple(ds)) for i, ds in common.items() if i not in given
        ]
        found.sort(key=lambda c: (max(c.steps), sum(c.steps), c.memory.memory_id))
        return found[:limit]


def _visible(memory: Memory, owner: str | None) -> bool:
    return SearchFilters(owner=owner).admits_owner(memory.owner)

"""The service's graph operations: relate memories, walk and intersect their neighbourhoods.

A mixin of :class:`~tribal_memory.service.memory_service.MemoryService`.
Edges live in :class:`~tribal_memory.graph.relations.RelationGraph`; walks that
respect what a caller may see are :class:`~tribal_memory.graph.queries.GraphQueries`.
Writes hold the core's references lock, so a concurrent delete cannot leave
an edge pointing at a memory that is gone.
"""

from __future__ import annotations

from collections.abc import Sequence

from tribal_memory.base.config import Settings
from tribal_memory.base.errors import InvalidInput, NotFound, TooLarge
from tribal_memory.base.graph import CommonNeighbor, Neighbor, Relation, RelationInput, Traversal
from tribal_memory.base.validation import check_k
from tribal_memory.core import Core
from tribal_memory.graph.queries import GraphQueries, check_traversal
from tribal_memory.graph.relations import RelationGraph


class GraphOperations:
    """Relate, unrelate, list relations, neighbours and intersections (a mixin)."""

    core: Core
    settings: Settings
    graph: RelationGraph
    graph_queries: GraphQueries

    def relate(
        self,
        source_id: str,
        target_id: str,
        type: str,
        *,
        weight: float = 1.0,
        owner: str | None = None,
    ) -> Relation:
        """Add (or re-weight) the edge ``source -[type]-> target``; idempotent.

        Raises:
            NotFound: either memory does not exist or is not visible to ``owner``.
            InvalidInput: self-relation, empty or over-long type, negative weight.
        """
        if source_id == target_id:
            raise InvalidInput("a memory cannot be related to itself")
        with self.core.references_lock:
            self.core.get(source_id, owner=owner)
            self.core.get(target_id, owner=owner)
            return self.graph.relate(source_id, target_id, type, weight)

    def relate_batch(
        self, edges: Sequence[RelationInput], *, owner: str | None = None
    ) -> list[Relation]:
        """Add (or re-weight) many edges in one write; one bad edge rejects the batch.

        The whole batch is checked first (types, weights, no self-relation,
        both ends existing and visible to ``owner``); any error names the
        edge by its position (``relations[3]: ...``) and nothing is written.

        Args:
            edges: Up to ``max_batch_size`` edges; an edge given twice is
                written once, with its last weight.
            owner: Whose view (None: every memory).

        Returns:
            The stored edges, one per input, in input order.

        Raises:
            InvalidInput: an empty batch, a self-relation, an empty or
                over-long type, a negative weight.
            TooLarge: more than ``max_batch_size`` edges.
            NotFound: an end that does not exist or is not visible to ``owner``.
        """
        if not edges:
            raise InvalidInput("relations must not be empty")
        if len(edges) > self.settings.max_batch_size:
            raise TooLarge(
                f"batch of {len(edges)} relations is over the limit of "
                f"{self.settings.max_batch_size} (TRIBAL_MAX_BATCH_SIZE)"
            )
        for i, edge in enumerate(edges):
            if edge.source_id == edge.target_id:
                raise InvalidInput(f"relations[{i}]: a memory cannot be related to itself")
        with self.core.references_lock:
            ids = [i for e in edges for i in (e.source_id, e.target_id)]
            visible = self.core.get_many(ids, owner=owner)
            for i, edge in enumerate(edges):
                for end in (edge.source_id, edge.target_id):
                    if end not in visible:
                        raise NotFound(f"relations[{i}]: no memory with id {end}")
            return self.graph.relate_many(edges)

    def unrelate(
        self, source_id: str, target_id: str, type: str, *, owner: str | None = None
    ) -> None:
        """Remove one edge.

        Both ends must be visible to ``owner``; whichever check fails, the
        answer is the same, so a caller learns nothing of edges it may not see.

        Raises:
            NotFound: no such edge, or either end not visible to ``owner``.
        """
        with self.core.references_lock:
            visible = self.core.get_many([source_id, target_id], owner=owner)
            both = source_id in visible and target_id in visible
            if not both or not self.graph.unrelate(source_id, target_id, type):
                raise NotFound(f"no relation {source_id} -[{type}]-> {target_id}")

    def relations(self, memory_id: str, *, owner: str | None = None) -> list[Relation]:
        """Edges touching the memory (either direction), newest first.

        Edges whose other end ``owner`` cannot see are left out (they would
        reveal that memory's id).

        Raises:
            NotFound: no such memory visible to ``owner``.
        """
        self.core.get(memory_id, owner=owner)
        edges = self.graph.edges_of([memory_id])
        if owner is None:
            return edges
        visible = self.core.get_many(
            [i for e in edges for i in (e.source_id, e.target_id)], owner=owner
        )
        return [e for e in edges if e.source_id in visible and e.target_id in visible]

    def neighbors(
        self,
        memory_id: str,
        *,
        steps: int = 1,
        owner: str | None = None,
        types: Sequence[str] = (),
        block: Sequence[str] = (),
    ) -> list[Neighbor]:
        """Memories within ``steps`` hops over relations (either direction), BFS order.

        Memories not visible to ``owner`` are neither returned nor walked through.
        ``types`` and ``block`` narrow the walk (see :class:`~tribal_memory.base.graph.Traversal`).

        Returns:
            Each memory once, at its least hop count (>= 1), with the edge that
            reached it; empty when nothing is related.

        Raises:
            NotFound: the start memory does not exist or is not visible.
            InvalidInput: steps outside 1..5; a bad type or blocked name.
        """
        traversal = check_traversal(Traversal(steps, tuple(types), tuple(block)))
        self.graph_queries.start(memory_id, owner)
        return self.graph_queries.walk(memory_id, traversal, owner)

    def intersection(
        self,
        memory_ids: Sequence[str],
        *,
        steps: int = 1,
        owner: str | None = None,
        types: Sequence[str] = (),
        block: Sequence[str] = (),
        limit: int | None = None,
    ) -> list[CommonNeighbor]:
        """Memories within ``steps`` hops of every one of ``memory_ids`` (the given ones excepted).

        Walks as :meth:`neighbors` does from each of them, with the same
        visibility: a memory ``owner`` may not see is never returned, counted
        or walked through.

        Args:
            memory_ids: 2 to 16 distinct memory ids.
            steps: Most hops from each, 1 to 5.
            owner: Whose view (None: every memory).
            types: Follow only relations of these types (empty: all).
            block: Relation types never followed and memory kinds never entered.
            limit: Most memories returned, 1 to ``max_k`` (None: 100 or
                ``max_k`` if smaller).

        Returns:
            Closest first (by the largest hop count, then their sum), each with
            its hop count from every given memory, in their order; empty when
            nothing is within reach of all of them.

        Raises:
            NotFound: one of the memories does not exist or is not visible.
            InvalidInput: fewer than 2 or more than 16 ids, a repeated id,
                steps outside 1..5, a bad type or blocked name, limit < 1.
            TooLarge: limit over ``max_k``.
        """
        limit = self._limit(limit)
        traversal = check_traversal(Traversal(steps, tuple(types), tuple(block)))
        return self.graph_queries.intersection(list(memory_ids), traversal, owner, limit=limit)

    def _limit(self, limit: int | None) -> int:
        """``limit``, checked against ``max_k``; None: 100 or ``max_k`` if smaller.

        Raises:
            InvalidInput: limit < 1. TooLarge: limit over ``max_k``.
        """
        if limit is None:
            return min(100, self.settings.max_k)
        check_k(limit, self.settings.max_k)
        return limit

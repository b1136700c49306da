"""Relations: typed, weighted edges between memories, and graph neighbours."""

from __future__ import annotations

from typing import Annotated

from litestar import Controller, delete, get, post
from litestar.params import FromPath, FromQuery, JSONBody, QueryParameter
from litestar.status_codes import HTTP_200_OK, HTTP_204_NO_CONTENT

from tribal_memory.base.errors import InvalidInput
from tribal_memory.base.graph import RelationInput
from tribal_memory.interfaces.api.auth import OwnerScope
from tribal_memory.interfaces.api.convert import neighbor_out, relation_out
from tribal_memory.interfaces.api.deps import Service
from tribal_memory.interfaces.api.errors import error_responses
from tribal_memory.interfaces.api.graph import BlockQuery, TypesQuery, comma_list
from tribal_memory.interfaces.api.graph_schemas import RelateBatchOut, RelateBatchRequest
from tribal_memory.interfaces.api.relation_schemas import (
    NeighborsOut,
    RelateRequest,
    RelationKey,
    RelationOut,
    RelationsOut,
)


class RelationsController(Controller):
    """Create and remove edges; list a memory's edges and neighbours."""

    path = "/v1"
    tags = ["relations"]

    @post(
        "/relations",
        sync_to_thread=True,
        status_code=HTTP_200_OK,
        responses=error_responses(400, 404),
    )
    def relate(
        self, data: JSONBody[RelateRequest], service: Service, owner_scope: OwnerScope
    ) -> RelationOut:
        """Add the edge ``source_id -[type]-> target_id``, or re-weight it if it exists.

        An upsert, so the answer is 200 either way, with the stored edge.

        Raises:
            NotFound: 404, either memory missing or not visible to ``owner``.
            InvalidInput: 400, self-relation, empty or over-long type.
        """
        relation = service.relate(
            data.source_id, data.target_id, data.type, weight=data.weight, owner=owner_scope
        )
        return relation_out(relation)

    @post(
        "/relations/batch",
        sync_to_thread=True,
        status_code=HTTP_200_OK,
        responses=error_responses(400, 404, 413),
    )
    def relate_batch(
        self, data: JSONBody[RelateBatchRequest], service: Service, owner_scope: OwnerScope
    ) -> RelateBatchOut:
        """Add or re-weight many edges in one write; one bad edge rejects the whole batch.

        Every edge is checked before anything is written; the error names the
        bad one (``relations[i]``) and nothing is stored.

        Raises:
            InvalidInput: 400, an empty batch, a self-relation, an empty or
                over-long type, a negative weight (also a malformed body).
            NotFound: 404, an end missing or not visible to ``owner``.
            TooLarge: 413, more than ``max_batch_size`` edges.
        """
        edges = [RelationInput(r.source_id, r.target_id, r.type, r.weight) for r in data.relations]
        stored = service.relate_batch(edges, owner=owner_scope)
        return RelateBatchOut(relations=[relation_out(r) for r in stored])

    @delete(
        "/relations",
        sync_to_thread=True,
        status_code=HTTP_204_NO_CONTENT,
        responses=error_responses(400, 404),
    )
    def unrelate(
        self,
        service: Service,
        owner_scope: OwnerScope,
        data: JSONBody[RelationKey | None] = None,
        source_id: FromQuery[str | None] = None,
        target_id: FromQuery[str | None] = None,
        relation_type: Annotated[str | None, QueryParameter(name="type")] = None,
    ) -> None:
        """Remove one edge (204), named in the JSON body or the query string.

        The query parameters are ``source_id``, ``target_id`` and ``type``.

        Raises:
            NotFound: 404, no such edge, or either end not visible to ``owner`` (one answer).
            InvalidInput: 400, neither a body nor all three query parameters.
        """
        if data is None:
            if source_id is None or target_id is None or relation_type is None:
                raise InvalidInput("name the relation: source_id, target_id and type")
            data = RelationKey(source_id=source_id, target_id=target_id, type=relation_type)
        service.unrelate(data.source_id, data.target_id, data.type, owner=owner_scope)

    @get(
        "/memories/{memory_id:str}/relations",
        sync_to_thread=True,
        responses=error_responses(404),
    )
    def relations(
        self, memory_id: FromPath[str], service: Service, owner_scope: OwnerScope
    ) -> RelationsOut:
        """Edges touching the memory in either direction, newest first (empty: none).

        Raises:
            NotFound: 404, no such memory visible to ``owner``.
        """
        edges = service.relations(memory_id, owner=owner_scope)
        return RelationsOut(relations=[relation_out(edge) for edge in edges])

    @get(
        "/memories/{memory_id:str}/neighbors",
        sync_to_thread=True,
        responses=error_responses(400, 404),
    )
    def neighbors(
        self,
        memory_id: FromPath[str],
        service: Service,
        owner_scope: OwnerScope,
        steps: Annotated[int, QueryParameter(description="Hops, 1 to 5.")] = 1,
        types: TypesQuery = None,
        block: BlockQuery = None,
    ) -> NeighborsOut:
        """Memories within ``steps`` hops over relations (either direction), nearest first.

        Memories not visible to ``owner`` are neither returned nor walked
        through. ``types`` and ``block`` narrow the walk.

        Raises:
            NotFound: 404, the start memory is missing or not visible.
            InvalidInput: 400, steps outside 1..5, a bad type or blocked name.
        """
        found = service.neighbors(
            memory_id,
            steps=steps,
            owner=owner_scope,
            types=comma_list(types),
            block=comma_list(block),
        )
        return NeighborsOut(neighbors=[neighbor_out(neighbor) for neighbor in found])

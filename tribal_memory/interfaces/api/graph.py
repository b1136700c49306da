"""Graph queries: ``GET /v1/graph/intersection`` (DESIGN §7)."""

from __future__ import annotations

from typing import Annotated

from litestar import Controller, get
from litestar.params import QueryParameter

from tribal_memory.interfaces.api.auth import OwnerScope
from tribal_memory.interfaces.api.convert import memory_out
from tribal_memory.interfaces.api.deps import Service
from tribal_memory.interfaces.api.errors import error_responses
from tribal_memory.interfaces.api.graph_schemas import CommonNeighborOut, IntersectionOut

TYPES_DESCRIPTION = "Follow only relations of these types (comma-separated; default: every type)."
BLOCK_DESCRIPTION = (
    "Never pass through these (comma-separated): relations of these types are not followed, "
    "memories of these kinds (fact, chunk, document, summary) are neither returned nor walked "
    "through."
)
TypesQuery = Annotated[str | None, QueryParameter(description=TYPES_DESCRIPTION)]
BlockQuery = Annotated[str | None, QueryParameter(description=BLOCK_DESCRIPTION)]


def comma_list(value: str | None) -> tuple[str, ...]:
    """The non-blank items of a comma-separated query parameter (None: none)."""
    if value is None:
        return ()
    return tuple(item.strip() for item in value.split(",") if item.strip())


class GraphController(Controller):
    """Queries over the graph of memories and relations, within the caller's view."""

    path = "/v1/graph"
    tags = ["relations"]

    @get("/intersection", sync_to_thread=True, responses=error_responses(400, 403, 404, 413))
    def intersection(
        self,
        service: Service,
        owner_scope: OwnerScope,
        ids: Annotated[
            str, QueryParameter(description="2 to 16 distinct memory ids, comma-separated.")
        ],
        steps: Annotated[int, QueryParameter(description="Most hops from each, 1 to 5.")] = 1,
        types: TypesQuery = None,
        block: BlockQuery = None,
        limit: Annotated[
            int | None, QueryParameter(description="Most memories, 1 to max_k (default 100).")
        ] = None,
    ) -> IntersectionOut:
        """Memories within ``steps`` hops of every one of ``ids`` over relations (either way).

        Visibility holds at every step, as for neighbours: a memory not
        visible to ``owner`` is never returned, counted or walked through.
        The given memories are not listed themselves. Nothing in common is an
        empty list, not an error.

        Raises:
            InvalidInput: 400, fewer than 2 or more than 16 ids, a repeated id,
                steps outside 1..5, a bad type or blocked name, limit < 1.
            NotFound: 404, one of ``ids`` missing or not visible to ``owner``.
            TooLarge: 413, limit over ``max_k``.
        """
        found = service.intersection(
            comma_list(ids),
            steps=steps,
            owner=owner_scope,
            types=comma_list(types),
            block=comma_list(block),
            limit=limit,
        )
        return IntersectionOut(
            memories=[
                CommonNeighborOut(memory=memory_out(c.memory), steps=list(c.steps)) for c in found
            ]
        )

"""Statistics: ``GET /v1/stats``, ``/v1/stats/owner`` and ``/v1/stats/retrieval``.

The store's counts (admin only), one owner's view (any key, for its own
owner), and what the learned layer did.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

import msgspec
from litestar import get
from litestar.params import QueryParameter

from tribal_memory.base.errors import InvalidInput
from tribal_memory.interfaces.api.auth import CallerDep
from tribal_memory.interfaces.api.convert import retrieval_stats_out, stats_out
from tribal_memory.interfaces.api.deps import Service
from tribal_memory.interfaces.api.errors import error_responses
from tribal_memory.interfaces.api.stats_schemas import OwnerStatsOut, RetrievalStatsOut, StatsOut


@get("/v1/stats", sync_to_thread=True, tags=["stats"], responses=error_responses(403, 503))
def stats(service: Service, caller: CallerDep) -> StatsOut:
    """Memory counts (total, per owner, per kind), relation count, model and index state.

    With authentication on it needs an admin key: the counts name every owner.

    Raises:
        Forbidden: 403, a non-admin key.
        StoreUnavailable: 503, the store cannot be read.
    """
    caller.require_admin("store statistics")
    return stats_out(service.stats())


@get("/v1/stats/owner", sync_to_thread=True, tags=["stats"], responses=error_responses(403, 503))
def owner_stats(
    service: Service,
    caller: CallerDep,
    owner: Annotated[
        str | None,
        QueryParameter(
            description="The owner counted (default: the key's owner; every owner with "
            "authentication off or an admin key)."
        ),
    ] = None,
) -> OwnerStatsOut:
    """One owner's view: its memories, the shared ones, its documents, model and index state.

    Unlike ``/v1/stats`` any key may ask, for its own owner (or ``shared``):
    agent plugins report memory status with it.

    Raises:
        Forbidden: 403, a non-admin key named another owner.
        StoreUnavailable: 503, the store cannot be read.
    """
    scoped = caller.scope(owner)
    return msgspec.convert(service.owner_stats(scoped), OwnerStatsOut, from_attributes=True)


@get(
    "/v1/stats/retrieval",
    sync_to_thread=True,
    tags=["stats"],
    responses=error_responses(400, 403, 503),
)
def retrieval_stats(
    service: Service,
    caller: CallerDep,
    owner: Annotated[
        str | None,
        QueryParameter(
            description="Only this owner's retrievals (default: all; a non-admin key: its own)."
        ),
    ] = None,
    bucket: Annotated[
        Literal["day", "week"], QueryParameter(description="Period of the learning curve.")
    ] = "day",
    since: Annotated[
        datetime | None,
        QueryParameter(description="Only retrievals at or after this RFC 3339 time (with zone)."),
    ] = None,
) -> RetrievalStatsOut:
    """Usage per A/B variant, cache hit rate, expansion lift and a learning curve.

    Rates are shares in [0, 1] (0.0 over no retrievals); see
    :class:`~tribal_memory.interfaces.api.stats_schemas.RetrievalStatsOut` for each field.

    Raises:
        InvalidInput: 400, an unknown bucket or a ``since`` without a time zone.
        StoreUnavailable: 503, the database cannot be read.
    """
    if since is not None and since.tzinfo is None:
        raise InvalidInput("since must carry a time zone (e.g. 2026-01-01T00:00:00Z)")
    scope = caller.scope(owner)
    # A non-admin key sees its own retrievals, whatever scope it searched.
    owner = caller.learner if caller.learner is not None else scope
    return retrieval_stats_out(service.retrieval_stats(owner=owner, bucket=bucket, since=since))

"""Store statistics: ``GET /v1/stats``."""

from __future__ import annotations

from litestar import get

from tribal_memory.api.convert import stats_out
from tribal_memory.api.deps import Service
from tribal_memory.api.errors import error_responses
from tribal_memory.api.schemas import StatsOut


@get("/v1/stats", sync_to_thread=True, tags=["stats"], responses=error_responses(503))
def stats(service: Service) -> StatsOut:
    """Memory counts (total, per owner, per kind), relation count, model and index state.

    Raises:
        StoreUnavailable: 503, the store cannot be read.
    """
    return stats_out(service.stats())

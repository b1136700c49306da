"""Liveness: ``GET /health`` (no embedding, no store query)."""

from __future__ import annotations

from litestar import get

from tribal_memory import __version__
from tribal_memory.interfaces.api.auth import PUBLIC
from tribal_memory.interfaces.api.deps import Service
from tribal_memory.interfaces.api.stats_schemas import HealthOut


@get("/health", sync_to_thread=False, tags=["health"], opt=PUBLIC)
def health(service: Service) -> HealthOut:
    """``{"status": "ok", ...}`` once the service is open; answers without touching the model.

    Raises:
        StoreUnavailable: 503, the service is not open.
    """
    return HealthOut(
        status="ok",
        version=__version__,
        embedding_model=service.embedder.model_id,
        embedding_dim=service.embedder.dim,
    )

"""Dependencies injected into handlers."""

from __future__ import annotations

from litestar.datastructures import State
from litestar.di import NamedDependency, Provide

from tribal_memory.base.errors import StoreUnavailable
from tribal_memory.service.memory_service import MemoryService

SERVICE_STATE_KEY = "service"
"""Key of the open :class:`MemoryService` in ``app.state`` (set by the lifespan)."""


def provide_service(state: State) -> MemoryService:
    """The app's :class:`MemoryService`, opened in the lifespan.

    Raises:
        StoreUnavailable: the service is not open (startup failed or shutdown began).
    """
    service = state.get(SERVICE_STATE_KEY)
    if not isinstance(service, MemoryService):
        raise StoreUnavailable("the memory service is not open")
    return service


Service = NamedDependency[MemoryService]
"""Annotation of a handler's ``service`` parameter (injected by name)."""

DEPENDENCIES = {"service": Provide(provide_service, sync_to_thread=False)}
"""Handlers declare ``service: Service`` and get the app's open service."""

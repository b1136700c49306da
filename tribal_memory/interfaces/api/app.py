"""The Litestar application factory.

``create_app(settings)`` builds the app; the :class:`MemoryService` is opened
in the lifespan (in a worker thread: loading the model blocks) and closed on
shutdown. Handlers are synchronous and run with ``sync_to_thread=True``.
Background workers (``serve --watch-openclaw``'s watcher) run in threads of
their own on the same service, from startup until shutdown.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import anyio.to_thread
from litestar import Litestar, Request
from litestar.config.cors import CORSConfig
from litestar.datastructures import State
from litestar.exceptions import ValidationException
from litestar.plugins.htmx import HTMXPlugin

from tribal_memory.base.config import Settings
from tribal_memory.embeddings.base import Embedder
from tribal_memory.interfaces.api.auth import AUTH_DEPENDENCIES, AUTH_STATE_KEY, authenticate
from tribal_memory.interfaces.api.browser import BrowserGuard
from tribal_memory.interfaces.api.context import context
from tribal_memory.interfaces.api.deps import DEPENDENCIES, SERVICE_STATE_KEY
from tribal_memory.interfaces.api.docs import openapi_config, swagger_static_router
from tribal_memory.interfaces.api.documents import DocumentsController
from tribal_memory.interfaces.api.errors import EXCEPTION_HANDLERS
from tribal_memory.interfaces.api.graph import GraphController
from tribal_memory.interfaces.api.health import health
from tribal_memory.interfaces.api.learned import (
    AnchorsController,
    FeedbackController,
    VariantsController,
)
from tribal_memory.interfaces.api.memories import MemoriesController
from tribal_memory.interfaces.api.owners import OwnersController
from tribal_memory.interfaces.api.relations import RelationsController
from tribal_memory.interfaces.api.retrieval import RetrievalController
from tribal_memory.interfaces.api.stats import owner_stats, retrieval_stats, stats
from tribal_memory.interfaces.api.tools import ToolsController
from tribal_memory.interfaces.api.transfer import export, import_
from tribal_memory.interfaces.dashboard import dashboard_router, template_config
from tribal_memory.service.memory_service import MemoryService

_BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_WORKER_STOP_S = 30.0
"""Longest wait for a background worker at shutdown, in seconds."""

logger = logging.getLogger("tribal_memory.interfaces.api")

Worker = Callable[[MemoryService, threading.Event], None]
"""A background job of the server: runs on the open service until the event is set."""


def _run_worker(worker: Worker, service: MemoryService, stop: threading.Event) -> None:
    """Run ``worker``; a failure is logged (the server goes on serving)."""
    try:
        worker(service, stop)
    except Exception:  # noqa: BLE001 - a worker's failure must not take the server down
        logger.exception("background worker %s failed", getattr(worker, "__name__", worker))


def _start_workers(
    workers: Sequence[Worker], service: MemoryService, stop: threading.Event
) -> list[threading.Thread]:
    threads = [
        threading.Thread(
            target=_run_worker, args=(worker, service, stop), name="tribal-worker", daemon=True
        )
        for worker in workers
    ]
    for thread in threads:
        thread.start()
    return threads


def _stop_workers(threads: Sequence[threading.Thread], stop: threading.Event) -> None:
    stop.set()
    for thread in threads:
        thread.join(timeout=_WORKER_STOP_S)


async def require_utf8_body(request: Request[Any, Any, Any]) -> None:
    """Reject a request body that is not valid UTF-8 with a 400 before it is parsed.

    msgspec raises ``UnicodeDecodeError`` (not a decode error) on such bodies,
    which would otherwise surface as a 500. Reading the body here also enforces
    ``request_max_body_size`` (413). The body is cached for the handler.

    Raises:
        ValidationException: the body is not UTF-8 (400 invalid_request).
    """
    if request.method not in _BODY_METHODS:
        return
    body = await request.body()
    try:
        body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValidationException(f"request body is not valid UTF-8: {exc.reason}") from exc


def _cors_config(origins: tuple[str, ...]) -> CORSConfig | None:
    """CORS answers for the configured origins; None (no CORS headers) without any."""
    if not origins:
        return None
    return CORSConfig(
        allow_origins=list(origins),
        allow_methods=["GET", "POST", "PUT", "PATCH", "DELETE"],
        allow_headers=["authorization", "content-type", "x-agent-id", "if-match"],
        expose_headers=["etag"],  # a web app reads a memory's version for If-Match
    )


def create_app(
    settings: Settings, *, embedder: Embedder | None = None, workers: Sequence[Worker] = ()
) -> Litestar:
    """Build the HTTP API over the data dir and model named by ``settings``.

    The web dashboard is served at ``/ui`` (:mod:`tribal_memory.interfaces.dashboard`)
    unless ``settings.dashboard`` is false.
    Browser requests are held to :class:`~tribal_memory.interfaces.api.browser.BrowserGuard`'s
    rules (``allowed_hosts``, ``cors_origins``); with ``cors_origins`` set,
    those origins also get CORS headers and preflight answers.

    Args:
        settings: Configuration; ``max_request_bytes`` caps request bodies (413).
        embedder: An already loaded embedder to share (tests); loaded from
            ``settings.embedding_model`` at startup if None.
        workers: Jobs started, each in its own thread, once the service is
            open, and stopped (their event set, then joined) before it closes.

    Returns:
        The app. Starting it (lifespan startup) opens the service and raises
        what :class:`MemoryService` raises: ``EmbeddingError``,
        ``EmbeddingModelMismatch`` (the data dir was built with another model),
        ``StoreUnavailable``.
    """

    @asynccontextmanager
    async def service_lifespan(app: Litestar) -> AsyncIterator[None]:
        open_service = partial(MemoryService, settings, embedder=embedder)
        service = await anyio.to_thread.run_sync(open_service)
        app.state[SERVICE_STATE_KEY] = service
        stop = threading.Event()
        threads = _start_workers(workers, service, stop)
        try:
            yield
        finally:
            del app.state[SERVICE_STATE_KEY]
            await anyio.to_thread.run_sync(_stop_workers, threads, stop)
            await anyio.to_thread.run_sync(service.close)

    return Litestar(
        route_handlers=[
            MemoriesController,
            RetrievalController,
            RelationsController,
            GraphController,
            OwnersController,
            DocumentsController,
            FeedbackController,
            AnchorsController,
            VariantsController,
            ToolsController,
            context,
            stats,
            owner_stats,
            retrieval_stats,
            export,
            import_,
            health,
            swagger_static_router(),
            *([dashboard_router()] if settings.dashboard else []),
        ],
        dependencies={**DEPENDENCIES, **AUTH_DEPENDENCIES},
        guards=[authenticate],
        middleware=[BrowserGuard(settings.host_allow_list, settings.cors_origins)],
        cors_config=_cors_config(settings.cors_origins),
        exception_handlers=EXCEPTION_HANDLERS,
        before_request=require_utf8_body,
        lifespan=[service_lifespan],
        openapi_config=openapi_config(),
        template_config=template_config() if settings.dashboard else None,
        plugins=[HTMXPlugin()],
        request_max_body_size=settings.max_request_bytes,
        state=State(
            {
                "max_request_bytes": settings.max_request_bytes,
                AUTH_STATE_KEY: settings.auth_enabled,
            }
        ),
    )

"""Serve the HTTP API with uvicorn (``run(settings)`` or ``python -m ...interfaces.api.server``).

Run as a module, settings come from the environment (``TRIBAL_DATA_DIR``,
``TRIBAL_PORT``, ``TRIBAL_HOST``, ...; see :class:`~tribal_memory.base.config.Settings`).
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Sequence
from typing import Any

import uvicorn
from pydantic import ValidationError

from tribal_memory.base.config import Settings
from tribal_memory.base.errors import TribalError
from tribal_memory.interfaces.api.app import Worker, create_app
from tribal_memory.interfaces.server_process import prepare_server_process
from tribal_memory.service.memory_service import MemoryService


def log_config() -> dict[str, Any]:
    """Uvicorn's logging config plus the ``tribal_memory`` loggers at INFO on stderr.

    The server's own messages (e.g. when automatic store maintenance starts
    and ends) then appear in its log next to uvicorn's.
    """
    config: dict[str, Any] = copy.deepcopy(uvicorn.config.LOGGING_CONFIG)
    config["loggers"]["tribal_memory"] = {
        "handlers": ["default"],
        "level": "INFO",
        "propagate": False,
    }
    return config


def run(settings: Settings, *, workers: Sequence[Worker] = ()) -> None:
    """Serve the API on ``settings.host:settings.port`` until interrupted (blocks).

    Requests need an API key when ``settings.auth_enabled``; a warning goes
    to stderr when that is so and no key exists yet.

    The model is loaded and the stores are opened once before the server
    starts, so a bad data dir or model fails here, as an exception, instead of
    as a traceback in uvicorn's startup log. The loaded model is handed to the app.
    ``workers`` run beside the server on its service (see :func:`create_app`).
    Uvicorn parses HTTP with httptools and runs its event loop on uvloop (both
    dependencies; uvloop not on Windows, where asyncio's loop serves).

    Raises:
        EmbeddingError: the embedding model cannot be loaded.
        EmbeddingModelMismatch: the data dir was built with another model.
        StoreUnavailable: the data dir, LanceDB or SQLite cannot be opened.
    """
    prepare_server_process(settings)
    with MemoryService(settings) as probe:
        embedder = probe.embedder
        has_keys = bool(probe.keys.list())
    if settings.auth_enabled and not has_keys:
        print(
            "warning: API keys are required on this address (TRIBAL_AUTH) but none exist; "
            "create one with 'tribal-memory keys create --owner NAME'",
            file=sys.stderr,
        )
    uvicorn.run(
        create_app(settings, embedder=embedder, workers=workers),
        host=settings.host,
        port=settings.port,
        log_level="info",
        log_config=log_config(),
        access_log=settings.access_log,
    )


def main() -> None:
    """Entry point of ``python -m tribal_memory.interfaces.api.server``.

    Exits 2 on invalid settings and 1 when the model or stores cannot be
    opened, with a one-line message on stderr.
    """
    try:
        settings = Settings()
    except ValidationError as exc:
        print(f"invalid settings: {exc}", file=sys.stderr)
        sys.exit(2)
    try:
        run(settings)
    except TribalError as exc:
        print(f"error: {exc.detail}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()

"""Serve the HTTP API with uvicorn (``run(settings)`` or ``python -m ...interfaces.api.server``).

Run as a module, settings come from the environment (``TRIBAL_DATA_DIR``,
``TRIBAL_PORT``, ``TRIBAL_HOST``, ...; see :class:`~tribal_memory.base.config.Settings`).
"""

from __future__ import annotations

import copy
import ctypes
import sys
from collections.abc import Sequence
from typing import Any

import uvicorn
from pydantic import ValidationError

from tribal_memory.base.config import Settings
from tribal_memory.base.errors import TribalError
from tribal_memory.interfaces.api.app import Worker, create_app
from tribal_memory.service.memory_service import MemoryService

_M_ARENA_MAX = -8
"""glibc's ``mallopt`` parameter number of ``M_ARENA_MAX`` (malloc.h)."""


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


def limit_malloc_arenas(arenas: int) -> bool:
    """Cap glibc's malloc arenas at ``arenas`` for threads started from now on.

    glibc gives threads their own arenas (up to 8 per core) and returns little
    of their freed memory to the system, so LanceDB's worker threads building
    indexes during a bulk load leave the server's RSS hundreds of MiB higher
    (at 30k memories: 913 MiB with the default, 685 with 2 arenas). Call before
    LanceDB, ONNX Runtime or the server start their threads.

    Returns:
        True when set; False on a system without glibc or for ``arenas`` 0
        (the default is kept).
    """
    if arenas <= 0 or not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
        return bool(libc.mallopt(_M_ARENA_MAX, arenas))
    except (OSError, AttributeError):  # musl or another libc
        return False


def limit_blas_threads(threads: int) -> bool:
    """Run numpy's BLAS (OpenBLAS, MKL...) on at most ``threads`` threads in this process.

    A capture multiplies its batch's vectors with each other (near-duplicates
    within the batch) and with recent rows; on numpy's default threads the
    library's worker then spun for about 100 ms of CPU after each product,
    taking a core from the store's near-duplicate check and write that
    follow. Over HTTP at 10k (``benchmarks/servers_ab.py --questions 0
    --captures 36``, four runs, both orders), a server with one BLAS thread
    captured 256 new facts 0.2-7.3% faster (median of the batches' ratios)
    with 1-5% less server CPU per batch (``servers-ab-blas-10k-1.json`` ..
    ``-4.json``). A search's products are matrix-vector ones (the semantic
    cache's past queries, the learned adapter), after which no spinning was
    measured, and the vector copy's uses einsum. Uses threadpoolctl.

    Returns:
        True when set; False for ``threads`` 0 (the library's default is kept).
    """
    if threads <= 0:
        return False
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=threads, user_api="blas")
    return True


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
    limit_malloc_arenas(settings.malloc_arena_max)
    limit_blas_threads(settings.blas_threads)
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

"""The one background asyncio event loop every LanceDB store runs its calls on."""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Awaitable, Coroutine
from concurrent.futures import Future
from typing import Any, TypeVar

import pyarrow as pa
from lancedb.arrow import AsyncRecordBatchReader

from tribal_memory.base.errors import StoreUnavailable, TribalError

_T = TypeVar("_T")


class EventLoop:
    """One asyncio event loop on a daemon thread; every LanceDB call of the stores runs on it.

    LanceDB's async API answers a query in one await, where its sync wrapper
    hands each batch across threads; and two queries submitted together (the
    vector and BM25 halves of a hybrid search) run at the same time.
    """

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(
            target=self.loop.run_forever, name="tribal-memory-lancedb", daemon=True
        )
        self.thread.start()

    def submit(self, coroutine: Coroutine[Any, Any, _T]) -> Future[_T]:
        """Schedule ``coroutine``; its result (or exception) arrives in the future."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop)

    def run(self, action: str, awaitable: Awaitable[_T]) -> _T:
        """Await ``awaitable`` on the loop and block until its result is in.

        Args:
            action: What the call does, for the error message ("read", "write").
            awaitable: A LanceDB call (or a coroutine of several).

        Raises:
            StoreUnavailable: LanceDB or Arrow raised (see :func:`translated`).
        """
        return self.submit(translated(action, awaitable)).result()


_LOOP: EventLoop | None = None
_LOOP_LOCK = threading.Lock()


def shared_event_loop() -> EventLoop:
    """The process's one :class:`EventLoop`, started on first use."""
    global _LOOP
    with _LOOP_LOCK:
        if _LOOP is None:
            _LOOP = EventLoop()
        return _LOOP


_SOURCE_LOCATION = re.compile(r",?\s*[\w./\\-]*\.rs:\d+(?::\d+)?")
"""A Rust source location (``/home/build/lance/rust/lance/src/io.rs:12:34``) in a message."""


def public_message(exc: BaseException) -> str:
    """``exc``'s message without the library's source locations (build paths), one line."""
    message = _SOURCE_LOCATION.sub("", str(exc))
    return " ".join(message.split()) or type(exc).__name__


async def translated(action: str, awaitable: Awaitable[_T]) -> _T:
    """Await ``awaitable``; LanceDB/Arrow errors become :class:`StoreUnavailable` (ours pass).

    The detail keeps the library's message without its source locations.
    """
    try:
        return await awaitable
    except TribalError:
        raise
    except Exception as exc:  # noqa: BLE001 - lancedb raises ValueError/OSError/RuntimeError/...
        raise StoreUnavailable(f"memory store {action} failed: {public_message(exc)}") from exc


async def next_batch(reader: AsyncRecordBatchReader) -> pa.RecordBatch | None:
    """The reader's next record batch, or None once it is exhausted."""
    try:
        return await reader.__anext__()
    except StopAsyncIteration:
        return None

"""Query embeddings of concurrent searches run together as one model call.

On two cores a query embedding costs about 6 ms of CPU alone and about 3.8 ms
each in a call of four (issue 30; short queries, one ONNX thread). Searches
arriving together therefore share calls: :class:`QueryBatcher` runs a query
at once when no call is running, and queries that arrive while one runs wait
for it to end and then go together in the next (up to ``max_batch``). A
sequential client never waits; under load the batches form by themselves,
without a timer. This is the dynamic batching of inference servers (e.g.
NVIDIA Triton's dynamic batcher) with a zero queue delay.
"""

from __future__ import annotations

import threading

from tribal_memory.base.errors import EmbeddingError
from tribal_memory.embeddings.base import Embedder, Vector


class _Pending:
    """One query waiting for its vector (or the error of its call)."""

    __slots__ = ("error", "text", "vector")

    def __init__(self, text: str) -> None:
        self.text = text
        self.vector: Vector | None = None
        self.error: EmbeddingError | None = None

    @property
    def done(self) -> bool:
        return self.vector is not None or self.error is not None


class QueryBatcher:
    """Embeds queries (``query=True``) of concurrent callers in shared model calls.

    Args:
        embedder: The model; its ``embed_batch(texts, query=True)`` must give
            each text the vector it gives alone (the packaged model does,
            bit for bit: a test checks it).
        max_batch: Most queries in one call (1: every query alone).
    """

    def __init__(self, embedder: Embedder, max_batch: int = 8) -> None:
        self._embedder = embedder
        self._max_batch = max(1, max_batch)
        self._waiting: list[_Pending] = []
        self._running = False
        self._changed = threading.Condition()
        self.calls = 0
        """Model calls made so far (fewer than queries once batches form)."""

    def embed(self, text: str) -> Vector:
        """The query vector of ``text``, shape ``(dim,)``, L2-normalised.

        Raises:
            EmbeddingError: the model failed on the call that held this query.
        """
        mine = _Pending(text)
        with self._changed:
            self._waiting.append(mine)
        while True:
            with self._changed:
                while self._running and not mine.done:
                    self._changed.wait()
                if mine.done:
                    break
                # No call running and this query not embedded yet: lead the next call
                # (the oldest waiting queries first).
                batch = self._waiting[: self._max_batch]
                del self._waiting[: self._max_batch]
                self._running = True
                self.calls += 1
            self._run(batch)
        if mine.error is not None:
            raise mine.error
        assert mine.vector is not None
        return mine.vector

    def _run(self, batch: list[_Pending]) -> None:
        """Embed ``batch`` in one call, hand each its vector (or the error), wake the waiters."""
        try:
            vectors = self._embedder.embed_batch([p.text for p in batch], query=True)
        except EmbeddingError as exc:
            for pending in batch:
                pending.error = exc
        else:
            for pending, vector in zip(batch, vectors, strict=True):
                pending.vector = vector
        finally:
            with self._changed:
                self._running = False
                self._changed.notify_all()

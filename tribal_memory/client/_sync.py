"""The synchronous HTTP client. GENERATED from _async.py by scripts/unasync.py: do not edit.

Edit _async.py, then run ``python scripts/unasync.py``.
"""

from __future__ import annotations

from collections.abc import Iterator, Callable, Sequence
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx
import msgspec

from tribal_memory.base.config import DEFAULT_URL, ClientSettings
from tribal_memory.base.errors import InvalidInput, StoreUnavailable
from tribal_memory.base.graph import CommonNeighbor, Near, Neighbor, Relation, RelationInput
from tribal_memory.base.models import (
    SHARED_OWNER,
    CaptureResult,
    DocumentInfo,
    DocumentResult,
    Memory,
    MemoryInput,
    MemoryPage,
    MemoryPatch,
    OwnerCleared,
    OwnerStats,
    SearchFilters,
    StoreStats,
)
from tribal_memory.base.results import (
    Anchor,
    FeedbackResult,
    LearnedParts,
    SearchMode,
    SearchResult,
    Variant,
)
from tribal_memory.base.stats import Bucket, RetrievalStats
from tribal_memory.base.transfer import ImportResult, OnConflict, Source
from tribal_memory.client import _wire as wire
from tribal_memory.client._wire import Call, WireError


class TribalMemoryClient:
    """A tribal-memory server over HTTP, with :class:`MemoryService`'s methods.

    Every method takes the arguments of the :class:`MemoryService` method of
    that name, returns the same ``base/`` dataclass and raises the same
    :class:`~tribal_memory.base.errors.TribalError` subclass (mapped from the
    server's error code: ``NotFound``, ``InvalidInput``, ``Forbidden``...).

    Args:
        base_url: The server, e.g. ``http://127.0.0.1:18960``; None:
            ``TRIBAL_URL``, else the base URL of ``http_client`` if given, else
            ``http://127.0.0.1:18960``.
        api_key: Sent as ``Authorization: Bearer``; None: ``TRIBAL_API_KEY``
            (none if unset).
        timeout: Longest wait for one response, in seconds; None:
            ``TRIBAL_CLIENT_TIMEOUT_S`` (default 60).
        http_client: An ``httpx.Client`` to send with (e.g. one over an
            in-process app); it is not closed by :meth:`close`.
        strict: Refuse response fields this version does not know (tests);
            by default they are ignored, so a newer server still works.

    Raises:
        pydantic.ValidationError: an invalid ``TRIBAL_*`` client setting.
    """

    def __init__(
        self,
        base_url: str | None = None,
        *,
        api_key: str | None = None,
        timeout: float | None = None,
        http_client: httpx.Client | None = None,
        strict: bool = False,
    ) -> None:
        env = ClientSettings()
        url = base_url or env.url or ("" if http_client is not None else DEFAULT_URL)
        self.base_url = url.rstrip("/")
        self.strict = strict
        self._timeout = timeout if timeout is not None else env.client_timeout_s
        key = api_key if api_key is not None else env.api_key
        self._headers = {} if key is None else {"authorization": f"Bearer {key}"}
        self._owns_client = http_client is None
        self._http = http_client or httpx.Client(timeout=self._timeout)

    def close(self) -> None:
        """Close the connections (not those of an ``http_client`` passed in)."""
        if self._owns_client:
            self._http.close()

    def __enter__(self) -> TribalMemoryClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    # -- sending -----------------------------------------------------------------------

    def _request(self, call: Call) -> httpx.Request:
        return self._http.build_request(
            call.method,
            self.base_url + call.path,
            params=tuple(call.params),
            json=call.json,
            content=call.content,
            headers={**self._headers, **call.all_headers},
            timeout=self._timeout,
        )

    def _send(self, call: Call, *, stream: bool = False) -> httpx.Response:
        """Send ``call``; the response, checked.

        Raises:
            TribalError: the server's error, as the library's class.
            StoreUnavailable: the server cannot be reached or did not answer in time.
        """
        try:
            response = self._http.send(self._request(call), stream=stream)
        except httpx.HTTPError as exc:
            raise StoreUnavailable(f"cannot reach {self.base_url or 'the server'}: {exc}") from exc
        if response.status_code >= 400:
            body = response.read()
            response.close()
            wire.raise_for_error(response.status_code, body)
        return response

    def _json(self, call: Call) -> Any:
        response = self._send(call)
        try:
            return msgspec.json.decode(response.content)
        except msgspec.DecodeError as exc:
            raise WireError(f"{call.method} {call.path}: the response is not JSON") from exc

    # -- memories ----------------------------------------------------------------------

    def capture(self, item: MemoryInput) -> CaptureResult:
        """Store one memory, idempotently; see :meth:`MemoryService.capture`."""
        data = self._json(wire.capture_call(item))
        return wire.decode_capture(data, strict=self.strict)

    def capture_batch(
        self, items: Sequence[MemoryInput], *, near_duplicates: bool = True
    ) -> list[CaptureResult]:
        """Store memories in one write; see :meth:`MemoryService.capture_batch`."""
        data = self._json(wire.capture_batch_call(items, near_duplicates=near_duplicates))
        return wire.decode_captures(data, strict=self.strict)

    def get(self, memory_id: str, *, owner: str | None = None) -> Memory:
        """The memory with ``memory_id``; see :meth:`MemoryService.get`."""
        data = self._json(wire.get_call(memory_id, owner=owner))
        return wire.decode_memory(data, strict=self.strict)

    def update(
        self,
        memory_id: str,
        patch: MemoryPatch,
        *,
        owner: str | None = None,
        if_version: str | None = None,
    ) -> Memory:
        """Change fields of a memory; see :meth:`MemoryService.update`."""
        call = wire.update_call(memory_id, patch, owner=owner, if_version=if_version)
        return wire.decode_memory(self._json(call), strict=self.strict)

    def delete(
        self, memory_id: str, *, owner: str | None = None, if_version: str | None = None
    ) -> None:
        """Delete a memory and all that points at it; see :meth:`MemoryService.delete`."""
        self._send(wire.delete_call(memory_id, owner=owner, if_version=if_version))

    def list_page(
        self, filters: SearchFilters, *, limit: int | None = None, after: str | None = None
    ) -> MemoryPage:
        """One page of memories by id; see :meth:`MemoryService.list_page`."""
        data = self._json(wire.list_call(filters, limit=limit, after=after))
        return wire.decode_page(data, strict=self.strict)

    def clear_owner(self, owner: str, *, confirm: str | None) -> OwnerCleared:
        """Delete all of ``owner``'s knowledge; see :meth:`MemoryService.clear_owner`."""
        data = self._json(wire.clear_owner_call(owner, confirm=confirm))
        return wire.decode_cleared(data, strict=self.strict)

    # -- retrieval ---------------------------------------------------------------------

    def recall(
        self,
        query: str,
        *,
        k: int = 10,
        filters: SearchFilters | None = None,
        min_score: float = 0.0,
        learned: LearnedParts | None = None,
        context: bool = False,
        near: Near | None = None,
    ) -> SearchResult:
        """Embedding-similarity recall; see :meth:`MemoryService.recall`."""
        call = wire.search_call(
            query,
            k=k,
            filters=filters,
            mode=None,
            min_score=min_score,
            learned=learned,
            context=context,
            near=near,
        )
        return wire.decode_search(self._json(call), strict=self.strict)

    def search(
        self,
        query: str,
        *,
        k: int = 10,
        filters: SearchFilters | None = None,
        mode: SearchMode = "hybrid",
        min_score: float = 0.0,
        learned: LearnedParts | None = None,
        context: bool = False,
        near: Near | None = None,
    ) -> SearchResult:
        """Search in ``mode``; see :meth:`MemoryService.search`."""
        call = wire.search_call(
            query,
            k=k,
            filters=filters,
            mode=mode,
            min_score=min_score,
            learned=learned,
            context=context,
            near=near,
        )
        return wire.decode_search(self._json(call), strict=self.strict)

    def search_vector(
        self,
        vector: Sequence[float],
        *,
        k: int = 10,
        filters: SearchFilters | None = None,
        min_score: float = 0.0,
        near: Near | None = None,
    ) -> SearchResult:
        """Memories nearest to a raw vector; see :meth:`MemoryService.search_vector`."""
        call = wire.search_vector_call(vector, k=k, filters=filters, min_score=min_score, near=near)
        return wire.decode_search(self._json(call), strict=self.strict)

    def recall_with_feedback(
        self,
        query: str,
        *,
        k: int = 10,
        filters: SearchFilters | None = None,
        mode: SearchMode = "hybrid",
        min_score: float = 0.0,
        learned: LearnedParts | None = None,
        context: bool = False,
        session_id: str | None = None,
        near: Near | None = None,
    ) -> SearchResult:
        """A search logged for feedback; see :meth:`MemoryService.recall_with_feedback`."""
        call = wire.search_call(
            query,
            k=k,
            filters=filters,
            mode=mode,
            min_score=min_score,
            learned=learned,
            context=context,
            near=near,
            feedback=True,
            session_id=session_id,
        )
        return wire.decode_search(self._json(call), strict=self.strict)

    def record_usage_feedback(
        self, retrieval_id: str, used_ids: Sequence[str], *, owner: str | None = None
    ) -> FeedbackResult:
        """Report the memories used; see :meth:`MemoryService.record_usage_feedback`."""
        data = self._json(wire.feedback_call(retrieval_id, used_ids, owner=owner))
        return wire.decode_feedback(data, strict=self.strict)

    def anchors(self, memory_id: str, *, owner: str | None = None) -> list[Anchor]:
        """Anchors of a memory; see :meth:`MemoryService.anchors`."""
        data = self._json(wire.anchors_call(memory_id, owner=owner))
        return wire.decode_anchors(data, strict=self.strict)

    def add_anchor(self, memory_id: str, text: str, *, owner: str | None = None) -> Anchor:
        """Attach a manual anchor; see :meth:`MemoryService.add_anchor`."""
        data = self._json(wire.add_anchor_call(memory_id, text, owner=owner))
        return wire.decode_anchor(data, strict=self.strict)

    def remove_anchor(self, memory_id: str, text: str, *, owner: str | None = None) -> None:
        """Detach an anchor; see :meth:`MemoryService.remove_anchor`."""
        self._send(wire.remove_anchor_call(memory_id, text, owner=owner))

    def pin_variant(self, owner: str, variant: Variant | None) -> None:
        """Pin ``owner`` to an A/B variant (None: unpin); see :meth:`MemoryService.pin_variant`."""
        self._send(wire.pin_variant_call(owner, variant))

    def variant_for(self, owner: str) -> Variant:
        """The A/B variant serving ``owner``; see :meth:`MemoryService.variant_for`."""
        return wire.decode_variant(self._json(wire.variant_call(owner)))

    # -- graph -------------------------------------------------------------------------

    def relate(
        self,
        source_id: str,
        target_id: str,
        type: str,
        *,
        weight: float = 1.0,
        owner: str | None = None,
    ) -> Relation:
        """Add or re-weight an edge; see :meth:`MemoryService.relate`."""
        call = wire.relate_call(source_id, target_id, type, weight=weight, owner=owner)
        return wire.decode_relation(self._json(call), strict=self.strict)

    def relate_batch(
        self, edges: Sequence[RelationInput], *, owner: str | None = None
    ) -> list[Relation]:
        """Add or re-weight many edges; see :meth:`MemoryService.relate_batch`."""
        data = self._json(wire.relate_batch_call(edges, owner=owner))
        return wire.decode_relations(data, strict=self.strict)

    def unrelate(
        self, source_id: str, target_id: str, type: str, *, owner: str | None = None
    ) -> None:
        """Remove one edge; see :meth:`MemoryService.unrelate`."""
        self._send(wire.unrelate_call(source_id, target_id, type, owner=owner))

    def relations(self, memory_id: str, *, owner: str | None = None) -> list[Relation]:
        """Edges touching a memory; see :meth:`MemoryService.relations`."""
        data = self._json(wire.relations_call(memory_id, owner=owner))
        return wire.decode_relations(data, strict=self.strict)

    def neighbors(
        self,
        memory_id: str,
        *,
        steps: int = 1,
        owner: str | None = None,
        types: Sequence[str] = (),
        block: Sequence[str] = (),
    ) -> list[Neighbor]:
        """Memories within ``steps`` hops; see :meth:`MemoryService.neighbors`."""
        call = wire.neighbors_call(memory_id, steps=steps, owner=owner, types=types, block=block)
        return wire.decode_neighbors(self._json(call), strict=self.strict)

    def intersection(
        self,
        memory_ids: Sequence[str],
        *,
        steps: int = 1,
        owner: str | None = None,
        types: Sequence[str] = (),
        block: Sequence[str] = (),
        limit: int | None = None,
    ) -> list[CommonNeighbor]:
        """Memories near all of ``memory_ids``; see :meth:`MemoryService.intersection`."""
        call = wire.intersection_call(
            memory_ids, steps=steps, owner=owner, types=types, block=block, limit=limit
        )
        return wire.decode_common(self._json(call), strict=self.strict)

    # -- documents ---------------------------------------------------------------------

    def ingest_document(
        self, path: str, data: bytes | str, *, owner: str = SHARED_OWNER
    ) -> DocumentResult:
        """Create, update or skip a document; see :meth:`MemoryService.ingest_document`."""
        result = self._json(wire.ingest_call(path, data, owner=owner))
        return wire.decode_document(result, strict=self.strict)

    def documents(self, *, owner: str | None = None) -> list[DocumentInfo]:
        """Ingested documents; see :meth:`MemoryService.documents`."""
        data = self._json(wire.documents_call(owner=owner))
        return wire.decode_documents(data, strict=self.strict)

    def delete_document(self, path: str, *, owner: str | None = None) -> DocumentResult:
        """Delete a document with its chunks; see :meth:`MemoryService.delete_document`."""
        data = self._json(wire.delete_document_call(path, owner=owner))
        return wire.decode_document(data, strict=self.strict)

    # -- export and import, statistics -------------------------------------------------

    def export_jsonl(
        self, *, owner: str | None = None, progress: Callable[[int], None] | None = None
    ) -> Iterator[str]:
        """The server's data as JSON lines, each ending in a newline.

        See :meth:`MemoryService.export_jsonl`. The request is sent (and an
        error raised) here; the lines are read as they are iterated, and
        ``progress`` is called with the records read since its last call
        (every 1,000 and at the end).
        """
        response = self._send(wire.export_call(owner=owner), stream=True)
        return self._lines(response, progress)

    def _lines(
        self, response: httpx.Response, progress: Callable[[int], None] | None
    ) -> Iterator[str]:
        pending = 0
        try:
            for line in response.iter_lines():
                if not line:
                    continue
                yield line + "\n"
                pending += wire.is_record(line)
                if progress is not None and pending >= 1000:
                    progress(pending)
                    pending = 0
        finally:
            response.close()
        if progress is not None and pending:
            progress(pending)

    def import_jsonl(
        self,
        source: Source,
        *,
        progress: Callable[[int, int], None] | None = None,
        on_conflict: OnConflict = "keep",
    ) -> ImportResult:
        """Import an export (sent whole); see :meth:`MemoryService.import_jsonl`.

        ``progress`` is called once, with (records, records), when the server
        has written them.

        Raises:
            InvalidInput: ``source`` is a path that cannot be read.
        """
        data = _read_source(source)
        result = self._json(wire.import_call(data, on_conflict=on_conflict))
        if progress is not None:
            count = wire.record_count(data)
            progress(count, count)
        return wire.decode_import(result, strict=self.strict)

    def stats(self) -> StoreStats:
        """Counts, model, index state and table health; see :meth:`MemoryService.stats`."""
        return wire.decode_stats(self._json(wire.stats_call()), strict=self.strict)

    def owner_stats(self, owner: str | None) -> OwnerStats:
        """What ``owner`` sees; see :meth:`MemoryService.owner_stats`."""
        data = self._json(wire.owner_stats_call(owner))
        return wire.decode_owner_stats(data, strict=self.strict)

    def retrieval_stats(
        self,
        *,
        owner: str | None = None,
        bucket: Bucket = "day",
        since: datetime | None = None,
    ) -> RetrievalStats:
        """Usage per variant, cache hit rate, learning curve (see ``MemoryService``)."""
        call = wire.retrieval_stats_call(owner=owner, bucket=bucket, since=since)
        return wire.decode_retrieval_stats(self._json(call), strict=self.strict)

    def health(self) -> dict[str, Any]:
        """``GET /health``: ``{"status": "ok", "version", "embedding_model", "embedding_dim"}``.

        Raises:
            StoreUnavailable: the server cannot be reached or is not open yet.
        """
        data = self._json(Call("GET", "/health"))
        if not isinstance(data, dict):
            raise WireError("/health did not answer an object")
        return data


def _read_source(source: Source) -> bytes:
    """The bytes of an import source.

    Raises:
        InvalidInput: a path that cannot be read.
    """
    if isinstance(source, bytes):
        return source
    if isinstance(source, Path):
        try:
            return source.read_bytes()
        except OSError as exc:
            raise InvalidInput(f"cannot read {source}: {exc.strerror or exc}") from exc
    return source.read()

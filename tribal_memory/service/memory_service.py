"""MemoryService: the one object every interface (HTTP, CLI, MCP) calls.

It opens a :class:`~tribal_memory.core.Core` (the store and its writes) and
builds the parts on top of it: the retriever and the learned layer, the graph
queries, the document index, API keys and A/B variants. Its methods check
input and hand work to those parts; retrieval and graph operations are in
:mod:`.retrieval_ops` and :mod:`.graph_ops`. Everything is synchronous; the
HTTP layer runs it in worker threads.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from tribal_memory.auth.keys import ApiKeys
from tribal_memory.auth.policy import Caller
from tribal_memory.base.api import MemoryAPI
from tribal_memory.base.config import Settings
from tribal_memory.base.errors import InvalidInput
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
from tribal_memory.base.validation import check_owner
from tribal_memory.core import Core
from tribal_memory.documents.index import DocumentIndex
from tribal_memory.documents.ingest import capture_turns, ingest_documents
from tribal_memory.documents.sync import DocumentFile, FileOutcome, watch_directory
from tribal_memory.embeddings.base import Embedder, Vector
from tribal_memory.graph.queries import GraphQueries
from tribal_memory.learned.invalidation import forget_owner
from tribal_memory.learned.learner import Learner
from tribal_memory.ops.maintenance import (
    ConsistencyReport,
    check_consistency,
    misfiled_ids,
    prune_orphans,
)
from tribal_memory.ops.transfer import (
    ImportResult,
    OnConflict,
    Source,
    export_lines,
    import_source,
)
from tribal_memory.retrieval import Retriever, VariantPins
from tribal_memory.service.graph_ops import GraphOperations
from tribal_memory.service.retrieval_ops import RetrievalOperations


class MemoryService(RetrievalOperations, GraphOperations):
    """Capture, recall, search and relate memories.

    Args:
        settings: Configuration (data dir, model, limits, fusion).
        embedder: An already loaded embedder to share (tests and benchmarks
            open many services over one model); loaded from settings if None.

    Raises:
        EmbeddingError: the embedding model cannot be loaded.
        EmbeddingModelMismatch: the data dir was built with another model.
        StoreUnavailable: the data dir, LanceDB or SQLite cannot be opened.
    """

    def __init__(self, settings: Settings, *, embedder: Embedder | None = None) -> None:
        self.core = core = Core(settings, embedder=embedder)
        self.settings = settings
        self.db = core.db
        self.store = core.store
        self.embedder = core.embedder
        self.graph = core.graph
        self.graph_queries = GraphQueries(self.graph, self.store)
        self.keys = ApiKeys(self.db)
        self.learner = Learner(settings, self.db, self.store, self.embedder)
        self.retriever = Retriever(
            settings, self.store, self.embedder, self.learner, graph=self.graph
        )
        self.variants = VariantPins(settings, self.db)
        self.document_index = DocumentIndex(core)

    def close(self) -> None:
        """Finish store maintenance, release database connections; unusable afterwards."""
        self.learner.close()
        self.core.close()

    def __enter__(self) -> MemoryService:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def authenticate(self, token: str) -> Caller | None:
        """The caller an API key stands for; None for a malformed, unknown or revoked key."""
        key = self.keys.authenticate(token)
        return None if key is None else Caller(owner=key.owner, admin=key.admin)

    # -- capture, read, update, delete: the core's ---------------------------------

    def capture(self, item: MemoryInput) -> CaptureResult:
        """Store one memory; see :meth:`.Core.capture_batch`."""
        return self.core.capture_batch([item])[0]

    def capture_batch(
        self, items: Sequence[MemoryInput], *, near_duplicates: bool = True
    ) -> list[CaptureResult]:
        """Store memories, idempotently, in one write; see :meth:`.Core.capture_batch`."""
        return self.core.capture_batch(items, near_duplicates=near_duplicates)

    def write_memories(self, memories: Sequence[Memory], vectors: Vector) -> list[Memory]:
        """Store memories exactly as given (import, restore); see :meth:`.Core.write_memories`."""
        return self.core.write_memories(memories, vectors)

    def get(self, memory_id: str, *, owner: str | None = None) -> Memory:
        """The memory with ``memory_id``; see :meth:`.Core.get` (NotFound when not visible)."""
        return self.core.get(memory_id, owner=owner)

    def get_many(self, memory_ids: Sequence[str], *, owner: str | None = None) -> dict[str, Memory]:
        """The visible memories among ``memory_ids``; see :meth:`.Core.get_many`."""
        return self.core.get_many(memory_ids, owner=owner)

    def update(
        self,
        memory_id: str,
        patch: MemoryPatch,
        *,
        owner: str | None = None,
        if_version: str | None = None,
        shared_writable: bool = True,
    ) -> Memory:
        """Change fields of a memory (new content re-keys it); see :meth:`.Core.update`."""
        return self.core.update(
            memory_id,
            patch,
            owner=owner,
            if_version=if_version,
            shared_writable=shared_writable,
        )

    def forget_cached(self, memory_ids: Sequence[str]) -> int:
        """Drop cache entries snapshotting ``memory_ids``; see :meth:`.Core.forget_cached`."""
        return self.core.forget_cached(memory_ids)

    def delete(
        self,
        memory_id: str,
        *,
        owner: str | None = None,
        if_version: str | None = None,
        shared_writable: bool = True,
    ) -> None:
        """Delete a memory and all that points at it; see :meth:`.Core.delete`."""
        self.core.delete(
            memory_id, owner=owner, if_version=if_version, shared_writable=shared_writable
        )

    def delete_many(self, memory_ids: Sequence[str], *, owner: str | None = None) -> int:
        """Delete many memories in one store write; see :meth:`.Core.delete_many`."""
        return self.core.delete_many(memory_ids, owner=owner)

    def optimize(self) -> None:
        """Fold new rows into the indexes and drop old versions (see the store)."""
        self.core.optimize()

    # -- listing, documents, export and import, maintenance -----------------------------

    def list_memories(self, filters: SearchFilters, *, limit: int) -> list[Memory]:
        """Up to ``limit`` memories passing ``filters`` (unranked, in no set order).

        Raises:
            InvalidInput: ``limit`` < 1.
        """
        if limit < 1:
            raise InvalidInput("limit must be at least 1")
        return self.store.select(filters, limit)

    def list_page(
        self, filters: SearchFilters, *, limit: int | None = None, after: str | None = None
    ) -> MemoryPage:
        """One page of the memories passing ``filters``, by id (keyset paging).

        Args:
            filters: Prefilter, as for search (``filters.owner``: that owner's
                and, with ``include_shared``, shared memories; None: all).
            limit: Most memories on the page, 1 to ``max_k`` (None: 100 or
                ``max_k`` if smaller).
            after: The ``next_after`` of the previous page (None: the first page).

        Returns:
            The page; ``next_after`` is None on the last one. No memory: an
            empty page, not an error.

        Raises:
            InvalidInput: limit < 1, a bad filter. TooLarge: limit over ``max_k``.
        """
        limit = self._limit(limit)
        found = self.store.page(filters, limit + 1, after=after)
        more = len(found) > limit
        page = tuple(found[:limit])
        return MemoryPage(page, page[-1].memory_id if more else None)

    def clear_owner(self, owner: str, *, confirm: str | None) -> OwnerCleared:
        """Delete all of ``owner``'s knowledge: its memories and everything pointing at them.

        Each memory goes as :meth:`delete` takes one (its relations, cache
        entries, weights and anchors with it); the records of the owner's
        ingested documents go too, and what the owner's own questions taught
        the learned layer (retrieval events, cache entries, weights,
        expansions, the anchors its searches use, also on shared memories).
        Shared memories are not the owner's and stay; so do its API keys and
        A/B variant pin (access and configuration, not knowledge). Captures
        wait while it runs, so none made meanwhile is half cleared.

        Args:
            owner: The owner to clear (not ``shared`` unless named so).
            confirm: Must equal ``owner``: the explicit confirmation.

        Returns:
            How many memories, document records and learned rows were deleted
            (all 0 for an owner with none).

        Raises:
            InvalidInput: an invalid owner, or ``confirm`` not equal to it
                (nothing is deleted).
        """
        owner = check_owner(owner)
        if confirm is None or confirm.strip() != owner:
            raise InvalidInput(
                f"clearing deletes every memory of {owner!r}: confirm by naming the owner "
                f"again (confirm={owner})"
            )
        # Under the document and capture locks (in the order ingest takes them) from
        # listing to the end: no capture, document ingest or update moving a memory to
        # a new id can land between the batches and survive the clear. Other owners'
        # captures wait for it too.
        with self.document_index.writes_lock, self.core.capture_lock:
            ids = self.store.ids_of(SearchFilters(owner=owner, include_shared=False))
            deleted = 0
            for start in range(0, len(ids), self.settings.max_batch_size):
                deleted += self.delete_many(ids[start : start + self.settings.max_batch_size])
            documents = self.document_index.forget_owner(owner)
            with self.core.references_lock:
                learned = forget_owner(self.db, owner)
        return OwnerCleared(owner, deleted, documents, learned)

    def ingest_document(
        self, path: str, data: bytes | str, *, owner: str = SHARED_OWNER
    ) -> DocumentResult:
        """Create, update or skip a document (.md, .markdown, .txt, .pdf) and its chunks.

        See :mod:`tribal_memory.documents.index`: an unchanged document (same bytes)
        is skipped; a changed one has its chunks replaced, and learned data of
        the chunks it lost is dropped.

        Args:
            path: The document's path (its chunks' ``source``); the extension
                picks the format.
            data: Its bytes; a ``str`` is encoded as UTF-8 (not for PDF).
            owner: Owner of the document and its chunks.

        Raises:
            InvalidInput: bad path or owner, unsupported format, text that is
                not UTF-8, a corrupt, encrypted or text-less PDF.
            TooLarge: over ``max_document_bytes``, or a chunk over ``max_content_chars``.
            StoreUnavailable / EmbeddingError: storing failed (ingesting again retries).
        """
        raw = data.encode("utf-8") if isinstance(data, str) else data
        return self.document_index.ingest(path, raw, owner=owner)

    def ingest_files(
        self,
        documents: Sequence[DocumentFile],
        *,
        report: Callable[[FileOutcome], None],
        advance: Callable[[int], None] | None = None,
    ) -> None:
        """Ingest files (planned by :func:`~tribal_memory.documents.ingest.plan_ingest`).

        Each file's outcome goes to ``report`` (a file that cannot be read or
        is refused is an outcome with an error, not an exception); new rows
        are then folded into the full-text index. ``advance`` counts files.

        Raises:
            StoreUnavailable / EmbeddingError: storing failed (not a problem of a file).
        """
        ingest_documents(self.document_index, list(documents), report=report, advance=advance)

    def capture_all(
        self, items: Sequence[MemoryInput], *, advance: Callable[[int], None] | None = None
    ) -> int:
        """Capture many memories in batches, then optimise; returns how many were new.

        Raises:
            As :meth:`capture_batch`, for the batch that failed (earlier ones stay).
        """
        return capture_turns(self.core, list(items), advance=advance)

    def watch_directory(
        self,
        directory: Path,
        *,
        owner: str | None,
        root: Path | None,
        report: Callable[[FileOutcome], None],
        max_seconds: float | None = None,
        ready: Callable[[], None] | None = None,
        include: Callable[[str], bool] | None = None,
        stop: threading.Event | None = None,
    ) -> None:
        """Keep the documents of ``directory`` in sync until interrupted, ``stop``, ``max_seconds``.

        ``include``: only documents whose path passes it. See
        :func:`tribal_memory.documents.sync.watch_directory`.
        """
        watch_directory(
            self.document_index,
            directory,
            owner=owner,
            root=root,
            report=report,
            max_seconds=max_seconds,
            ready=ready,
            include=include,
            stop=stop,
        )

    def documents(self, *, owner: str | None = None) -> list[DocumentInfo]:
        """Ingested documents of ``owner`` and shared ones (None: all), by owner and path."""
        return self.document_index.documents(owner=owner)

    def delete_document(
        self, path: str, *, owner: str | None = None, shared_writable: bool = True
    ) -> DocumentResult:
        """Delete a document with its chunks (and everything learned about them).

        Chunks whose text another document of the owner also holds stay.

        Raises:
            NotFound: no document at ``path`` visible to ``owner``.
            InvalidInput: ``owner`` is None and several owners have that path.
            Forbidden: a shared document and ``shared_writable`` is False.
        """
        return self.document_index.delete(path, owner=owner, shared_writable=shared_writable)

    def export_jsonl(
        self, *, owner: str | None = None, progress: Callable[[int], None] | None = None
    ) -> Iterator[str]:
        """Stream this instance's data as JSON lines (see :func:`.transfer.export_lines`).

        Args:
            owner: Only what this owner sees (its and shared memories, and the
                relations and learned rows that belong to them); None: all.
            progress: Called with the number of records written after each batch.

        Raises:
            InvalidInput: an invalid owner (raised here, before the stream starts).
            StoreUnavailable: a read failed (while iterating; the stream ends
                without its end record).
        """
        if owner is not None:
            owner = check_owner(owner)
        return export_lines(
            self.core, owner=owner, batch_rows=self.settings.transfer_batch_rows, progress=progress
        )

    def import_jsonl(
        self,
        source: Source,
        *,
        progress: Callable[[int, int], None] | None = None,
        on_conflict: OnConflict = "keep",
    ) -> ImportResult:
        """Import an export; see :func:`tribal_memory.ops.transfer.import_source`.

        Args:
            source: A path, the file's bytes, or a seekable binary file.
            progress: Called with (records written, records in the file) after each batch.
            on_conflict: ``keep`` the stored version of a memory the file
                changes (reported), or ``replace`` it with the file's.

        Raises:
            InvalidInput: unreadable file, unknown format or version, a bad
                line (named), a truncated file; nothing is written.
            TooLarge: a memory over ``max_content_chars``; nothing is written.
            StoreUnavailable / EmbeddingError: a write failed; it is undone.
        """
        return import_source(
            self.core,
            source,
            batch_rows=self.settings.transfer_batch_rows,
            progress=progress,
            on_conflict=on_conflict,
        )

    def stats(self) -> StoreStats:
        """Counts per owner and kind, relation count, model, index state and table health."""
        indexes = self.store.index_state()
        return StoreStats(
            memories=self.store.count(),
            owners=self.store.group_counts("owner"),
            kinds=self.store.group_counts("kind"),
            relations=self.graph.count(),
            embedding_model=self.embedder.model_id,
            embedding_dim=self.embedder.dim,
            fts_indexed=indexes["fts"],
            ann_indexed=indexes["ann"],
            table_version=self.store.version,
            cache_bytes=self.store.cache_bytes(),
            **self.store.health(),
        )

    def owner_stats(self, owner: str | None) -> OwnerStats:
        """What ``owner`` sees: its memory count, the shared count, its documents.

        Args:
            owner: The owner counted; None counts every owner's memories.

        Raises:
            StoreUnavailable: the store cannot be read.
        """
        counts = self.store.group_counts("owner")
        shared = counts.get(SHARED_OWNER, 0)
        if owner is None:
            memories = sum(counts.values())
        else:
            memories = counts.get(owner, 0)
            shared = 0 if owner == SHARED_OWNER else shared
        return OwnerStats(
            owner=owner,
            memories=memories,
            shared=shared,
            documents=len(self.documents(owner=owner)),
            embedding_model=self.embedder.model_id,
            embedding_dim=self.embedder.dim,
            fts_indexed=self.store.index_state()["fts"],
        )

    def table_health(self) -> dict[str, int]:
        """``{"fragments", "small_fragments", "unindexed_rows", "versions"}`` of the memory table.

        Raises:
            StoreUnavailable: the table cannot be read.
        """
        return self.store.health()

    def check_consistency(self, *, repair: bool = False) -> ConsistencyReport:
        """Unique memory ids, and no SQL row pointing at a missing memory.

        See :func:`tribal_memory.ops.maintenance.check_consistency`.

        Args:
            repair: First move misfiled memories to their own ids (see
                :meth:`.Core.refile`), then delete SQL rows that point at
                missing memories (duplicate LanceDB ids are reported, never
                changed).

        Returns:
            The report after any repair; ``report.ok`` for a consistent store.

        Raises:
            StoreUnavailable: either store cannot be read or written.
        """
        if repair:
            for memory_id in misfiled_ids(self.core):
                self.core.refile(memory_id)
        with self.core.references_lock:
            if repair:
                prune_orphans(self.db, set(self.store.ids_of(SearchFilters())))
            return check_consistency(self.core)


if TYPE_CHECKING:

    def _conforms(service: MemoryService) -> MemoryAPI:
        """Mypy checks here that the service has :class:`MemoryAPI`'s methods and types."""
        return service

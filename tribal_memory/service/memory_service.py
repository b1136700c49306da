"""MemoryService: the one orchestrator every interface (HTTP, CLI, MCP) calls.

It validates input, embeds text, hands vectors to the store, fuses search
results and keeps the SQL side (relations, learned tables) consistent with the
memories. The core is synchronous; the HTTP layer runs it in worker threads.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from typing import get_args

from tribal_memory.auth.keys import ApiKeys
from tribal_memory.auth.policy import Caller
from tribal_memory.base.config import Settings
from tribal_memory.base.db import Database, engine_for, migrate
from tribal_memory.base.errors import Conflict, InvalidInput, NotFound, StoreUnavailable, TooLarge
from tribal_memory.base.models import (
    SHARED_OWNER,
    Anchor,
    CaptureResult,
    CommonNeighbor,
    DocumentInfo,
    DocumentResult,
    FeedbackResult,
    LearnedParts,
    Memory,
    MemoryInput,
    MemoryPage,
    MemoryPatch,
    Near,
    Neighbor,
    OwnerCleared,
    Relation,
    RelationInput,
    SearchFilters,
    SearchMode,
    SearchResult,
    StoreStats,
    Traversal,
    Variant,
    memory_id_for,
)
from tribal_memory.base.validation import (
    check_content,
    check_k,
    check_kind,
    check_metadata,
    check_owner,
    check_session_id,
    check_tags,
    check_time,
    validated_memory,
)
from tribal_memory.core.near_duplicates import find_near_duplicates
from tribal_memory.documents.chunk_context import chunk_context
from tribal_memory.documents.index import DocumentIndex
from tribal_memory.embeddings.base import Embedder, Vector
from tribal_memory.embeddings.fastembed import FastEmbedEmbedder
from tribal_memory.graph.queries import GraphQueries, check_traversal
from tribal_memory.graph.relations import RelationGraph
from tribal_memory.learned import forget_cached, forget_learned
from tribal_memory.learned.anchors import owners_for
from tribal_memory.learned.feedback import RetrievalEvent
from tribal_memory.learned.learner import Learner, event_results, scope_of
from tribal_memory.learned.stats import Bucket, RetrievalStats, retrieval_stats
from tribal_memory.ops.maintenance import ConsistencyReport, check_consistency, prune_orphans
from tribal_memory.ops.transfer import ImportResult, Source, export_lines, import_source
from tribal_memory.retrieval import Retriever, VariantPins
from tribal_memory.retrieval.vector import check_vector, search_by_vector
from tribal_memory.store.lancedb import LanceMemoryStore


def _now() -> datetime:
    return datetime.now(UTC)


class MemoryService:
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
        self.settings = settings
        if settings.uses_data_dir:
            try:
                settings.data_dir.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreUnavailable(
                    f"cannot create data dir {settings.data_dir}: {exc}"
                ) from exc
            if not os.access(settings.data_dir, os.W_OK):
                raise StoreUnavailable(f"data dir {settings.data_dir} is not writable")
        self.db = Database(engine_for(settings))  # a bad URL fails here, before the model loads
        try:
            self.embedder = embedder or FastEmbedEmbedder(
                settings.embedding_model,
                threads=settings.embedding_threads,
                query_threads=settings.embedding_query_threads,
                batch_size=settings.embed_batch_size,
                batch_chars=settings.embed_batch_chars,
            )
            # Server processes sharing one database start one at a time: the first
            # migrates and creates the LanceDB table and its index, the others open them.
            with self.db.lock("startup"):
                migrate(self.db.engine)
                self.store = LanceMemoryStore(
                    settings.lancedb_uri,
                    self.embedder.model_id,
                    self.embedder.dim,
                    read_consistency_s=settings.read_consistency_s,
                    ann_index_min_rows=settings.ann_index_min_rows,
                    ann_nprobes=settings.ann_nprobes,
                    optimize_every_rows=settings.optimize_every_rows,
                    optimize_growth=settings.optimize_growth,
                    optimize_interval_s=settings.optimize_interval_s,
                    keep_versions_s=settings.keep_versions_s,
                    optimize_small_fragments=settings.optimize_small_fragments,
                    index_cache_mb=settings.index_cache_mb,
                )
        except BaseException:
            self.db.close()
            raise
        self.graph = RelationGraph(self.db)
        self.graph_queries = GraphQueries(self.graph, self.store)
        self.keys = ApiKeys(self.db)
        self.learner = Learner(settings, self.db, self.store, self.embedder)
        self.retriever = Retriever(
            settings, self.store, self.embedder, self.learner, graph=self.graph
        )
        self.variants = VariantPins(settings, self.db)
        # Check-then-write sections: capture (is this content stored yet?), and delete
        # with every write that checks a memory exists and then stores a row pointing
        # at it (relate, feedback, anchors), so a concurrent delete cannot slip in
        # between and leave that row orphaned. With PostgreSQL they hold across server
        # processes too, and re-read LanceDB once held (see tribal_memory.base.db.SharedLock).
        self._capture_lock = self.db.lock("capture", on_acquire=self.store.refresh)
        self._references_lock = self.db.lock("references", on_acquire=self.store.refresh)
        self.document_index = DocumentIndex(self)

    def close(self) -> None:
        """Finish store maintenance, release database connections; unusable afterwards."""
        self.store.close()
        self.learner.close()
        self.db.close()

    def __enter__(self) -> MemoryService:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def authenticate(self, token: str) -> Caller | None:
        """The caller an API key stands for; None for a malformed, unknown or revoked key."""
        key = self.keys.authenticate(token)
        return None if key is None else Caller(owner=key.owner, admin=key.admin)

    # -- capture ----------------------------------------------------------------

    def capture(self, item: MemoryInput) -> CaptureResult:
        """Store one memory; see :meth:`capture_batch`."""
        return self.capture_batch([item])[0]

    def capture_batch(
        self, items: Sequence[MemoryInput], *, near_duplicates: bool = True
    ) -> list[CaptureResult]:
        """Store memories, idempotently, in one write.

        The whole batch is validated before anything is written: one invalid
        item rejects the batch and stores nothing. An item whose owner already
        has the same content (same deterministic id) is reported ``"exists"``
        and not written again. A new item whose cosine similarity to another
        memory of the same owner (stored, or earlier in the batch) reaches
        ``near_duplicate_threshold`` is stored and reported with
        ``near_duplicate_of``, unless ``near_duplicates`` is False (that check
        costs one vector search per new memory; bulk loads may skip it).

        Returns:
            One result per item, in input order.

        Raises:
            InvalidInput: empty content or owner, unknown kind, bad tag.
            TooLarge: content over ``max_content_chars`` or batch over ``max_batch_size``.
            StoreUnavailable / EmbeddingError: the write or the embedding failed
                (nothing of the batch is stored).
        """
        if len(items) > self.settings.max_batch_size:
            raise TooLarge(
                f"batch of {len(items)} memories is over the limit of "
                f"{self.settings.max_batch_size} (TRIBAL_MAX_BATCH_SIZE)"
            )
        now = _now()
        memories = [
            validated_memory(
                item,
                now,
                max_content_chars=self.settings.max_content_chars,
                max_tags=self.settings.max_tags,
                max_metadata_bytes=self.settings.max_metadata_bytes,
            )
            for item in items
        ]
        stored = self.store.get(list({m.memory_id for m in memories}))
        candidates = list({m.memory_id: m for m in memories if m.memory_id not in stored}.values())
        vectors = self.embedder.embed_batch([m.content for m in candidates])
        with self._capture_lock:
            # Another thread may have written some of these since the check above
            # (embedding runs outside the lock): check again, write only the rest.
            stored |= self.store.get([m.memory_id for m in candidates])
            keep = [i for i, m in enumerate(candidates) if m.memory_id not in stored]
            new_memories = [candidates[i] for i in keep]
            new_vectors = vectors[keep]
            duplicates = (
                find_near_duplicates(
                    self.store,
                    new_memories,
                    new_vectors,
                    threshold=self.settings.near_duplicate_threshold,
                )
                if near_duplicates
                else {}
            )
            self.store.add(new_memories, new_vectors)
        created = {
            m.memory_id: CaptureResult(m, "created", *duplicates.get(m.memory_id, (None, None)))
            for m in new_memories
        }
        results: list[CaptureResult] = []
        for memory in memories:
            if memory.memory_id in stored:
                results.append(CaptureResult(stored[memory.memory_id], "exists"))
            elif memory.memory_id in created:
                results.append(created.pop(memory.memory_id))
            else:  # a repeat within this batch of a memory created above
                results.append(CaptureResult(memory, "exists"))
        return results

    def write_memories(self, memories: Sequence[Memory], vectors: Vector) -> list[Memory]:
        """Store memories exactly as given, skipping ids already stored (import, restore).

        Unlike :meth:`capture_batch` nothing is validated, derived or embedded:
        ids, timestamps and metadata are kept as they are, and
        ``vectors`` must come from this instance's model. A repeated id within
        ``memories`` is written once.

        Args:
            memories: Memories to store.
            vectors: Their vectors, shape ``(len(memories), dim)``, float32.

        Returns:
            The memories written (ids not stored before), in input order.

        Raises:
            InvalidInput: ``vectors`` of the wrong shape.
            StoreUnavailable: the write failed (nothing of the batch is stored).
        """
        if vectors.shape != (len(memories), self.embedder.dim):
            raise InvalidInput(
                f"expected vectors of shape ({len(memories)}, {self.embedder.dim}), "
                f"got {vectors.shape}"
            )
        with self._capture_lock:
            stored = self.store.get(list({m.memory_id for m in memories}))
            keep: dict[str, int] = {}
            for i, memory in enumerate(memories):
                if memory.memory_id not in stored:
                    keep.setdefault(memory.memory_id, i)
            positions = list(keep.values())
            written = [memories[i] for i in positions]
            self.store.add(written, vectors[positions])
        return written

    # -- read, update, delete ---------------------------------------------------

    def get(self, memory_id: str, *, owner: str | None = None) -> Memory:
        """The memory with ``memory_id``.

        Args:
            memory_id: The memory's id.
            owner: When given, only that owner's and shared memories are visible.

        Raises:
            NotFound: no such memory, or not visible to ``owner``.
        """
        memory = self.store.get([memory_id]).get(memory_id)
        if memory is None or not _visible(memory, owner):
            raise NotFound(f"no memory with id {memory_id}")
        return memory

    def get_many(self, memory_ids: Sequence[str], *, owner: str | None = None) -> dict[str, Memory]:
        """The memories with these ids that exist and are visible to ``owner``.

        Returns:
            ``{memory_id: Memory}``; missing or invisible ids are absent (not an error).
        """
        found = self.store.get(list(dict.fromkeys(memory_ids)))
        return {i: m for i, m in found.items() if _visible(m, owner)}

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
        ingested documents go too. Shared memories are not the owner's and stay.

        Args:
            owner: The owner to clear (not ``shared`` unless named so).
            confirm: Must equal ``owner``: the explicit confirmation.

        Returns:
            How many memories and document records were deleted (0 and 0 for
            an owner with none).

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
        ids = self.store.ids_of(SearchFilters(owner=owner, include_shared=False))
        deleted = 0
        for start in range(0, len(ids), self.settings.max_batch_size):
            deleted += self.delete_many(ids[start : start + self.settings.max_batch_size])
        documents = self.document_index.forget_owner(owner)
        return OwnerCleared(owner, deleted, documents)

    def update(self, memory_id: str, patch: MemoryPatch, *, owner: str | None = None) -> Memory:
        """Change fields of a memory; the id stays. New content is re-embedded.

        Everything learned that points at the memory (cache entries, query
        weights, anchors) is invalidated in the same call.

        Raises:
            NotFound: no such memory visible to ``owner``.
            Conflict: the new content equals another memory of the same owner.
            InvalidInput / TooLarge: as for capture.
        """
        current = self.get(memory_id, owner=owner)
        # Every anchor (learned and manual) goes with the rest of the learned data
        # below (DESIGN §2: an update invalidates all that points at the memory).
        changes: dict[str, object] = {"updated_at": _now()}
        vector = None
        if patch.content is not None:
            content = check_content(patch.content, self.settings.max_content_chars)
            if content != current.content:
                twin = memory_id_for(current.owner, content)
                if twin != memory_id and self.store.get([twin]):
                    raise Conflict(f"memory {twin} of this owner already has that content")
                changes["content"] = content
                vector = self.embedder.embed(content)
        if patch.tags is not None:
            changes["tags"] = check_tags(patch.tags, self.settings.max_tags)
        if patch.kind is not None:
            check_kind(patch.kind)
            changes["kind"] = patch.kind
        if patch.source is not None:
            changes["source"] = patch.source
        if patch.event_time is not None:
            changes["event_time"] = check_time(patch.event_time, "event_time")
        if patch.metadata is not None:
            changes["metadata"] = check_metadata(patch.metadata, self.settings.max_metadata_bytes)
        updated = dataclasses.replace(current, **changes)  # type: ignore[arg-type]
        # Under the references lock, as delete: a feedback loading a weight row of
        # this memory must not have it removed under its feet.
        with self._references_lock:
            self.store.replace(updated, vector)
            forget_learned(self.db, [memory_id])
        return updated

    def forget_cached(self, memory_ids: Sequence[str]) -> int:
        """Drop the cache entries that snapshot any of ``memory_ids`` (their fields changed).

        Serialised with feedback (the references lock), which updates cache
        entries in place. Returns the entries dropped.
        """
        with self._references_lock:
            return forget_cached(self.db, memory_ids)

    def delete(self, memory_id: str, *, owner: str | None = None) -> None:
        """Delete a memory with its relations and everything learned that points at it.

        Raises:
            NotFound: no such memory visible to ``owner``.
        """
        with self._references_lock:
            self.get(memory_id, owner=owner)
            self.store.delete([memory_id])
            self.graph.forget(memory_id)
            forget_learned(self.db, [memory_id])

    def delete_many(self, memory_ids: Sequence[str], *, owner: str | None = None) -> int:
        """:meth:`delete` for many memories in one store write.

        Ids that are not stored or not visible to ``owner`` are skipped (not an error).

        Returns:
            How many memories were deleted.
        """
        with self._references_lock:
            found = self.store.get(list(dict.fromkeys(memory_ids)))
            ids = [memory_id for memory_id, memory in found.items() if _visible(memory, owner)]
            deleted = self.store.delete(ids)
            for memory_id in ids:
                self.graph.forget(memory_id)
            forget_learned(self.db, ids)
            return deleted

    # -- documents --------------------------------------------------------------

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

    def documents(self, *, owner: str | None = None) -> list[DocumentInfo]:
        """Ingested documents of ``owner`` and shared ones (None: all), by owner and path."""
        return self.document_index.documents(owner=owner)

    def delete_document(self, path: str, *, owner: str | None = None) -> DocumentResult:
        """Delete a document with its chunks (and everything learned about them).

        Chunks whose text another document of the owner also holds stay.

        Raises:
            NotFound: no document at ``path`` visible to ``owner``.
            InvalidInput: ``owner`` is None and several owners have that path.
        """
        return self.document_index.delete(path, owner=owner)

    # -- retrieval --------------------------------------------------------------

    def recall(
        self,
        query: str,
        *,
        k: int = 10,
        filters: SearchFilters | None = None,
        min_score: float = 0.0,
        learned: LearnedParts | None = None,
        context: bool = False,
        learner: str | None = None,
        near: Near | None = None,
    ) -> SearchResult:
        """Embedding-similarity recall (:meth:`search` with ``mode="vector"``).

        Returns:
            Up to ``k`` hits; ``score`` = cosine similarity clipped to [0, 1]
            (higher is closer), plus any learned boost or anchor match once the
            learned layer has data (see :meth:`search`). Hits under
            ``min_score`` are dropped; no match gives an empty result.

        Raises:
            InvalidInput: empty query or k < 1, a bad ``near`` traversal.
            TooLarge: k over ``max_k``.
            NotFound: the ``near`` memory does not exist or is not visible.
        """
        return self.search(
            query,
            k=k,
            filters=filters,
            mode="vector",
            min_score=min_score,
            learned=learned,
            context=context,
            learner=learner,
            near=near,
        )

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
        learner: str | None = None,
        near: Near | None = None,
    ) -> SearchResult:
        """Hybrid (vector + BM25) search over memories passing ``filters``.

        Both paths fetch ``max(k, candidate_pool)`` candidates over the same
        prefilter; :func:`tribal_memory.retrieval.fusion.fused_candidates` combines
        them. With fewer than ``fts_min_rows`` visible memories, hybrid search
        runs on vectors alone and reports ``fallback="vector"``. The retrieval
        pipeline (:mod:`tribal_memory.retrieval.pipeline`) then applies the parts in
        ``learned``; None means the owner's A/B variant: the parts switched on
        in settings for ``learned``, none for ``baseline``. With no learned data
        yet, results equal plain search exactly. With ``context``, the result
        also carries each document chunk hit's parent and neighbouring chunks
        (:func:`tribal_memory.documents.chunk_context.chunk_context`), apart from the hits.

        ``learner`` is the owner whose learned data (and A/B variant) the
        search uses: the caller's own owner when it searches another scope
        (e.g. only ``shared`` memories); None: the scope of ``filters``
        (``filters.owner``, or all owners).

        ``near`` restricts the search to a memory's graph neighbourhood: that
        memory and those its traversal reaches (:meth:`neighbors`, seen as
        ``filters.owner`` sees them) become a prefilter on memory ids of both
        paths, so the ranking is otherwise the same search.

        Returns:
            A :class:`SearchResult`; every hit has its fused ``score`` and its
            ``vector_score``/``text_score`` parts, all in [0, 1], higher better.

        Raises:
            InvalidInput: empty query, k < 1, unknown mode, bad filter, a bad
                ``near`` traversal (steps outside 1..5, a bad type or blocked name).
            TooLarge: k over ``max_k``.
            NotFound: the ``near`` memory does not exist or is not visible.
        """
        query = query.strip()
        if not query:
            raise InvalidInput("query must not be empty")
        if len(query) > self.settings.max_content_chars:
            raise TooLarge(f"query is over {self.settings.max_content_chars} characters")
        check_k(k, self.settings.max_k)
        if mode not in get_args(SearchMode):
            modes = ", ".join(get_args(SearchMode))
            raise InvalidInput(f"mode must be one of {modes}, not {mode!r}")
        filters = filters or SearchFilters()
        learner = learner if learner is not None else scope_of(filters)
        if learned is None:
            variant = self.variants.variant_for(learner)
            learned = self.settings.learned_parts if variant == "learned" else LearnedParts.none()
        result = self.retriever.search(
            query,
            k=k,
            filters=self._near(filters, near) if near is not None else filters,
            mode=mode,
            min_score=min_score,
            parts=learned,
            learner=learner,
        )
        if not context:
            return result
        found = chunk_context(
            result.hits, store=self.store, documents=self.document_index, filters=filters
        )
        return dataclasses.replace(result, context=found)

    def search_vector(
        self,
        vector: Sequence[float] | Vector,
        *,
        k: int = 10,
        filters: SearchFilters | None = None,
        min_score: float = 0.0,
        near: Near | None = None,
    ) -> SearchResult:
        """Memories nearest to a raw embedding vector (cosine), best first.

        For vectors made by this instance's model elsewhere (its id and
        dimension are in :meth:`stats`). No text is embedded and the learned
        layer takes no part (it learns from queries).

        Args:
            vector: ``embedding_dim`` floats; need not be unit length.
            k: Most hits, 1 to ``max_k``.
            filters: Prefilter, as for :meth:`search`.
            min_score: Hits under it are dropped, in [0, 1].
            near: Only this memory's graph neighbourhood, as for :meth:`search`.

        Returns:
            Mode ``vector``; ``score`` = ``vector_score`` = cosine similarity
            clipped to [0, 1], higher is closer. No match: no hits.

        Raises:
            InvalidInput: a vector of another dimension, a value not finite,
                all zeros; k < 1; a bad filter or ``near`` traversal.
            TooLarge: k over ``max_k``.
            NotFound: the ``near`` memory does not exist or is not visible.
        """
        checked = check_vector(vector, self.embedder.dim)
        check_k(k, self.settings.max_k)
        filters = filters or SearchFilters()
        if near is not None:
            filters = self._near(filters, near)
        return search_by_vector(self.store, checked, k=k, filters=filters, min_score=min_score)

    def _near(self, filters: SearchFilters, near: Near) -> SearchFilters:
        """``filters`` narrowed to the neighbourhood ``near`` names, as ``filters.owner`` sees it.

        Raises:
            NotFound: the memory does not exist or is not visible.
            InvalidInput: a bad traversal.
        """
        traversal = check_traversal(near.traversal)
        ids = self.graph_queries.neighbourhood(near.memory_id, traversal, filters.owner)
        if filters.memory_ids is not None:
            allowed = set(filters.memory_ids)
            ids = [i for i in ids if i in allowed]
        return dataclasses.replace(filters, memory_ids=tuple(ids))

    # -- the learned layer ----------------------------------------------------------

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
        learner: str | None = None,
        session_id: str | None = None,
        near: Near | None = None,
    ) -> SearchResult:
        """:meth:`search`, logged as a retrieval event that usage feedback can refer to.

        The event belongs to ``learner`` (None: the scope of ``filters``): only
        that owner may send its feedback, and what it teaches is that owner's.
        ``session_id`` (1 to 128 characters) ties retrievals of one agent task
        together: feedback on any of them may name memories another returned.

        Returns:
            The search result with ``retrieval_id`` set; pass it with the ids
            of the hits the caller used to :meth:`record_usage_feedback`.

        Raises:
            As :meth:`search`; InvalidInput also for an empty or over-long ``session_id``.
        """
        session_id = check_session_id(session_id)
        filters = filters or SearchFilters()
        learner = learner if learner is not None else scope_of(filters)
        result = self.search(
            query,
            k=k,
            filters=filters,
            mode=mode,
            min_score=min_score,
            learned=learned,
            context=context,
            learner=learner,
            near=near,
        )
        parts = (
            learned
            if learned is not None
            else (
                self.settings.learned_parts if result.variant == "learned" else LearnedParts.none()
            )
        )
        retrieval_id = self.learner.feedback.log(
            owner=learner,
            query=query.strip(),
            variant=result.variant,
            results=event_results(result.hits),
            parts=parts.names,
            cache_hit=result.cached,
            session_id=session_id,
        )
        return dataclasses.replace(result, retrieval_id=retrieval_id)

    def record_usage_feedback(
        self, retrieval_id: str, used_ids: Sequence[str], *, owner: str | None = None
    ) -> FeedbackResult:
        """Report which memories of a logged retrieval the caller used.

        Used (query, memory) pairs are reinforced, retrieved-but-unused ones
        penalised; the query's cache entry counts a success (some used) or a
        failure (none used); used memories gain the query as an anchor once
        used ``anchor_min_uses`` times. Sending the same feedback again
        changes nothing (``duplicate=True``).

        Args:
            retrieval_id: From :meth:`recall_with_feedback`.
            used_ids: Memory ids among that retrieval's hits (may be empty:
                nothing was useful).
            owner: When given, only that owner's retrievals are visible.

        Raises:
            NotFound: unknown retrieval id (or another owner's).
            InvalidInput: a used id that was not among that retrieval's hits.
            Conflict: the retrieval already has feedback with other ids.
        """
        with self._references_lock:
            return self.learner.record_usage(retrieval_id, used_ids, owner=owner)

    def retrieval(self, retrieval_id: str, *, owner: str | None = None) -> RetrievalEvent:
        """The logged retrieval ``retrieval_id`` (its query, hits and any feedback).

        Raises:
            NotFound: unknown retrieval id, or one logged for another ``owner``.
        """
        event = self.learner.feedback.event(retrieval_id)
        if event is None or (owner is not None and event.owner != owner):
            raise NotFound(f"no retrieval with id {retrieval_id}")
        return event

    def session_memory_ids(self, event: RetrievalEvent) -> tuple[str, ...]:
        """Memories feedback on ``event`` may name; never raises.

        Its results, then (with a session) those of every other retrieval of
        its owner and session.
        """
        ids = list(event.result_ids)
        if event.session_id is not None:
            found = self.learner.feedback.session_results(event.owner, event.session_id)
            ids += [i for i in found if i not in set(ids)]
        return tuple(ids)

    def add_anchor(self, memory_id: str, text: str, *, owner: str | None = None) -> Anchor:
        """Attach a manual anchor (a question the memory answers); active at once.

        The anchor belongs to the memory's owner: every search that can see
        the memory uses it (a ``shared`` memory's: everyone's).

        Raises:
            NotFound: no such memory visible to ``owner``.
            InvalidInput: empty or over-long anchor text.
        """
        with self._references_lock:
            memory = self.get(memory_id, owner=owner)
            return self.learner.anchors.add(memory_id, text, memory.owner)

    def anchors(self, memory_id: str, *, owner: str | None = None) -> list[Anchor]:
        """Anchors of a memory that ``owner``'s searches use (None: every owner's), most used first.

        Another owner's learned anchors (its questions) are not listed.

        Raises:
            NotFound: no such memory visible to ``owner``.
        """
        self.get(memory_id, owner=owner)
        owners = owners_for(owner) if owner is not None else None
        return self.learner.anchors.anchors_of(memory_id, owners)

    def remove_anchor(self, memory_id: str, text: str, *, owner: str | None = None) -> None:
        """Detach an anchor from a memory.

        Only anchors ``owner``'s searches use (its own and ``shared`` ones; None:
        any owner's) are removed.

        Raises:
            NotFound: no such memory visible to ``owner``, or no such anchor.
        """
        self.get(memory_id, owner=owner)
        owners = owners_for(owner) if owner is not None else None
        if not self.learner.anchors.remove(memory_id, text, owners):
            raise NotFound(f"memory {memory_id} has no anchor {text!r}")

    def pin_variant(self, owner: str, variant: Variant | None) -> None:
        """Pin ``owner`` to the A/B variant ``learned`` or ``baseline`` (None: unpin).

        Raises:
            InvalidInput: an invalid owner or variant.
        """
        owner = check_owner(owner)
        if variant not in (None, "learned", "baseline"):
            raise InvalidInput(f"variant must be learned or baseline, not {variant!r}")
        self.variants.pin(owner, variant)

    def retrieval_stats(
        self,
        *,
        owner: str | None = None,
        bucket: Bucket = "day",
        since: datetime | None = None,
    ) -> RetrievalStats:
        """Cache hit rate, usage rates per variant, expansion lift and a learning curve.

        Args:
            owner: Only this owner's retrievals (None: all).
            bucket: Learning-curve period, ``"day"`` or ``"week"``.
            since: Only retrievals at or after this time.

        Raises:
            InvalidInput: an unknown bucket, or a ``since`` out of range in UTC.
        """
        if bucket not in ("day", "week"):
            raise InvalidInput(f"bucket must be day or week, not {bucket!r}")
        since = check_time(since, "since")
        return retrieval_stats(
            self.db,
            owner=owner,
            bucket=bucket,
            since=since,
            counters=dict(self.learner.counters),
            min_successes=self.settings.cache_min_successes,
            min_success_rate=self.settings.cache_min_success_rate,
        )

    def variant_for(self, owner: str) -> Variant:
        """The A/B variant that serves ``owner``."""
        return self.variants.variant_for(owner)

    # -- relations ----------------------------------------------------------------

    def relate(
        self,
        source_id: str,
        target_id: str,
        type: str,
        *,
        weight: float = 1.0,
        owner: str | None = None,
    ) -> Relation:
        """Add (or re-weight) the edge ``source -[type]-> target``; idempotent.

        Raises:
            NotFound: either memory does not exist or is not visible to ``owner``.
            InvalidInput: self-relation, empty or over-long type, negative weight.
        """
        if source_id == target_id:
            raise InvalidInput("a memory cannot be related to itself")
        with self._references_lock:
            self.get(source_id, owner=owner)
            self.get(target_id, owner=owner)
            return self.graph.relate(source_id, target_id, type, weight)

    def relate_batch(
        self, edges: Sequence[RelationInput], *, owner: str | None = None
    ) -> list[Relation]:
        """Add (or re-weight) many edges in one write; one bad edge rejects the batch.

        The whole batch is checked first (types, weights, no self-relation,
        both ends existing and visible to ``owner``); any error names the
        edge by its position (``relations[3]: ...``) and nothing is written.

        Args:
            edges: Up to ``max_batch_size`` edges; an edge given twice is
                written once, with its last weight.
            owner: Whose view (None: every memory).

        Returns:
            The stored edges, one per input, in input order.

        Raises:
            InvalidInput: an empty batch, a self-relation, an empty or
                over-long type, a negative weight.
            TooLarge: more than ``max_batch_size`` edges.
            NotFound: an end that does not exist or is not visible to ``owner``.
        """
        if not edges:
            raise InvalidInput("relations must not be empty")
        if len(edges) > self.settings.max_batch_size:
            raise TooLarge(
                f"batch of {len(edges)} relations is over the limit of "
                f"{self.settings.max_batch_size} (TRIBAL_MAX_BATCH_SIZE)"
            )
        for i, edge in enumerate(edges):
            if edge.source_id == edge.target_id:
                raise InvalidInput(f"relations[{i}]: a memory cannot be related to itself")
        with self._references_lock:
            ids = [i for e in edges for i in (e.source_id, e.target_id)]
            visible = self.get_many(ids, owner=owner)
            for i, edge in enumerate(edges):
                for end in (edge.source_id, edge.target_id):
                    if end not in visible:
                        raise NotFound(f"relations[{i}]: no memory with id {end}")
            return self.graph.relate_many(edges)

    def unrelate(
        self, source_id: str, target_id: str, type: str, *, owner: str | None = None
    ) -> None:
        """Remove one edge.

        Both ends must be visible to ``owner``; whichever check fails, the
        answer is the same, so a caller learns nothing of edges it may not see.

        Raises:
            NotFound: no such edge, or either end not visible to ``owner``.
        """
        with self._references_lock:
            visible = self.get_many([source_id, target_id], owner=owner)
            both = source_id in visible and target_id in visible
            if not both or not self.graph.unrelate(source_id, target_id, type):
                raise NotFound(f"no relation {source_id} -[{type}]-> {target_id}")

    def relations(self, memory_id: str, *, owner: str | None = None) -> list[Relation]:
        """Edges touching the memory (either direction), newest first.

        Edges whose other end ``owner`` cannot see are left out (they would
        reveal that memory's id).

        Raises:
            NotFound: no such memory visible to ``owner``.
        """
        self.get(memory_id, owner=owner)
        edges = self.graph.edges_of([memory_id])
        if owner is None:
            return edges
        visible = self.get_many([i for e in edges for i in (e.source_id, e.target_id)], owner=owner)
        return [e for e in edges if e.source_id in visible and e.target_id in visible]

    def neighbors(
        self,
        memory_id: str,
        *,
        steps: int = 1,
        owner: str | None = None,
        types: Sequence[str] = (),
        block: Sequence[str] = (),
    ) -> list[Neighbor]:
        """Memories within ``steps`` hops over relations (either direction), BFS order.

        Memories not visible to ``owner`` are neither returned nor walked through.
        ``types`` and ``block`` narrow the walk (see :class:`~tribal_memory.base.models.Traversal`).

        Returns:
            Each memory once, at its least hop count (>= 1), with the edge that
            reached it; empty when nothing is related.

        Raises:
            NotFound: the start memory does not exist or is not visible.
            InvalidInput: steps outside 1..5; a bad type or blocked name.
        """
        traversal = check_traversal(Traversal(steps, tuple(types), tuple(block)))
        self.graph_queries.start(memory_id, owner)
        return self.graph_queries.walk(memory_id, traversal, owner)

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
        """Memories within ``steps`` hops of every one of ``memory_ids`` (the given ones excepted).

        Walks as :meth:`neighbors` does from each of them, with the same
        visibility: a memory ``owner`` may not see is never returned, counted
        or walked through.

        Args:
            memory_ids: 2 to 16 distinct memory ids.
            steps: Most hops from each, 1 to 5.
            owner: Whose view (None: every memory).
            types: Follow only relations of these types (empty: all).
            block: Relation types never followed and memory kinds never entered.
            limit: Most memories returned, 1 to ``max_k`` (None: 100 or
                ``max_k`` if smaller).

        Returns:
            Closest first (by the largest hop count, then their sum), each with
            its hop count from every given memory, in their order; empty when
            nothing is within reach of all of them.

        Raises:
            NotFound: one of the memories does not exist or is not visible.
            InvalidInput: fewer than 2 or more than 16 ids, a repeated id,
                steps outside 1..5, a bad type or blocked name, limit < 1.
            TooLarge: limit over ``max_k``.
        """
        limit = self._limit(limit)
        traversal = check_traversal(Traversal(steps, tuple(types), tuple(block)))
        return self.graph_queries.intersection(list(memory_ids), traversal, owner, limit=limit)

    def _limit(self, limit: int | None) -> int:
        """``limit``, checked against ``max_k``; None: 100 or ``max_k`` if smaller.

        Raises:
            InvalidInput: limit < 1. TooLarge: limit over ``max_k``.
        """
        if limit is None:
            return min(100, self.settings.max_k)
        check_k(limit, self.settings.max_k)
        return limit

    # -- export and import --------------------------------------------------------

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
            self, owner=owner, batch_rows=self.settings.transfer_batch_rows, progress=progress
        )

    def import_jsonl(
        self, source: Source, *, progress: Callable[[int, int], None] | None = None
    ) -> ImportResult:
        """Import an export; see :func:`tribal_memory.ops.transfer.import_source`.

        Args:
            source: A path, the file's bytes, or a seekable binary file.
            progress: Called with (records written, records in the file) after each batch.

        Raises:
            InvalidInput: unreadable file, unknown format or version, a bad
                line (named), a truncated file; nothing is written.
            TooLarge: a memory over ``max_content_chars``; nothing is written.
            StoreUnavailable / EmbeddingError: a write failed; it is undone.
        """
        return import_source(
            self, source, batch_rows=self.settings.transfer_batch_rows, progress=progress
        )

    # -- maintenance ------------------------------------------------------------

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
            **self.store.health(),
        )

    def optimize(self) -> None:
        """Fold new rows into the indexes and drop old versions (see the store)."""
        self.store.optimize()

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
            repair: First delete SQL rows that point at missing memories
                (duplicate LanceDB ids are reported, never changed).

        Returns:
            The report after any repair; ``report.ok`` for a consistent store.

        Raises:
            StoreUnavailable: either store cannot be read or written.
        """
        with self._references_lock:
            if repair:
                prune_orphans(self.db, set(self.store.memory_ids()))
            return check_consistency(self)


def _visible(memory: Memory, owner: str | None) -> bool:
    return SearchFilters(owner=owner).admits_owner(memory.owner)

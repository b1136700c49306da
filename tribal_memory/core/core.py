"""The core every feature shares: an open store and the functions that write to it.

:class:`Core` opens the data dir (SQLite or PostgreSQL through SQLAlchemy,
LanceDB, the embedding model) and owns the write paths that must keep the SQL
side consistent with the memories: capture, write as given, update, delete,
and the locks they take. Documents, transfer and maintenance are built on a
Core; the :class:`~tribal_memory.service.memory_service.MemoryService` adds
retrieval, the learned layer and the graph queries on top of one.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Sequence
from datetime import UTC, datetime

from tribal_memory.base.config import Settings
from tribal_memory.base.db import Database, SharedLock, engine_for, migrate
from tribal_memory.base.errors import (
    Conflict,
    Forbidden,
    InvalidInput,
    NotFound,
    PreconditionFailed,
    StoreUnavailable,
    TooLarge,
)
from tribal_memory.base.graph import RelationInput
from tribal_memory.base.models import (
    SHARED_OWNER,
    CaptureResult,
    Memory,
    MemoryInput,
    MemoryPatch,
    SearchFilters,
    version_of,
)
from tribal_memory.base.validation import (
    validated_memory,
)
from tribal_memory.core.edits import check_not_in_document, patched, refiled, same_capture
from tribal_memory.core.near_duplicates import find_near_duplicates
from tribal_memory.embeddings.base import Embedder, Vector
from tribal_memory.embeddings.fastembed import FastEmbedEmbedder
from tribal_memory.graph.relations import RelationGraph
from tribal_memory.learned import forget_cached, forget_learned
from tribal_memory.store.base import MemoryStore
from tribal_memory.store.lancedb import LanceMemoryStore

MEMORY_LOCK_STRIPES = 64
"""Locks that serialise the writes of one memory: a memory's lock is the one its id hashes to."""


def _now() -> datetime:
    return datetime.now(UTC)


class Core:
    """An open store (settings, database, LanceDB, model, relation graph) and its writes.

    Args:
        settings: Configuration (data dir, model, limits).
        embedder: An already loaded embedder to share (tests and benchmarks
            open many stores over one model); loaded from settings if None.

    Attributes:
        capture_lock: Held while checking which memories are new and writing them.
        references_lock: Held by every write that checks a memory exists and
            then stores a row pointing at it (relations, feedback, anchors),
            and by deletes, so a delete cannot slip in between.

    Every update and delete of a memory also holds that memory's own lock
    (:meth:`memory_lock`) from its read to its write, the re-embedding
    included, so two writes of one memory never interleave.

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
                self.store: MemoryStore = LanceMemoryStore.from_settings(
                    settings,
                    self.embedder.model_id,
                    self.embedder.dim,
                    # Replicas on one PostgreSQL optimise the shared table one at a time.
                    maintenance_lock=self.db.lock("optimize"),
                )
        except BaseException:
            self.db.close()
            raise
        self.graph = RelationGraph(self.db)
        # Check-then-write sections: capture (is this content stored yet?), and delete
        # with every write that checks a memory exists and then stores a row pointing
        # at it (relate, feedback, anchors), so a concurrent delete cannot slip in
        # between and leave that row orphaned. With PostgreSQL they hold across server
        # processes too, and re-read LanceDB once held (see tribal_memory.base.db.SharedLock).
        self.capture_lock = self.db.lock("capture", on_acquire=self.store.refresh)
        self.references_lock = self.db.lock("references", on_acquire=self.store.refresh)
        self._memory_locks = [
            self.db.lock(f"memory-{i}", on_acquire=self.store.refresh)
            for i in range(MEMORY_LOCK_STRIPES)
        ]

    def memory_lock(self, memory_id: str) -> SharedLock:
        """The lock every read-modify-write of ``memory_id`` holds (one of 64, by id hash).

        Taken before :attr:`capture_lock` and :attr:`references_lock`, never after them.
        """
        return self._memory_locks[zlib.crc32(memory_id.encode()) % MEMORY_LOCK_STRIPES]

    def close(self) -> None:
        """Finish store maintenance, release database connections; unusable afterwards."""
        self.store.close()
        self.db.close()

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
        with self.capture_lock:
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
                results.append(
                    CaptureResult(same_capture(stored[memory.memory_id], memory), "exists")
                )
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
        with self.capture_lock:
            stored = self.store.get(list({m.memory_id for m in memories}))
            keep: dict[str, int] = {}
            for i, memory in enumerate(memories):
                if memory.memory_id not in stored:
                    keep.setdefault(memory.memory_id, i)
            positions = list(keep.values())
            written = [memories[i] for i in positions]
            self.store.add(written, vectors[positions])
        return written

    def overwrite(self, memory: Memory) -> None:
        """Store ``memory`` as given over the stored memory with its id (an import's replace).

        The stored vector stays (the id stands for the same owner and content);
        everything learned that points at the memory is dropped, as for :meth:`update`.

        Raises:
            NotFound: no memory with that id.
            StoreUnavailable: the write failed.
        """
        with self.memory_lock(memory.memory_id), self.references_lock:
            self.store.replace(memory, None)
            forget_learned(self.db, [memory.memory_id])

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

    def update(
        self,
        memory_id: str,
        patch: MemoryPatch,
        *,
        owner: str | None = None,
        if_version: str | None = None,
        shared_writable: bool = True,
    ) -> Memory:
        """Change fields of a memory. New content is re-embedded and re-keyed.

        A memory's id is always the one capture gives its owner and content
        (UUIDv5): new content moves the memory to the id of that content, in
        one store write, with its relations. So capturing the old content again
        stores it anew, and capturing the new content answers ``exists``. The
        memory of an ingested document keeps its content (re-ingest the
        document instead). Everything learned that points at the memory (cache
        entries, query weights, anchors) is invalidated in the same call.

        The whole read-modify-write, re-embedding included, holds the memory's
        lock: concurrent updates of one memory apply one after the other.

        Args:
            memory_id: The memory to change.
            patch: The fields to change (None: unchanged).
            owner: When given, only that owner's and shared memories are visible.
            if_version: Change only if the memory's version (:func:`version_of`)
                is this one (optimistic concurrency); None: unconditional.
            shared_writable: False refuses a change of a ``shared`` memory
                (callers without an admin key).

        Returns:
            The memory as stored (with its new id if the content changed).

        Raises:
            NotFound: no such memory visible to ``owner``.
            PreconditionFailed: ``if_version`` is not the stored version.
            Forbidden: a shared memory and ``shared_writable`` is False.
            Conflict: the new content equals another memory of the same owner,
                or the memory belongs to an ingested document.
            InvalidInput / TooLarge: as for capture.
        """
        with self.memory_lock(memory_id):
            current = self._writable(memory_id, owner, if_version, shared_writable)
            updated, vector = patched(current, patch, self.settings, self.embedder)
            if updated.memory_id == memory_id:
                # Under the references lock, as delete: a feedback loading a weight row of
                # this memory must not have it removed under its feet.
                with self.references_lock:
                    self.store.replace(updated, vector)
                    forget_learned(self.db, [memory_id])
                return updated
            assert vector is not None  # new content, so a new id, comes with its vector
            check_not_in_document(self.db, current)
            with self.capture_lock, self.references_lock:
                if self.store.get([updated.memory_id]):
                    raise Conflict(
                        f"memory {updated.memory_id} of this owner already has that content"
                    )
                self.store.rekey(memory_id, updated, vector)
                self.graph.rekey(memory_id, updated.memory_id)
                forget_learned(self.db, [memory_id])
            return updated

    def _writable(
        self, memory_id: str, owner: str | None, if_version: str | None, shared_writable: bool
    ) -> Memory:
        """The stored memory, once checked that this write may change it (see :meth:`update`)."""
        current = self.get(memory_id, owner=owner)
        if current.owner == SHARED_OWNER and not shared_writable:
            raise Forbidden("changing or deleting a shared memory needs an admin key")
        if if_version is not None and if_version != version_of(current):
            raise PreconditionFailed(
                f"memory {memory_id} is at version {version_of(current)}, not {if_version}: "
                "it changed since it was read"
            )
        return current

    def refile(self, memory_id: str) -> str | None:
        """Move a memory stored under another id than capture's to its own (a repair).

        Stores written before edits re-keyed hold edited memories under their
        first content's id. The memory moves to capture's id of its owner and
        content, with its relations, as an edit would move it; if a memory is
        already stored there (the same owner and content), this one's relations
        join it and this one goes. Learned data of the old id is dropped.

        Returns:
            The id the memory is now under; None when ``memory_id`` is not
            stored or already is capture's id.

        Raises:
            StoreUnavailable / EmbeddingError: the write or the embedding failed.
        """
        with self.memory_lock(memory_id):
            memory = self.store.get([memory_id]).get(memory_id)
            moved = refiled(memory) if memory is not None else None
            if moved is None:
                return None
            vector = self.embedder.embed(moved.content)
            with self.capture_lock, self.references_lock:
                if self.store.get([moved.memory_id]):
                    self.store.delete([memory_id])
                else:
                    self.store.rekey(memory_id, moved, vector)
                self.graph.rekey(memory_id, moved.memory_id)
                forget_learned(self.db, [memory_id])
            new_id: str = moved.memory_id
            return new_id

    def forget_cached(self, memory_ids: Sequence[str]) -> int:
        """Drop the cache entries that snapshot any of ``memory_ids`` (their fields changed).

        Serialised with feedback (the references lock), which updates cache
        entries in place. Returns the entries dropped.
        """
        with self.references_lock:
            return forget_cached(self.db, memory_ids)

    def delete(
        self,
        memory_id: str,
        *,
        owner: str | None = None,
        if_version: str | None = None,
        shared_writable: bool = True,
    ) -> None:
        """Delete a memory with its relations and everything learned that points at it.

        Args:
            memory_id: The memory to delete.
            owner: When given, only that owner's and shared memories are visible.
            if_version: Delete only if the memory is at this version (see :meth:`update`).
            shared_writable: False refuses to delete a ``shared`` memory.

        Raises:
            NotFound: no such memory visible to ``owner``.
            PreconditionFailed: ``if_version`` is not the stored version.
            Forbidden: a shared memory and ``shared_writable`` is False.
        """
        with self.memory_lock(memory_id), self.references_lock:
            self._writable(memory_id, owner, if_version, shared_writable)
            self.store.delete([memory_id])
            self.graph.forget(memory_id)
            forget_learned(self.db, [memory_id])

    def delete_many(self, memory_ids: Sequence[str], *, owner: str | None = None) -> int:
        """:meth:`delete` for many memories in one store write.

        Ids that are not stored or not visible to ``owner`` are skipped (not an error).

        Returns:
            How many memories were deleted.
        """
        with self.references_lock:
            found = self.store.get(list(dict.fromkeys(memory_ids)))
            ids = [memory_id for memory_id, memory in found.items() if _visible(memory, owner)]
            deleted = self.store.delete(ids)
            for memory_id in ids:
                self.graph.forget(memory_id)
            forget_learned(self.db, ids)
            return deleted

    def set_relations(
        self, source_ids: Sequence[str], types: Sequence[str], edges: Sequence[RelationInput]
    ) -> None:
        """Make the edges of ``types`` leaving ``source_ids`` exactly ``edges``.

        Under the references lock, so a concurrent delete cannot orphan an
        edge; an edge with an end not stored is skipped (not an error).

        Raises:
            InvalidInput: an edge with an empty type or a negative weight.
        """
        with self.references_lock:
            ends = list({e.source_id for e in edges} | {e.target_id for e in edges})
            stored = self.store.get(ends) if ends else {}
            kept = [e for e in edges if e.source_id in stored and e.target_id in stored]
            self.graph.replace_outgoing(source_ids, types, kept)

    def optimize(self) -> None:
        """Fold new rows into the indexes and drop old versions (see the store)."""
        self.store.optimize()


def _visible(memory: Memory, owner: str | None) -> bool:
    return SearchFilters(owner=owner).admits_owner(memory.owner)

"""Frozen dataclasses passed between layers: memories, filters, documents, counts.

LanceDB rows and ORM objects never leave their modules; every layer speaks in
these types (search results are in :mod:`.results`, graph shapes in
:mod:`.graph`). Times are timezone-aware UTC ``datetime`` objects.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import msgspec

SHARED_OWNER = "shared"
"""Owner whose memories every owner can see."""


MemoryKind = Literal["fact", "chunk", "document", "summary"]
"""``summary``: a section's or a document's summary, made on ingest
(:mod:`tribal_memory.documents.summaries`)."""


MEMORY_KINDS: tuple[str, ...] = ("fact", "chunk", "document", "summary")

SUMMARY_KIND: MemoryKind = "summary"
"""The kind of summary memories, left out of searches whose ``kinds`` filter does not name it."""


_ID_NAMESPACE = uuid.UUID("6f1c1a56-9a53-4b8e-9a0c-7d1e2b3c4d5e")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def memory_id_for(owner: str, content: str) -> str:
    """Deterministic memory id: UUIDv5 of ``owner`` and ``content``.

    Capturing the same content for the same owner twice yields the same id, which
    makes capture idempotent (the pattern of simonw/llm's ``Collection.embed``).
    """
    return str(uuid.uuid5(_ID_NAMESPACE, f"{owner}\x1f{content}"))


def version_of(memory: Memory) -> str:
    """The memory's version: its ``updated_at`` as hex microseconds since the epoch.

    Every write of a memory moves ``updated_at`` forward (see
    :func:`next_update_time`), so two states of one memory never share a
    version. The HTTP API sends it as the ``ETag`` (quoted) and takes it back
    in ``If-Match``.
    """
    return format((memory.updated_at - _EPOCH) // _MICROSECOND, "x")


def next_update_time(memory: Memory, now: datetime) -> datetime:
    """``now``, or 1 µs after ``memory.updated_at`` when the clock has not moved past it."""
    return max(now, memory.updated_at + _MICROSECOND)


@dataclass(frozen=True, slots=True)
class MemoryInput:
    """One memory to capture. ``content`` must be non-empty after stripping."""

    content: str
    owner: str = SHARED_OWNER
    kind: MemoryKind = "fact"
    tags: tuple[str, ...] = ()
    source: str | None = None
    doc_id: str | None = None
    chunk_index: int | None = None
    parent_id: str | None = None
    event_time: datetime | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Memory:
    """A stored memory (DESIGN §2). ``memory_id`` is a UUID string."""

    memory_id: str
    content: str
    owner: str
    kind: MemoryKind
    tags: tuple[str, ...]
    source: str | None
    doc_id: str | None
    chunk_index: int | None
    parent_id: str | None
    created_at: datetime
    updated_at: datetime
    event_time: datetime | None
    metadata: dict[str, Any]


@dataclass(frozen=True, slots=True)
class MemoryPatch:
    """Fields to change in :meth:`MemoryService.update`; ``None`` leaves a field as it is."""

    content: str | None = None
    tags: tuple[str, ...] | None = None
    kind: MemoryKind | None = None
    source: str | None = None
    event_time: datetime | None = None
    metadata: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class CaptureResult:
    """Outcome of capturing one memory.

    ``status`` is ``"created"`` for a new memory and ``"exists"`` when the same
    owner already had the same content (nothing written). ``near_duplicate_of``
    names the most similar other memory of the same owner when its cosine
    similarity (``near_duplicate_score``, in [0, 1]) reaches the configured
    threshold; the new memory is stored all the same.
    """

    memory: Memory
    status: Literal["created", "exists"]
    near_duplicate_of: str | None = None
    near_duplicate_score: float | None = None


@dataclass(frozen=True, slots=True)
class SearchFilters:
    """Prefilters applied before ranking (all optional, combined with AND).

    ``owner``: the caller; results hold that owner's memories plus shared ones
    (``None``: every owner). ``tags``: a memory matches when it has any of them.
    ``kinds``/``sources``: exact matches. ``since``/``until``: bounds (inclusive)
    on the memory's time, which is ``event_time`` when set, else ``created_at``.
    ``memory_ids``: only these memories (``None``: no such restriction; empty:
    none passes), e.g. a memory's graph neighbourhood (:class:`Near`).
    ``exclude_kinds``: memories of these kinds never pass (searches set it to
    ``summary`` unless ``kinds`` names it). ``doc_ids``: only memories with
    one of these ``doc_id`` values (a document, or a conversation captured
    with its session id as ``doc_id``); ``exclude_doc_ids``: memories with
    one of these never pass (those without a ``doc_id`` do). ``paths``: only
    memories whose virtual path (a document chunk's ``source``, else
    ``memory/<memory_id>.md``; see :func:`path_matches`) matches one of these
    patterns.
    """

    owner: str | None = None
    include_shared: bool = True
    tags: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()
    since: datetime | None = None
    until: datetime | None = None
    memory_ids: tuple[str, ...] | None = None
    exclude_kinds: tuple[str, ...] = ()
    doc_ids: tuple[str, ...] = ()
    exclude_doc_ids: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()

    def admits_owner(self, owner: str) -> bool:
        """True when a memory of ``owner`` is visible under these filters."""
        if self.owner is None:
            return True
        return owner == self.owner or (self.include_shared and owner == SHARED_OWNER)


def path_pattern(pattern: str) -> re.Pattern[str]:
    """A :attr:`SearchFilters.paths` pattern as a regular expression over a whole path.

    ``*`` matches any characters, ``/`` included (``memory/*.md`` matches
    ``memory/2026/03-02.md``); every other character matches itself.
    """
    return re.compile("^" + ".*".join(re.escape(part) for part in pattern.split("*")) + "$")


def path_matches(path: str, patterns: tuple[str, ...]) -> bool:
    """Whether ``path`` matches one of ``patterns`` (see :func:`path_pattern`); True for none."""
    return not patterns or any(path_pattern(p).match(path) for p in patterns)


DocumentStatus = Literal["created", "updated", "unchanged", "deleted"]


@dataclass(frozen=True, slots=True)
class DocumentResult:
    """Outcome of ingesting (or deleting) one document.

    ``path``: the document's path as recorded in its chunks' ``source``.
    ``status``: ``created`` (new document), ``updated`` (its content changed:
    chunks replaced), ``unchanged`` (same content hash; nothing done) or
    ``deleted``. ``chunks``: chunks the document has now (0 once deleted).
    ``added``/``removed``: chunk memories stored and deleted by this call.
    """

    path: str
    owner: str
    doc_id: str
    status: DocumentStatus
    chunks: int
    added: int
    removed: int


@dataclass(frozen=True, slots=True)
class DocumentInfo:
    """A stored document: one per (owner, path).

    ``format``: ``markdown``, ``text`` or ``pdf``. ``content_hash``: SHA-256
    (hex) of the bytes last ingested; ``byte_size`` their length in bytes.
    ``chunk_ids``: its chunk memories in document order (an id appears twice
    when two chunks have the same text).
    """

    path: str
    owner: str
    doc_id: str
    format: str
    content_hash: str
    byte_size: int
    chunk_ids: tuple[str, ...]
    ingested_at: datetime


@dataclass(frozen=True, slots=True)
class MemoryPage:
    """One page of a listing, memories by id.

    ``next_after``: pass it as ``after`` to read the next page (None: this
    was the last one).
    """

    memories: tuple[Memory, ...]
    next_after: str | None


@dataclass(frozen=True, slots=True)
class OwnerCleared:
    """What clearing an owner's knowledge deleted.

    ``memories``: its memories (each with its relations and learned rows, as
    a single delete does). ``documents``: its ingested documents' records.
    ``learned_rows``: what its own questions taught the learned layer
    (retrieval events, cache entries, weights, expansions, anchors).
    """

    owner: str
    memories: int
    documents: int
    learned_rows: int = 0


@dataclass(frozen=True, slots=True)
class OwnerStats:
    """What one owner can see: its memories, the shared ones, its documents.

    ``owner`` None means every owner (then ``memories`` counts all of them and
    ``shared`` the shared ones among them). ``documents``: ingested documents
    the owner sees (its own and shared ones). ``fts_indexed``: whether keyword
    search is available yet.
    """

    owner: str | None
    memories: int
    shared: int
    documents: int
    embedding_model: str
    embedding_dim: int
    fts_indexed: bool


@dataclass(frozen=True, slots=True)
class StoreStats:
    """Counts and configuration of one instance.

    Table health (what slows reads; ``optimize()`` brings the first three
    down): ``fragments`` and ``small_fragments`` of the memory table,
    ``unindexed_rows`` (rows the full-text and scalar indexes lack yet),
    ``versions`` (table versions kept on disk). ``cache_bytes``: what the
    store keeps of its indexes and metadata in memory (part of the server's
    RSS, bounded by ``TRIBAL_INDEX_CACHE_MB`` and a quarter of it).
    """

    memories: int
    owners: dict[str, int]
    kinds: dict[str, int]
    relations: int
    embedding_model: str
    embedding_dim: int
    fts_indexed: bool
    ann_indexed: bool
    table_version: int
    fragments: int = 0
    small_fragments: int = 0
    unindexed_rows: int = 0
    versions: int = 0
    cache_bytes: int = 0


MEMORY_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(Memory))
"""The fields of :class:`Memory`, in order: the one list every representation derives from."""


def memory_to_json(memory: Memory) -> dict[str, Any]:
    """A JSON-able dict of ``memory``, field by field in :data:`MEMORY_FIELDS` order.

    Times are ISO 8601 strings as :meth:`datetime.isoformat` writes them
    (``+00:00``, not msgspec's ``Z``: export files keep their bytes); tags a
    list. See :func:`memory_from_json`.
    """
    data: dict[str, Any] = msgspec.to_builtins(memory, builtin_types=(datetime,))
    return {k: v.isoformat() if isinstance(v, datetime) else v for k, v in data.items()}


def memory_from_json(data: dict[str, Any]) -> Memory:
    """The :class:`Memory` a :func:`memory_to_json` dict describes.

    Raises:
        ValueError: ``data`` is not such a dict (a :class:`msgspec.ValidationError`
            naming the missing or ill-typed field).
    """
    return msgspec.convert(data, Memory)

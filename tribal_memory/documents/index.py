"""The document index: documents kept in sync with their chunk memories.

One ``documents`` row per (owner, path) records the SHA-256 of the bytes last
ingested and the document's chunks in order. Ingesting a document again:

- same hash and chunk settings, every chunk still stored: ``unchanged``,
  nothing is done;
- otherwise the document is chunked again (:func:`parse_document`) and the
  chunks captured; chunks whose text did not change keep their id (ids are
  owner + text), so they keep what the learned layer knows about them, and
  get their new place (index, lines, parent) written in; chunks no longer
  produced are deleted through :meth:`Core.delete_many`, which drops
  their relations, cache entries, feedback weights and anchors. Status
  ``updated`` (``created`` for a document not seen before).

With ``summaries`` on, each section with chunks and the document get a
summary memory, kept in step by :class:`~.summary_sync.SummarySync` (an
unchanged section keeps its summary) and recorded in the row's ``summaries``;
deleting the document deletes them. Parsing and the summaries' texts (LLM
calls included) are made before the index's lock is taken, so a slow PDF or
LLM holds up no other document.

A chunk whose text also occurs in another document of the same owner is one
memory. It stays while any document holds it; its fields describe the
document that stored it first, and move to another holder when that document
drops it. A document's chunks are captured before the old ones are deleted
and before its row changes, so a failure midway leaves a state that the next
ingest of the same document repairs.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import String, cast, or_, select

from tribal_memory.base.db import SharedLock
from tribal_memory.base.errors import Forbidden, InvalidInput, NotFound, TooLarge
from tribal_memory.base.models import (
    SHARED_OWNER,
    DocumentInfo,
    DocumentResult,
    DocumentStatus,
    Memory,
    MemoryInput,
    SearchFilters,
    memory_id_for,
)
from tribal_memory.base.paths import workspace_path
from tribal_memory.base.tables import DocumentRow
from tribal_memory.base.validation import check_owner
from tribal_memory.documents.parsing import (
    DocumentLimits,
    doc_id_for,
    document_format,
    parse_structure,
)
from tribal_memory.documents.summary_sync import SummaryRecord, SummarySync, summary_records
from tribal_memory.store.base import MemoryStore

if TYPE_CHECKING:
    from tribal_memory.core import Core

MAX_PATH_CHARS = 1024
_CAPTURE_BATCH = 64
_LIKE_SLICE = 200
CHUNKER_VERSION = 1
"""Bumped when chunking changes, so that re-ingesting re-chunks unchanged files."""


@dataclass(frozen=True, slots=True)
class Placement:
    """Where a chunk sits in one document: its index is its position in the list."""

    memory_id: str
    parent_id: str | None
    metadata: dict[str, Any]

    @property
    def section(self) -> int | None:
        """Index of the chunk's section in the document (None when not recorded)."""
        value = self.metadata.get("section")
        return value if isinstance(value, int) else None


def _placements(row: DocumentRow) -> list[Placement]:
    return [
        Placement(item["memory_id"], item.get("parent_id"), dict(item.get("metadata") or {}))
        for item in row.chunks or []
    ]


def _info(row: DocumentRow) -> DocumentInfo:
    return DocumentInfo(
        path=row.path,
        owner=row.owner,
        doc_id=row.doc_id,
        format=row.format,
        content_hash=row.content_hash,
        byte_size=row.byte_size,
        chunk_ids=tuple(item["memory_id"] for item in row.chunks or []),
        ingested_at=row.ingested_at.replace(tzinfo=UTC)
        if row.ingested_at.tzinfo is None
        else row.ingested_at,
    )


class DocumentIndex:
    """Ingest, list and delete documents of a :class:`Core`.

    Operations run one at a time per index (one lock); the service's HTTP
    handlers share one index. On PostgreSQL the lock holds across server
    processes sharing the database (:class:`tribal_memory.base.db.SharedLock`).
    """

    def __init__(self, core: Core) -> None:
        self.core = core
        self._db = core.db
        self._store: MemoryStore = core.store
        self._lock = core.db.lock("documents", on_acquire=core.store.refresh)
        self._summaries = SummarySync(core)

    @property
    def writes_lock(self) -> SharedLock:
        """The lock every document write holds; taken before the core's capture lock."""
        return self._lock

    # -- validation -----------------------------------------------------------

    @staticmethod
    def _check_path(path: str) -> str:
        r"""``path`` in the workspace form ``memory_get`` reads documents back by.

        Normalised by :func:`~tribal_memory.base.paths.workspace_path`
        (``/abs/okapi.md`` -> ``abs/okapi.md``, ``C:\x\y.md`` -> ``x/y.md``),
        so that the path an agent is shown in results reads the document back.

        Raises:
            InvalidInput: empty, over ``MAX_PATH_CHARS`` characters, with a NUL,
                or climbing out of the workspace with ``..`` (``../up/zebra.md``).
        """
        path = path.strip()
        if not path:
            raise InvalidInput("path must not be empty")
        if len(path) > MAX_PATH_CHARS or "\x00" in path:
            raise InvalidInput(f"path must be at most {MAX_PATH_CHARS} characters, without NUL")
        normalised = workspace_path(path)
        if normalised is None:
            raise InvalidInput(
                f"path {path!r} climbs out of the document workspace with '..'; "
                "give a path relative to it, e.g. 'docs/notes.md'"
            )
        if not normalised:
            raise InvalidInput(f"path {path!r} names no file")
        return normalised

    # -- ingest -----------------------------------------------------------------

    def ingest(self, path: str, data: bytes, *, owner: str) -> DocumentResult:
        """Create, update or skip the document ``path`` of ``owner`` (see the module docstring).

        Args:
            path: The document's path, normalised (see :meth:`_check_path`) and
                recorded as its chunks' ``source``; its extension picks the
                format (``.md``, ``.markdown``, ``.txt``, ``.pdf``).
            data: The document's bytes (Markdown and text in UTF-8).
            owner: Owner of the document and its chunks.

        Returns:
            What happened: ``created``, ``updated`` or ``unchanged``, with
            chunk counts.

        Raises:
            InvalidInput: empty, over-long or escaping (``..``) path, empty or
                over-long owner, unsupported
                extension, text that is not UTF-8, a PDF that is corrupt,
                encrypted with a password or without text.
            TooLarge: more than ``max_document_bytes`` bytes,
                ``max_document_chars`` characters of text or
                ``max_document_chunks`` chunks, a chunk over ``max_content_chars``
                characters, or a PDF whose text took over ``pdf_timeout_s`` to extract.
            StoreUnavailable / EmbeddingError: storing failed (the row is left
                as it was, so ingesting again retries).
        """
        settings = self.core.settings
        path = self._check_path(path)
        owner = check_owner(owner)
        fmt = document_format(path)
        if len(data) > settings.max_document_bytes:
            raise TooLarge(
                f"{path} has {len(data)} bytes; the limit is {settings.max_document_bytes} "
                "(TRIBAL_MAX_DOCUMENT_BYTES)"
            )
        content_hash = hashlib.sha256(data).hexdigest()
        chunking = f"v{CHUNKER_VERSION}:{settings.chunk_tokens}/{settings.chunk_overlap_tokens}"
        if settings.summaries != "off":
            chunking += f"+{settings.summaries}"  # a change of method re-summarises
        doc_id = doc_id_for(path)
        with self._lock:
            old = self._row(owner, path)
            if self._same(old, content_hash, chunking):
                assert old is not None
                return DocumentResult(path, owner, doc_id, "unchanged", len(old.chunks), 0, 0)
        # Parsed outside the lock, so a slow PDF does not hold up other documents.
        parsed = parse_structure(
            path,
            data,
            owner=owner,
            max_tokens=settings.chunk_tokens,
            overlap_tokens=settings.chunk_overlap_tokens,
            limits=DocumentLimits(
                settings.max_document_chars, settings.max_document_chunks, settings.pdf_timeout_s
            ),
        )
        items = parsed.chunks
        self._check_sizes(path, items)
        prepared = None
        if settings.summaries != "off":
            # Summary texts too (an LLM may take its timeout per call): under the lock
            # they would hold up every other owner's ingest.
            prepared = self._summaries.prepare(
                path=path,
                parsed=parsed,
                chunk_ids=[self._expected_id(item) for item in items],
                old=summary_records(old.summaries) if old is not None else [],
            )
        with self._lock:
            old = self._row(owner, path)  # read again: another ingest may have run meanwhile
            if self._same(old, content_hash, chunking):
                assert old is not None
                return DocumentResult(path, owner, doc_id, "unchanged", len(old.chunks), 0, 0)
            added = self._capture(items)
            placements = [
                Placement(self._expected_id(item), item.parent_id, dict(item.metadata))
                for item in items
            ]
            self._place(owner, path, doc_id, placements)
            old_ids = [p.memory_id for p in _placements(old)] if old is not None else []
            removed = self._drop(owner, path, doc_id, old_ids, {p.memory_id for p in placements})
            old_summaries = summary_records(old.summaries) if old is not None else []
            if settings.summaries == "off":
                summaries: list[SummaryRecord] = []
                self.core.delete_many([r.memory_id for r in old_summaries])
            else:
                summaries = self._summaries.sync(
                    owner=owner,
                    path=path,
                    doc_id=doc_id,
                    parsed=parsed,
                    chunk_ids=[p.memory_id for p in placements],
                    old=old_summaries,
                    prepared=prepared,
                ).records
            self._save(
                owner,
                path,
                doc_id,
                fmt,
                (content_hash, chunking),
                len(data),
                (placements, summaries),
            )
        status: DocumentStatus = "created" if old is None else "updated"
        return DocumentResult(path, owner, doc_id, status, len(placements), added, removed)

    @staticmethod
    def _expected_id(item: MemoryInput) -> str:
        return memory_id_for(item.owner.strip(), item.content.strip())

    def _check_sizes(self, path: str, items: Sequence[MemoryInput]) -> None:
        limit = self.core.settings.max_content_chars
        for item in items:
            if len(item.content) > limit:
                meta = item.metadata
                raise TooLarge(
                    f"{path}: chunk {item.chunk_index} (lines {meta['start_line']}-"
                    f"{meta['end_line']}) has {len(item.content)} characters; the limit is "
                    f"{limit} (TRIBAL_MAX_CONTENT_CHARS)"
                )

    def _capture(self, items: Sequence[MemoryInput]) -> int:
        """Capture in batches; returns how many memories were new."""
        batch = min(_CAPTURE_BATCH, self.core.settings.max_batch_size)
        created = 0
        for offset in range(0, len(items), batch):
            results = self.core.capture_batch(items[offset : offset + batch])
            created += sum(result.status == "created" for result in results)
        return created

    def _place(self, owner: str, path: str, doc_id: str, placements: list[Placement]) -> None:
        """Write each chunk's place in this document into memories this document owns.

        A memory this document owns (its ``doc_id``) takes its first placement
        here; memories another document stored, or captured outside any
        document, are left as they are. Cache entries that snapshot a moved
        chunk are dropped; its weights and anchors stay (same content).
        """
        first: dict[str, tuple[int, Placement]] = {}
        for index, placement in enumerate(placements):
            first.setdefault(placement.memory_id, (index, placement))
        stored = self._store.get(list(first))
        moved = [
            memory.memory_id
            for memory in stored.values()
            if memory.doc_id == doc_id
            and self._move(memory, path, doc_id, *first[memory.memory_id])
        ]
        self.core.forget_cached(moved)

    def _move(
        self, memory: Memory, path: str, doc_id: str, index: int, placement: Placement
    ) -> bool:
        """Give ``memory`` this placement; False when it already has it."""
        wanted = {
            "source": path,
            "doc_id": doc_id,
            "chunk_index": index,
            "parent_id": placement.parent_id,
            "metadata": placement.metadata,
        }
        if all(getattr(memory, name) == value for name, value in wanted.items()):
            return False
        updated = dataclasses.replace(memory, updated_at=datetime.now(UTC), **wanted)  # type: ignore[arg-type]
        self._store.replace(updated, None)
        return True

    def _drop(
        self, owner: str, path: str, doc_id: str, old_ids: Sequence[str], keep: set[str]
    ) -> int:
        """Delete chunks this document no longer holds; hand shared ones to another holder.

        Returns:
            Memories deleted.
        """
        gone = [memory_id for memory_id in dict.fromkeys(old_ids) if memory_id not in keep]
        if not gone:
            return 0
        holders = self._holders(owner, path, gone)
        stored = self._store.get(gone)
        delete: list[str] = []
        moved: list[str] = []
        for memory_id, memory in stored.items():
            if memory.doc_id != doc_id:
                continue  # stored by another document, or outside any document
            if memory_id in holders:
                other, index, placement = holders[memory_id]
                if self._move(memory, other.path, other.doc_id, index, placement):
                    moved.append(memory_id)
            else:
                delete.append(memory_id)
        self.core.forget_cached(moved)
        return self.core.delete_many(delete)

    def _holders(
        self, owner: str, path: str, memory_ids: Sequence[str]
    ) -> dict[str, tuple[DocumentRow, int, Placement]]:
        """For each id another document of ``owner`` holds: that document and the placement."""
        found: dict[str, tuple[DocumentRow, int, Placement]] = {}
        wanted = set(memory_ids)
        with self._db.session() as session:
            for offset in range(0, len(memory_ids), _LIKE_SLICE):
                part = memory_ids[offset : offset + _LIKE_SLICE]
                rows = session.scalars(
                    select(DocumentRow)
                    .where(DocumentRow.owner == owner, DocumentRow.path != path)
                    .where(or_(*(cast(DocumentRow.chunks, String).like(f"%{i}%") for i in part)))
                    .order_by(DocumentRow.path)
                ).all()
                for row in rows:
                    for index, placement in enumerate(_placements(row)):
                        if placement.memory_id in wanted and placement.memory_id not in found:
                            found[placement.memory_id] = (row, index, placement)
        return found

    def _save(
        self,
        owner: str,
        path: str,
        doc_id: str,
        fmt: str,
        versions: tuple[str, str],
        byte_size: int,
        contents: tuple[list[Placement], list[SummaryRecord]],
    ) -> None:
        placements, summaries = contents
        chunks = [dataclasses.asdict(placement) for placement in placements]
        with self._db.session() as session:
            row = session.get(DocumentRow, (owner, path))
            if row is None:
                row = DocumentRow(owner=owner, path=path)
                session.add(row)
            row.doc_id = doc_id
            row.format = fmt
            row.content_hash, row.chunking = versions
            row.byte_size = byte_size
            row.chunks = chunks
            row.summaries = [dataclasses.asdict(record) for record in summaries]
            row.ingested_at = datetime.now(UTC)

    def _row(self, owner: str, path: str) -> DocumentRow | None:
        with self._db.session() as session:
            return session.get(DocumentRow, (owner, path))

    def _same(self, row: DocumentRow | None, content_hash: str, chunking: str) -> bool:
        """True when ``row`` holds these bytes, chunked this way, with every chunk stored."""
        return (
            row is not None
            and (row.content_hash, row.chunking) == (content_hash, chunking)
            and self._complete(row)
        )

    def _complete(self, row: DocumentRow) -> bool:
        """True when every chunk and summary of the document is still stored."""
        ids = list({item["memory_id"] for item in [*(row.chunks or []), *(row.summaries or [])]})
        return len(self._store.get(ids)) == len(ids)

    # -- read and delete ------------------------------------------------------------

    def documents(self, *, owner: str | None = None) -> list[DocumentInfo]:
        """Documents visible to ``owner`` (its own and shared; None: all), by owner and path."""
        query = select(DocumentRow).order_by(DocumentRow.owner, DocumentRow.path)
        if owner is not None:
            query = query.where(DocumentRow.owner.in_({owner.strip(), SHARED_OWNER}))
        with self._db.session() as session:
            return [_info(row) for row in session.scalars(query).all()]

    def placements(self, owner: str, doc_id: str) -> list[Placement] | None:
        """The chunks of ``owner``'s document ``doc_id`` in order; None when not indexed."""
        with self._db.session() as session:
            row = session.scalars(
                select(DocumentRow).where(DocumentRow.owner == owner, DocumentRow.doc_id == doc_id)
            ).first()
            return _placements(row) if row is not None else None

    def delete(
        self, path: str, *, owner: str | None = None, shared_writable: bool = True
    ) -> DocumentResult:
        """Delete a document and the chunks no other document of its owner holds.

        Args:
            path: The document's path as ingested (normalised as on ingest;
                a path stored before ingest normalised paths also matches as given).
            owner: Only this owner's or a shared document (this owner's
                first); None: the one document with that path, of any owner.
            shared_writable: False refuses to delete a ``shared`` document
                (callers without an admin key).

        Returns:
            Status ``deleted`` with the number of chunk memories removed.

        Raises:
            NotFound: no such document visible to ``owner``.
            InvalidInput: an empty or over-long path, or ``owner`` is None and
                several owners have a document at ``path``.
            Forbidden: a shared document and ``shared_writable`` is False.
        """
        given = path.strip()
        if not given or len(given) > MAX_PATH_CHARS:
            raise InvalidInput(f"path must be 1 to {MAX_PATH_CHARS} characters")
        # The normalised path first, then the path as given: a document ingested
        # before paths were normalised (``/abs/okapi.md``) can still be deleted.
        candidates = dict.fromkeys([workspace_path(given) or given, given])
        with self._lock:
            row = self._first_found(list(candidates), owner)
            if row.owner == SHARED_OWNER and not shared_writable:
                raise Forbidden("deleting a shared document needs an admin key")
            ids = [p.memory_id for p in _placements(row)]
            removed = self._drop(row.owner, row.path, row.doc_id, ids, set())
            self.core.delete_many([r.memory_id for r in summary_records(row.summaries)])
            with self._db.session() as session:
                stored = session.get(DocumentRow, (row.owner, row.path))
                if stored is not None:
                    session.delete(stored)
        return DocumentResult(row.path, row.owner, row.doc_id, "deleted", 0, 0, removed)

    def forget_owner(self, owner: str) -> int:
        """Delete the records of every document of ``owner`` (not its chunks); returns how many."""
        with self._lock, self._db.session() as session:
            rows = session.scalars(select(DocumentRow).where(DocumentRow.owner == owner)).all()
            for row in rows:
                session.delete(row)
            return len(rows)

    def _first_found(self, paths: Sequence[str], owner: str | None) -> DocumentRow:
        """The document of the first of ``paths`` that names one (see :meth:`_find`)."""
        for path in paths[:-1]:
            try:
                return self._find(path, owner)
            except NotFound:
                continue
        return self._find(paths[-1], owner)

    def _find(self, path: str, owner: str | None) -> DocumentRow:
        with self._db.session() as session:
            rows = session.scalars(select(DocumentRow).where(DocumentRow.path == path)).all()
        visible = [row for row in rows if SearchFilters(owner=owner).admits_owner(row.owner)]
        if owner is not None:
            visible.sort(key=lambda row: row.owner != owner.strip())  # the owner's own first
        elif len(visible) > 1:
            owners = ", ".join(row.owner for row in visible)
            raise InvalidInput(f"several owners ({owners}) have a document {path}; name the owner")
        if not visible:
            raise NotFound(f"no document {path}")
        return visible[0]

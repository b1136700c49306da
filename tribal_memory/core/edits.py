"""Edits of a memory: what a patch changes, and the checks that keep ids meaning their content.

A memory's id is UUIDv5 of its owner and content (capture's id), and an edit
of the content moves the memory to its new id (:meth:`.Core.update`), so an
id always stands for one owner's text.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

from tribal_memory.base.config import Settings
from tribal_memory.base.db import Database
from tribal_memory.base.errors import Conflict
from tribal_memory.base.models import Memory, MemoryPatch, memory_id_for, next_update_time
from tribal_memory.base.tables import DocumentRow
from tribal_memory.base.validation import (
    check_content,
    check_kind,
    check_metadata,
    check_source,
    check_tags,
    check_time,
)
from tribal_memory.embeddings.base import Embedder, Vector


def patched(
    current: Memory, patch: MemoryPatch, settings: Settings, embedder: Embedder
) -> tuple[Memory, Vector | None]:
    """``current`` with ``patch`` applied, and the new content's vector (None: unchanged).

    New content gets the id capture gives it (UUIDv5 of owner and content) and
    is embedded; ``updated_at`` moves past the stored one.

    Raises:
        InvalidInput / TooLarge: a field fails capture's checks.
        EmbeddingError: the new content cannot be embedded.
    """
    changes: dict[str, object] = {"updated_at": next_update_time(current, datetime.now(UTC))}
    vector = None
    if patch.content is not None:
        content = check_content(patch.content, settings.max_content_chars)
        if content != current.content:
            changes["content"] = content
            changes["memory_id"] = memory_id_for(current.owner, content)
            vector = embedder.embed(content)
    if patch.tags is not None:
        changes["tags"] = check_tags(patch.tags, settings.max_tags)
    if patch.kind is not None:
        check_kind(patch.kind)
        changes["kind"] = patch.kind
    if patch.source is not None:
        changes["source"] = check_source(patch.source)
    if patch.event_time is not None:
        changes["event_time"] = check_time(patch.event_time, "event_time")
    if patch.metadata is not None:
        changes["metadata"] = check_metadata(patch.metadata, settings.max_metadata_bytes)
    return dataclasses.replace(current, **changes), vector  # type: ignore[arg-type]


def check_not_in_document(db: Database, memory: Memory) -> None:
    """Refuse new content for a chunk or summary of an ingested document.

    The document's record lists its memories by id, and new content moves a
    memory to a new id: such a memory changes when its document is ingested again.

    Raises:
        Conflict: ``memory`` belongs to an ingested document.
    """
    if memory.source is None:
        return
    with db.session() as session:
        document = session.get(DocumentRow, (memory.owner, memory.source))
        if document is None:
            return
        ids = {item["memory_id"] for item in [*document.chunks, *document.summaries]}
    if memory.memory_id in ids:
        raise Conflict(
            f"memory {memory.memory_id} is part of the document {memory.source!r}: "
            "change the document and ingest it again"
        )


def same_capture(stored: Memory, captured: Memory) -> Memory:
    """``stored``, the memory a capture found under its id, once checked it holds that capture.

    Ids are UUIDv5 of owner and content and updates re-key, so an id names
    one owner's content; a row that does not (left by a store written
    before updates re-keyed) must not answer for another text or owner.

    Raises:
        Conflict: the stored memory has another owner or content.
    """
    if stored.owner != captured.owner or stored.content != captured.content:
        raise Conflict(
            f"memory {stored.memory_id} holds other content than its id stands for "
            "(changed before updates re-keyed): run 'tribal-memory check --repair', "
            "then capture again"
        )
    return stored


def refiled(memory: Memory) -> Memory | None:
    """``memory`` under capture's id of its owner and content; None when it already is."""
    own = memory_id_for(memory.owner, memory.content)
    return None if own == memory.memory_id else dataclasses.replace(memory, memory_id=own)

"""Builders of stored :class:`~tribal_memory.base.models.Memory` values for tests.

``Memory`` has thirteen fields and no defaults (a stored memory has every
one); a test names only the fields it is about and takes the rest from here.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from tribal_memory.base.models import Memory, MemoryKind


def stored_memory(
    memory_id: str,
    content: str,
    *,
    owner: str = "o",
    kind: MemoryKind = "fact",
    tags: tuple[str, ...] = (),
    source: str | None = None,
    doc_id: str | None = None,
    chunk_index: int | None = None,
    parent_id: str | None = None,
    created_at: datetime | None = None,
    updated_at: datetime | None = None,
    event_time: datetime | None = None,
    metadata: dict[str, Any] | None = None,
) -> Memory:
    """A memory as a store holds it, with ``memory_id`` and ``content`` as given.

    Args:
        memory_id: Any string (the store does not check it is a UUID).
        content: The memory's text.
        owner: Its owner; ``"o"`` unless given.
        kind: ``"fact"`` unless given.
        tags: No tags unless given.
        source: Document path or origin; none unless given.
        doc_id: Document or session id; none unless given.
        chunk_index: Position in its document (0-based); none unless given.
        parent_id: The heading chunk above it; none unless given.
        created_at: Timezone-aware; the time of the call unless given.
        updated_at: Timezone-aware; ``created_at`` unless given.
        event_time: When the fact happened; none unless given.
        metadata: A new empty dict unless given.

    Returns:
        The frozen ``Memory``; nothing is validated or stored.
    """
    created = datetime.now(UTC) if created_at is None else created_at
    return Memory(
        memory_id=memory_id,
        content=content,
        owner=owner,
        kind=kind,
        tags=tags,
        source=source,
        doc_id=doc_id,
        chunk_index=chunk_index,
        parent_id=parent_id,
        created_at=created,
        updated_at=created if updated_at is None else updated_at,
        event_time=event_time,
        metadata={} if metadata is None else metadata,
    )

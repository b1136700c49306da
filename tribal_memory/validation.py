"""Checks of what callers send: owners, content, tags, kinds, k, new memories.

Each check returns the cleaned value (stripped, deduplicated) or raises
:class:`~tribal_memory.errors.InvalidInput` (HTTP 400) or
:class:`~tribal_memory.errors.TooLarge` (HTTP 413) with a message naming the
limit.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from tribal_memory.errors import InvalidInput, TooLarge
from tribal_memory.models import MEMORY_KINDS, Memory, MemoryInput, memory_id_for

MAX_OWNER_CHARS = 128
MAX_TAG_CHARS = 64


def check_owner(owner: str) -> str:
    """``owner`` stripped. Raises InvalidInput: empty or over ``MAX_OWNER_CHARS``."""
    owner = owner.strip()
    if not owner:
        raise InvalidInput("owner must not be empty")
    if len(owner) > MAX_OWNER_CHARS:
        raise InvalidInput(f"owner is longer than {MAX_OWNER_CHARS} characters")
    return owner


def check_content(content: str, max_chars: int) -> str:
    """``content`` stripped.

    Raises:
        InvalidInput: empty content. TooLarge: over ``max_chars`` characters.
    """
    content = content.strip()
    if not content:
        raise InvalidInput("content must not be empty")
    if len(content) > max_chars:
        raise TooLarge(
            f"content has {len(content)} characters; the limit is "
            f"{max_chars} (TRIBAL_MAX_CONTENT_CHARS)"
        )
    return content


def check_tags(tags: Sequence[str]) -> tuple[str, ...]:
    """Tags stripped, repeats dropped (first kept). Raises InvalidInput: an empty or long tag."""
    cleaned = tuple(dict.fromkeys(t.strip() for t in tags))
    for tag in cleaned:
        if not tag or len(tag) > MAX_TAG_CHARS:
            raise InvalidInput(f"tags must be 1 to {MAX_TAG_CHARS} characters: {tag!r}")
    return cleaned


def check_kind(kind: str) -> None:
    """Raises InvalidInput when ``kind`` is not one of ``MEMORY_KINDS``."""
    if kind not in MEMORY_KINDS:
        raise InvalidInput(f"kind must be one of {', '.join(MEMORY_KINDS)}, not {kind!r}")


def check_k(k: int, max_k: int) -> None:
    """Raises InvalidInput when ``k`` < 1, TooLarge when it is over ``max_k``."""
    if k < 1:
        raise InvalidInput("k must be at least 1")
    if k > max_k:
        raise TooLarge(f"k={k} is over the limit of {max_k} (TRIBAL_MAX_K)")


def validated_memory(item: MemoryInput, now: datetime, *, max_content_chars: int) -> Memory:
    """The memory ``item`` describes, checked, with its deterministic id and times ``now``.

    Raises:
        InvalidInput / TooLarge: as the checks above.
    """
    owner = check_owner(item.owner)
    content = check_content(item.content, max_content_chars)
    check_kind(item.kind)
    return Memory(
        memory_id=memory_id_for(owner, content),
        content=content,
        owner=owner,
        kind=item.kind,
        tags=check_tags(item.tags),
        source=item.source,
        doc_id=item.doc_id,
        chunk_index=item.chunk_index,
        parent_id=item.parent_id,
        created_at=now,
        updated_at=now,
        event_time=item.event_time.astimezone(UTC) if item.event_time else None,
        anchor_text="",
        metadata=dict(item.metadata),
    )

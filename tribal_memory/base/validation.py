"""Checks of what callers send: owners, content, tags, kinds, k, new memories.

Each check returns the cleaned value (stripped, deduplicated) or raises
:class:`~tribal_memory.base.errors.InvalidInput` (HTTP 400) or
:class:`~tribal_memory.base.errors.TooLarge` (HTTP 413) with a message naming the
limit.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from tribal_memory.base.errors import InvalidInput, TooLarge
from tribal_memory.base.models import MEMORY_KINDS, Memory, MemoryInput, memory_id_for

MAX_OWNER_CHARS = 128
MAX_TAG_CHARS = 64


def check_owner(owner: str) -> str:
    """``owner`` stripped.

    Raises:
        InvalidInput: empty, over ``MAX_OWNER_CHARS``, or starting with ``*``
            (reserved for the learned layer's scopes, e.g. ``*team*``).
    """
    owner = owner.strip()
    if not owner:
        raise InvalidInput("owner must not be empty")
    if owner.startswith("*"):
        raise InvalidInput("owner must not start with '*' (reserved)")
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


def check_tags(tags: Sequence[str], max_tags: int) -> tuple[str, ...]:
    """Tags stripped, repeats dropped (first kept).

    Raises:
        InvalidInput: an empty or long tag. TooLarge: more than ``max_tags`` tags.
    """
    if len(tags) > max_tags:
        raise TooLarge(f"{len(tags)} tags; the limit is {max_tags} (TRIBAL_MAX_TAGS)")
    cleaned = tuple(dict.fromkeys(t.strip() for t in tags))
    for tag in cleaned:
        if not tag or len(tag) > MAX_TAG_CHARS:
            raise InvalidInput(f"tags must be 1 to {MAX_TAG_CHARS} characters: {tag!r}")
    return cleaned


def check_metadata(metadata: Mapping[str, Any], max_bytes: int) -> dict[str, Any]:
    """``metadata`` as a plain dict, at most ``max_bytes`` bytes as compact JSON (UTF-8).

    Raises:
        InvalidInput: not JSON-serialisable, or nested too deeply to serialise.
        TooLarge: over ``max_bytes`` bytes.
    """
    try:
        size = len(json.dumps(metadata, separators=(",", ":")).encode("utf-8"))
    except (TypeError, ValueError, RecursionError) as exc:
        raise InvalidInput(f"metadata is not a JSON object this server can store: {exc}") from exc
    if size > max_bytes:
        raise TooLarge(
            f"metadata has {size} bytes as JSON; the limit is {max_bytes} "
            "(TRIBAL_MAX_METADATA_BYTES)"
        )
    return dict(metadata)


def check_time(value: datetime | None, name: str) -> datetime | None:
    """``value`` in UTC (None stays None); a naive time is taken as UTC.

    Raises:
        InvalidInput: the time falls outside years 1-9999 once in UTC.
    """
    if value is None:
        return None
    try:
        return value.astimezone(UTC) if value.tzinfo is not None else value.replace(tzinfo=UTC)
    except (OverflowError, ValueError) as exc:
        raise InvalidInput(f"{name} is out of range once converted to UTC: {value}") from exc


MAX_SESSION_ID_CHARS = 128


def check_session_id(session_id: str | None) -> str | None:
    """``session_id`` stripped (None stays None).

    Raises:
        InvalidInput: empty after stripping, or over ``MAX_SESSION_ID_CHARS`` characters.
    """
    if session_id is None:
        return None
    cleaned = session_id.strip()
    if not cleaned or len(cleaned) > MAX_SESSION_ID_CHARS:
        raise InvalidInput(f"session_id must be 1 to {MAX_SESSION_ID_CHARS} characters")
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


def validated_memory(
    item: MemoryInput,
    now: datetime,
    *,
    max_content_chars: int,
    max_tags: int,
    max_metadata_bytes: int,
) -> Memory:
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
        tags=check_tags(item.tags, max_tags),
        source=item.source,
        doc_id=item.doc_id,
        chunk_index=item.chunk_index,
        parent_id=item.parent_id,
        created_at=now,
        updated_at=now,
        event_time=check_time(item.event_time, "event_time"),
        metadata=check_metadata(item.metadata, max_metadata_bytes),
    )

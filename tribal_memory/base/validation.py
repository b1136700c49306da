"""Checks of what callers send: owners, content, tags, kinds, k, new memories.

Each check returns the cleaned value (stripped, deduplicated) or raises
:class:`~tribal_memory.base.errors.InvalidInput` (HTTP 400) or
:class:`~tribal_memory.base.errors.TooLarge` (HTTP 413) with a message naming the
limit.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from tribal_memory.base.errors import InvalidInput, TooLarge
from tribal_memory.base.models import MEMORY_KINDS, Memory, MemoryInput, memory_id_for

MAX_OWNER_CHARS = 128
MAX_TAG_CHARS = 64
MAX_SOURCE_CHARS = 1024
"""Longest ``source`` (a path or URI) of a memory."""
MAX_REF_CHARS = 256
"""Longest ``doc_id`` or ``parent_id`` of a memory."""

# Bounds on the lists of one request body, checked while it is decoded (before
# any work): a filter list of a million values cost 79 s and 5 GB before them.
MAX_FILTER_VALUES = 256
"""Most values in one filter list (tags, kinds, sources, relation types, blocked names)."""
MAX_IDS = 1_000
"""Most memory ids or paths in one request (feedback's used ids, a document's chunks)."""
MAX_BATCH_ITEMS = 10_000
"""Most items in one batch body (captures, relations); the settings' own limits are lower."""
MAX_VECTOR_DIM = 4_096
"""Most numbers in a query vector (the model's dimension is checked after decoding)."""


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


def has_control(text: str) -> bool:
    """True when ``text`` holds a control character (newlines and tabs included).

    Control characters are Unicode category Cc plus the line and paragraph
    separators U+2028 and U+2029, which also break a line where text is shown.
    """
    return any(unicodedata.category(c) == "Cc" or c in "\u2028\u2029" for c in text)


def check_label(value: str, name: str, max_chars: int) -> str:
    """A one-line label (a tag, source, document or parent id) stripped.

    Labels are shown inside prompts and headers, so a newline or other control
    character in one could end the block it is shown in.

    Raises:
        InvalidInput: empty, over ``max_chars`` characters, or holding a
            control character (the message names ``name``).
    """
    cleaned = value.strip()
    if not cleaned or len(cleaned) > max_chars:
        raise InvalidInput(f"{name} must be 1 to {max_chars} characters: {_short(value)}")
    if has_control(cleaned):
        raise InvalidInput(f"{name} must not hold newlines or control characters: {_short(value)}")
    return cleaned


def _short(value: str) -> str:
    return repr(value if len(value) <= 80 else value[:80] + "...")


def check_tags(tags: Sequence[str], max_tags: int) -> tuple[str, ...]:
    """Tags stripped, repeats dropped (first kept).

    Raises:
        InvalidInput: an empty or long tag, or one with a control character.
        TooLarge: more than ``max_tags`` tags.
    """
    if len(tags) > max_tags:
        raise TooLarge(f"{len(tags)} tags; the limit is {max_tags} (TRIBAL_MAX_TAGS)")
    return tuple(dict.fromkeys(check_label(t, "tag", MAX_TAG_CHARS) for t in tags))


def check_source(source: str | None) -> str | None:
    """``source`` (a path or URI) as :func:`check_label` leaves it; None stays None."""
    return None if source is None else check_label(source, "source", MAX_SOURCE_CHARS)


def check_ref(value: str | None, name: str) -> str | None:
    """A ``doc_id`` or ``parent_id`` as :func:`check_label` leaves it; None stays None."""
    return None if value is None else check_label(value, name, MAX_REF_CHARS)


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
        source=check_source(item.source),
        doc_id=check_ref(item.doc_id, "doc_id"),
        chunk_index=item.chunk_index,
        parent_id=check_ref(item.parent_id, "parent_id"),
        created_at=now,
        updated_at=now,
        event_time=check_time(item.event_time, "event_time"),
        metadata=check_metadata(item.metadata, max_metadata_bytes),
    )

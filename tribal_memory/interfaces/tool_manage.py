"""``memory_list``, ``memory_update`` and ``memory_delete``: an agent corrects its own memory.

They act on the caller's own memories only, named by their virtual path
``memory/<memory_id>.md`` (captured facts and conversation turns). Shared
memories and ingested documents are not changed here: a shared memory of
another agent answers ``not_found`` like an unknown one, and a document path
is refused (edit the file and ingest it again). Deleting or updating a
memory invalidates what the learned layer holds about it, in the same call.

Shapes: ``memory_list {tag?, limit=20, after?}`` → ``{memories: [{path,
memoryId, text, tags, createdAt, updatedAt}], nextAfter}``;
``memory_update {path, content?, tags?}`` → ``{status: "updated", path,
memoryId}`` (the id and path stay; new text is embedded again);
``memory_delete {path}`` → ``{status: "deleted", path, memoryId}``; an unknown
path ``{status: "not_found", path}``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from tribal_memory.base.errors import InvalidInput, NotFound
from tribal_memory.base.models import Memory, MemoryPatch, SearchFilters
from tribal_memory.interfaces.tool_args import (
    MemoryDeleteIn,
    MemoryListIn,
    MemoryUpdateIn,
    count,
    parse,
)
from tribal_memory.interfaces.tool_paths import memory_path, normalize_path
from tribal_memory.service.memory_service import MemoryService

MANAGE_TOOL_NAMES: tuple[str, ...] = ("memory_list", "memory_update", "memory_delete")
"""The tools of this module (HTTP ``/v1/tools/<name>``, MCP and the OpenClaw plugin)."""
LIST_DEFAULT = 20
"""Memories per ``memory_list`` page when the call gives no ``limit``."""
LIST_TEXT_CHARS = 300
"""Most characters of each memory's text ``memory_list`` shows."""

_MEMORY_PATH = re.compile(r"^memory/([0-9a-fA-F-]{36})\.md$")


def _owner_required(owner: str | None) -> str:
    if owner is None:
        raise InvalidInput("memory_list, memory_update and memory_delete act for an agent: "
                           "send X-Agent-Id (the MCP server: --agent)")  # fmt: skip
    return owner


def _memory_id(path: str) -> str:
    """The id in a ``memory/<id>.md`` path.

    Raises:
        InvalidInput: the path names a document or nothing a tool may change.
    """
    normal = normalize_path(path)
    match = _MEMORY_PATH.match(normal or "")
    if match is None:
        raise InvalidInput(
            f"{path!r} is not a memory path (memory/<id>.md): documents change by editing "
            "the file and ingesting it again"
        )
    return match.group(1).lower()


def _own(service: MemoryService, memory_id: str, agent: str) -> bool:
    """Whether ``memory_id`` is ``agent``'s own memory (a shared one is not)."""
    try:
        return service.get(memory_id, owner=agent).owner == agent
    except NotFound:
        return False


def _listed(memory: Memory) -> dict[str, Any]:
    return {
        "path": memory_path(memory),
        "memoryId": memory.memory_id,
        "text": memory.content[:LIST_TEXT_CHARS],
        "tags": list(memory.tags),
        "createdAt": memory.created_at.isoformat(),
        "updatedAt": memory.updated_at.isoformat(),
    }


def memory_list(service: MemoryService, args: MemoryListIn, *, owner: str | None) -> dict[str, Any]:
    """A page of the caller's own facts and conversation turns (not document chunks).

    Raises:
        InvalidInput: no agent, a bad ``limit`` or ``after``. TooLarge: ``limit`` over ``max_k``.
    """
    agent = _owner_required(owner)
    filters = SearchFilters(
        owner=agent,
        include_shared=False,
        kinds=("fact",),
        tags=(args.tag,) if args.tag else (),
    )
    page = service.list_page(filters, limit=count(args.limit, LIST_DEFAULT), after=args.after)
    return {"memories": [_listed(m) for m in page.memories], "nextAfter": page.next_after}


def memory_update(
    service: MemoryService, args: MemoryUpdateIn, *, owner: str | None
) -> dict[str, Any]:
    """Replace the text and/or tags of one of the caller's memories.

    Raises:
        InvalidInput: no agent, not a memory path, nothing to change, empty content.
        TooLarge: content over ``max_content_chars``.
    """
    agent = _owner_required(owner)
    memory_id = _memory_id(args.path)
    if args.content is None and args.tags is None:
        raise InvalidInput("give content or tags to change")
    patch = MemoryPatch(content=args.content, tags=None if args.tags is None else tuple(args.tags))
    if not _own(service, memory_id, agent):
        return {"status": "not_found", "path": args.path}
    updated = service.update(memory_id, patch, owner=agent)
    return {"status": "updated", "path": memory_path(updated), "memoryId": updated.memory_id}


def memory_delete(
    service: MemoryService, args: MemoryDeleteIn, *, owner: str | None
) -> dict[str, Any]:
    """Delete one of the caller's memories (and what was learned about it).

    Raises:
        InvalidInput: no agent, or not a memory path.
    """
    agent = _owner_required(owner)
    memory_id = _memory_id(args.path)
    if not _own(service, memory_id, agent):
        return {"status": "not_found", "path": args.path}
    service.delete(memory_id, owner=agent)
    return {"status": "deleted", "path": f"memory/{memory_id}.md", "memoryId": memory_id}


def call_tool(
    service: MemoryService,
    name: str,
    arguments: Mapping[str, Any] | None,
    *,
    owner: str | None,
) -> dict[str, Any]:
    """Run the tool ``name`` (one of :data:`MANAGE_TOOL_NAMES`) on raw arguments, for ``owner``.

    Raises:
        InvalidInput: an unknown tool or bad arguments; otherwise what the tool raises.
    """
    if name == "memory_list":
        return memory_list(service, parse(MemoryListIn, arguments), owner=owner)
    if name == "memory_update":
        return memory_update(service, parse(MemoryUpdateIn, arguments), owner=owner)
    if name == "memory_delete":
        return memory_delete(service, parse(MemoryDeleteIn, arguments), owner=owner)
    raise InvalidInput(f"unknown tool {name!r}; known: {', '.join(MANAGE_TOOL_NAMES)}")

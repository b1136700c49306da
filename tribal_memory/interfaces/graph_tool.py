"""The ``memory_graph`` agent tool (MCP, ``POST /v1/tools/memory_graph``): graph queries.

``memory_graph {operation, ids, steps?, types?, block?, query?, maxResults?}``
(:class:`~tribal_memory.interfaces.tool_args.MemoryGraphIn`; numbers may
arrive as floats; unknown fields are ignored):

- ``operation: "neighbors"`` — memories within ``steps`` hops of ``ids[0]``
  → ``{operation, memories: [{memoryId, path, snippet, owner, kind, steps,
  via}]}``, nearest first; ``steps`` is the hop count, ``via`` the type of
  the relation that reached it.
- ``operation: "intersection"`` — memories within ``steps`` hops of every
  one of ``ids`` (2 to 16; not themselves) → ``{operation, memories: [{...,
  steps}]}`` with ``steps`` the hop counts from each id, in their order,
  closest first.
- ``operation: "search"`` — hybrid search for ``query`` over the
  neighbourhood of ``ids[0]`` (it and what is within ``steps`` hops) →
  ``{operation, memories: [{..., score}]}``, best first, ``score`` in [0, 1].

``steps``: 1 to 5 (default 1). ``types``: follow only relations of these
types. ``block``: never pass through relations of these types or memories of
these kinds. ``maxResults``: most memories (default 10, capped at
``max_k``). ``path`` is the memory's virtual path (``memory_get`` reads it);
``snippet`` its text cut to 700 characters. The caller sees the graph as
``neighbors`` does: another owner's memory is never listed, counted or
walked through.
"""

from __future__ import annotations

from typing import Any

from tribal_memory.base.errors import InvalidInput
from tribal_memory.base.graph import Near, Traversal
from tribal_memory.base.models import Memory, SearchFilters
from tribal_memory.interfaces.tool_args import MemoryGraphIn, count
from tribal_memory.interfaces.tool_paths import memory_path
from tribal_memory.interfaces.tools import SNIPPET_MAX_CHARS
from tribal_memory.service.memory_service import MemoryService

DEFAULT_MAX_RESULTS = 10


def _memory(memory: Memory, **extra: Any) -> dict[str, Any]:
    return {
        "memoryId": memory.memory_id,
        "path": memory_path(memory),
        "snippet": memory.content[:SNIPPET_MAX_CHARS],
        "owner": memory.owner,
        "kind": memory.kind,
        **extra,
    }


def memory_graph(
    service: MemoryService, args: MemoryGraphIn, *, owner: str | None
) -> dict[str, Any]:
    """Run one graph query for ``owner`` (see the module docstring for the shapes).

    Args:
        service: The open service.
        args: The tool call's arguments (parse raw ones with
            :func:`tribal_memory.interfaces.tool_args.parse`).
        owner: The caller: its memories plus shared ones (None: every owner).

    Returns:
        ``{operation, memories}``; an empty list when nothing is found.

    Raises:
        InvalidInput: a missing ``query`` for search, too few or too many
            ``ids`` for intersection, bad ``types``/``block``.
        NotFound: an id that does not exist or is not visible to ``owner``.
        TooLarge: a query over ``max_content_chars``.
    """
    operation, ids = args.operation, args.ids
    steps = count(args.steps, 1)
    types, block = args.types or [], args.block or []
    limit = min(count(args.maxResults, DEFAULT_MAX_RESULTS), service.settings.max_k)
    if operation == "neighbors":
        found = service.neighbors(ids[0], steps=steps, owner=owner, types=types, block=block)
        memories = [_memory(n.memory, steps=n.steps, via=n.via.type) for n in found[:limit]]
    elif operation == "intersection":
        common = service.intersection(
            ids, steps=steps, owner=owner, types=types, block=block, limit=limit
        )
        memories = [_memory(c.memory, steps=list(c.steps)) for c in common]
    else:
        query = args.query
        if query is None:
            raise InvalidInput("search needs a query (a string)")
        near = Near(ids[0], Traversal(steps, tuple(types), tuple(block)))
        result = service.search(query, k=limit, filters=SearchFilters(owner=owner), near=near)
        memories = [_memory(h.memory, score=round(h.score, 4)) for h in result.hits]
    return {"operation": operation, "memories": memories}

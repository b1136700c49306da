"""Knowledge context for prompt injection: hits as a ``<knowledge-graph>`` block.

The block follows the one the OpenClaw "learning-rag" plugin prepends to an
agent's prompt, so a hook written for it can take ours::

    <knowledge-graph>
    Relevant knowledge from memory:

    - [decision] We chose PostgreSQL for billing (82% match, owner: alice)
    - [document] docs/deploy.md › Deploy > Rollback (61% match, owner: shared)

    Related notes (graph neighbors):
    - [fact] Billing runs nightly at 02:00 (owner: alice)
    </knowledge-graph>

A hit's **label** is its first tag, else its kind (``fact``; a document
chunk is ``document``). Its **title** is the first non-blank line of its
text, whitespace collapsed, cut to :data:`TITLE_CHARS`; for a document chunk
it is the document's path and the chunk's heading path (``path › heading``),
or the path and first line when the chunk has no heading. Labels, titles
and owners are written with ``&``, ``<`` and ``>`` as HTML entities, so no
memory can close the block or open a tag in the prompt. ``NN%`` is the
hit's fused score times 100, rounded. **Neighbours** are memories one
relation away from a hit (either direction), the chunks before and after
a document-chunk hit in the same document of the same owner, then memories
sharing a tag with a hit (most shared tags first, then the most recently
updated; ``via`` is ``tag:<name>``), all visible to the caller, hits
themselves excluded, at most :data:`MAX_NEIGHBORS`.

The block is cut to a token budget, counted with the tokenizer packaged for
the embedding model (WordPiece; close to, and usually a little above, what
LLM tokenizers count for English): neighbour lines go first, then the
lowest-ranked hits; a single hit over the budget has its title shortened.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from tribal_memory.base.errors import InvalidInput
from tribal_memory.base.models import Memory, SearchFilters, path_matches
from tribal_memory.base.results import Hit
from tribal_memory.documents.tokens import count_tokens
from tribal_memory.interfaces.tool_args import Scope, scope_filters
from tribal_memory.interfaces.tool_paths import line_span, memory_path
from tribal_memory.retrieval.calibration import DEFAULT_MIN_SCORE
from tribal_memory.service.memory_service import MemoryService

BLOCK_TAG = "knowledge-graph"
OPEN_TAG = f"<{BLOCK_TAG}>"
CLOSE_TAG = f"</{BLOCK_TAG}>"
HEADER = "Relevant knowledge from memory:"
NEIGHBORS_HEADER = "Related notes (graph neighbors):"
MIN_PROMPT_CHARS = 5
"""Prompts shorter than this (after stripping) get no context."""
MAX_QUERY_CHARS = 2000
"""Only the start of a long prompt is searched (the embedding model reads ~256 tokens)."""
TITLE_CHARS = 100
"""Longest title, in characters."""
MAX_NEIGHBORS = 5
"""Most neighbour lines in a block."""
_DOCUMENT_SCAN_LIMIT = 10_000
_TAG_SCAN_LIMIT = 500
_SPACE = re.compile(r"\s+")

SkipReason = str
"""Why no block was made: ``prompt_too_short``, ``already_injected``, ``no_match``
or ``budget_too_small``."""


@dataclass(frozen=True, slots=True)
class ContextItem:
    """One line of the block: a hit (``score`` in [0, 1]) or a neighbour (``score`` None).

    ``via`` names how a neighbour was reached: a relation type, or
    ``same_document``; None for hits.
    """

    memory: Memory
    label: str
    title: str
    path: str
    start_line: int
    end_line: int
    score: float | None = None
    via: str | None = None


@dataclass(frozen=True, slots=True)
class KnowledgeContext:
    """A built block and what went into it.

    ``context`` is the block (``""`` when skipped; ``skipped_reason`` says
    why). ``retrieval_id`` names the logged search for usage feedback (None
    when the prompt was skipped before searching). ``hits`` and
    ``neighbors`` are the items shown in the block, in order; ``tokens`` is
    the block's size in tokens (0 when empty).
    """

    context: str
    skipped_reason: SkipReason | None
    retrieval_id: str | None
    hits: tuple[ContextItem, ...]
    neighbors: tuple[ContextItem, ...]
    tokens: int


def item_json(item: ContextItem) -> dict[str, Any]:
    """A JSON-able dict of a block item (the memory flattened to its id and owner)."""
    return {
        "memory_id": item.memory.memory_id,
        "label": item.label,
        "title": item.title,
        "owner": item.memory.owner,
        "path": item.path,
        "start_line": item.start_line,
        "end_line": item.end_line,
        "score": item.score,
        "via": item.via,
    }


def context_json(built: KnowledgeContext) -> dict[str, Any]:
    """A JSON-able dict of a built block: the body of ``POST /v1/context``."""
    return {
        "context": built.context,
        "skipped_reason": built.skipped_reason,
        "retrieval_id": built.retrieval_id,
        "hits": [item_json(item) for item in built.hits],
        "neighbors": [item_json(item) for item in built.neighbors],
        "tokens": built.tokens,
    }


def _shorten(text: str, limit: int) -> str:
    text = _SPACE.sub(" ", text).strip()
    return text if len(text) <= limit else text[: max(0, limit - 1)].rstrip() + "…"


def _first_line(content: str) -> str:
    return next((line for line in content.split("\n") if line.strip()), content)


def label_of(memory: Memory) -> str:
    """The block label: the first tag, else the kind (a chunk is ``document``)."""
    if memory.tags:
        return memory.tags[0]
    return "document" if memory.kind == "chunk" else memory.kind


def title_of(memory: Memory) -> str:
    """The block title (see the module docstring), at most :data:`TITLE_CHARS` long."""
    path = memory_path(memory)
    if memory.kind == "chunk" and memory.source and path == memory.source:
        heading = memory.metadata.get("heading")
        if isinstance(heading, str) and heading.strip():
            return _shorten(f"{path} › {heading}", TITLE_CHARS)
        return _shorten(f"{path}: {_first_line(memory.content)}", TITLE_CHARS)
    return _shorten(_first_line(memory.content), TITLE_CHARS)


def _item(memory: Memory, score: float | None = None, via: str | None = None) -> ContextItem:
    start, end = line_span(memory)
    return ContextItem(
        memory, label_of(memory), title_of(memory), memory_path(memory), start, end, score, via
    )


def escape(text: str) -> str:
    """``text`` safe inside the block: one line, with ``&``, ``<`` and ``>`` as HTML entities.

    A memory's text cannot close the block (``</knowledge-graph>``) or open
    a tag of its own, and a label cannot start a new line of the prompt.
    """
    one_line = _SPACE.sub(" ", text).strip()
    return one_line.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _hit_line(item: ContextItem) -> str:
    pct = round((item.score or 0.0) * 100)
    label, title, owner = escape(item.label), escape(item.title), escape(item.memory.owner)
    return f"- [{label}] {title} ({pct}% match, owner: {owner})"


def _neighbor_line(item: ContextItem) -> str:
    label, title, owner = escape(item.label), escape(item.title), escape(item.memory.owner)
    return f"- [{label}] {title} (owner: {owner})"


def render(hits: Sequence[ContextItem], neighbors: Sequence[ContextItem]) -> str:
    """The block for these items (``""`` when there are no hits)."""
    if not hits:
        return ""
    lines = [OPEN_TAG, HEADER, "", *(_hit_line(h) for h in hits)]
    if neighbors:
        lines += ["", NEIGHBORS_HEADER, *(_neighbor_line(n) for n in neighbors)]
    lines.append(CLOSE_TAG)
    return "\n".join(lines)


def within(memory: Memory, filters: SearchFilters) -> bool:
    """Whether ``memory`` passes the conversation and path parts of ``filters``."""
    if filters.doc_ids and memory.doc_id not in filters.doc_ids:
        return False
    if memory.doc_id is not None and memory.doc_id in filters.exclude_doc_ids:
        return False
    return path_matches(memory_path(memory), filters.paths)


def neighbors_of(
    service: MemoryService,
    hits: Sequence[Memory],
    owner: str | None,
    filters: SearchFilters | None = None,
) -> list[ContextItem]:
    """Neighbours of the hits (relations, adjacent chunks, shared tags), without the hits.

    ``filters``: only neighbours passing its conversation and path parts
    (:func:`within`; None: any the owner sees).

    Returns at most :data:`MAX_NEIGHBORS` items, in hit order.
    """
    scope = filters if filters is not None else SearchFilters(owner=owner)
    seen = {m.memory_id for m in hits}
    found: list[ContextItem] = []

    def offer(memory: Memory, via: str) -> None:
        if not within(memory, scope):
            return
        if memory.memory_id not in seen and len(found) < MAX_NEIGHBORS:
            seen.add(memory.memory_id)
            found.append(_item(memory, via=via))

    for memory in hits:
        for neighbor in service.neighbors(memory.memory_id, steps=1, owner=owner):
            offer(neighbor.memory, neighbor.via.type)
    for memory in hits:
        for chunk in _adjacent_chunks(service, memory, owner):
            offer(chunk, "same_document")
    for memory in hits:
        if len(found) == MAX_NEIGHBORS:
            break
        for tagged, tag in _sharing_tags(service, memory, scope):
            offer(tagged, f"tag:{tag}")
    return found


def _sharing_tags(
    service: MemoryService, memory: Memory, filters: SearchFilters
) -> list[tuple[Memory, str]]:
    """Visible memories sharing a tag with ``memory``, with the first tag they share.

    Ordered by the number of shared tags, then the most recently updated
    first (ties: memory id); among at most ``_TAG_SCAN_LIMIT`` candidates.
    """
    if not memory.tags:
        return []
    others = [
        m
        for m in service.list_memories(replace(filters, tags=memory.tags), limit=_TAG_SCAN_LIMIT)
        if m.memory_id != memory.memory_id
    ]

    def shared(other: Memory) -> list[str]:
        return [t for t in memory.tags if t in other.tags]

    others.sort(key=lambda m: m.memory_id)
    others.sort(key=lambda m: (len(shared(m)), m.updated_at), reverse=True)
    return [(m, shared(m)[0]) for m in others]


def _adjacent_chunks(service: MemoryService, memory: Memory, owner: str | None) -> list[Memory]:
    """The chunks just before and after a document chunk, same document and owner."""
    if memory.kind != "chunk" or not memory.source or memory.chunk_index is None:
        return []
    filters = SearchFilters(owner=owner, kinds=("chunk",), sources=(memory.source,))
    wanted = (memory.chunk_index - 1, memory.chunk_index + 1)
    chunks = [
        c
        for c in service.list_memories(filters, limit=_DOCUMENT_SCAN_LIMIT)
        if c.owner == memory.owner and c.doc_id == memory.doc_id and c.chunk_index in wanted
    ]
    return sorted(chunks, key=lambda c: c.chunk_index or 0)


def _fit(
    hits: list[ContextItem], neighbors: list[ContextItem], max_tokens: int
) -> tuple[str, list[ContextItem], list[ContextItem]]:
    """The largest block within ``max_tokens``: neighbours dropped first, then the last hits."""
    while True:
        block = render(hits, neighbors)
        if count_tokens(block) <= max_tokens:
            return block, hits, neighbors
        if neighbors:
            neighbors = neighbors[:-1]
        elif len(hits) > 1:
            hits = hits[:-1]
        else:
            break
    # One hit over the budget: the longest title prefix that fits (binary search).
    item = hits[0]
    low, high, best = 0, len(item.title), ""
    best_title = ""
    while low <= high:
        middle = (low + high) // 2
        title = _shorten(item.title, middle) if middle else "…"
        block = render([replace(item, title=title)], [])
        if count_tokens(block) <= max_tokens:
            best, best_title, low = block, title, middle + 1
        else:
            high = middle - 1
    return best, ([replace(item, title=best_title)] if best else []), []


def build_context(
    service: MemoryService,
    prompt: str,
    *,
    owner: str | None,
    top_k: int = 3,
    min_score: float = DEFAULT_MIN_SCORE,
    include_neighbors: bool = True,
    max_tokens: int | None = None,
    learner: str | None = None,
    scope: Scope | None = None,
    conversation_id: str | None = None,
    paths: Sequence[str] | None = None,
) -> KnowledgeContext:
    """The ``<knowledge-graph>`` block for ``prompt``, searched as ``owner``.

    Prompts shorter than :data:`MIN_PROMPT_CHARS` and prompts already holding a
    block are skipped without a search. Otherwise the first
    :data:`MAX_QUERY_CHARS` of the prompt go through
    :meth:`MemoryService.recall_with_feedback` (hybrid, the owner's learned
    variant), so the answer carries a ``retrieval_id`` for usage feedback.

    Args:
        service: The memory service searched.
        prompt: The agent's prompt (the question to find context for).
        owner: The agent: its memories plus shared ones (None: every owner).
        learner: Whose learned data the search uses and feeds (None: ``owner``).
        top_k: Most hits, at least 1.
        min_score: Least calibrated score of a hit, in [0, 1].
        include_neighbors: Add the "Related notes (graph neighbors)" section.
        max_tokens: Token budget of the block (None: the ``context_max_tokens`` setting).
        scope: ``session``, ``long-term`` or ``all`` (None: all), by
            ``conversation_id``, as for ``memory_search``
            (:func:`~tribal_memory.interfaces.tool_args.scope_filters`).
        conversation_id: The current conversation (its turns' ``doc_id``).
        paths: Only memories whose path matches one of these patterns
            (hits and neighbours; ``SearchFilters.paths``).

    Raises:
        InvalidInput: top_k < 1, min_score outside [0, 1], max_tokens < 1,
            scope ``session`` without a ``conversation_id``.
        TooLarge: top_k over ``max_k``.
        StoreUnavailable / EmbeddingError: the search failed.
    """
    budget = service.settings.context_max_tokens if max_tokens is None else max_tokens
    if budget < 1:
        raise InvalidInput("max_tokens must be at least 1")
    if not 0.0 <= min_score <= 1.0:
        raise InvalidInput("min_score must be between 0 and 1")
    filters = scope_filters(owner, scope, conversation_id, list(paths or ()))
    if len(prompt.strip()) < MIN_PROMPT_CHARS:
        return KnowledgeContext("", "prompt_too_short", None, (), (), 0)
    if OPEN_TAG in prompt:
        return KnowledgeContext("", "already_injected", None, (), (), 0)
    result = service.recall_with_feedback(
        prompt.strip()[:MAX_QUERY_CHARS],
        k=top_k,
        filters=filters,
        mode="hybrid",
        min_score=min_score,
        learner=learner,
    )
    if not result.hits:
        return KnowledgeContext("", "no_match", result.retrieval_id, (), (), 0)
    hits = [_item(hit.memory, score=float(hit.score)) for hit in result.hits]
    neighbors = (
        neighbors_of(service, _memories(result.hits), owner, filters) if include_neighbors else []
    )
    block, shown_hits, shown_neighbors = _fit(hits, neighbors, budget)
    if not block:
        return KnowledgeContext("", "budget_too_small", result.retrieval_id, (), (), 0)
    return KnowledgeContext(
        block,
        None,
        result.retrieval_id,
        tuple(shown_hits),
        tuple(shown_neighbors),
        count_tokens(block),
    )


def _memories(hits: Sequence[Hit]) -> list[Memory]:
    return [hit.memory for hit in hits]

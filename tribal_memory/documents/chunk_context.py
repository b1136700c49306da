"""Reading context for document chunk hits: the heading chunk above and the chunks around.

For each hit that is a document chunk (it has a ``doc_id``), :func:`chunk_context`
returns the memory its ``parent_id`` names and the chunks right before and
after it in the same document and section. Neighbours come from the document
index (:class:`~tribal_memory.documents.index.DocumentIndex`); a chunk captured
outside it (with a ``doc_id`` but no indexed document) gets its parent only.
Every context memory belongs to the hit's own owner and passes the search's
owner filter, so context never shows another owner's chunks. The hits and
their ranking are not touched.
"""

from __future__ import annotations

from collections.abc import Sequence

from tribal_memory.base.models import Memory, SearchFilters
from tribal_memory.base.results import ChunkContext, Hit
from tribal_memory.documents.index import DocumentIndex, Placement
from tribal_memory.store.base import MemoryStore


def _neighbours(
    memory: Memory, placements: list[Placement] | None
) -> tuple[str | None, str | None, str | None]:
    """``(parent, previous, next)`` ids of ``memory`` in its document."""
    if not placements:
        return memory.parent_id, None, None
    index = memory.chunk_index
    if index is None or not (
        0 <= index < len(placements) and placements[index].memory_id == memory.memory_id
    ):
        index = next((n for n, p in enumerate(placements) if p.memory_id == memory.memory_id), None)
    if index is None:
        return memory.parent_id, None, None
    here = placements[index]

    def sibling(at: int) -> str | None:
        if 0 <= at < len(placements) and placements[at].section == here.section:
            other = placements[at].memory_id
            return other if other != memory.memory_id else None
        return None

    return here.parent_id, sibling(index - 1), sibling(index + 1)


def chunk_context(
    hits: Sequence[Hit],
    *,
    store: MemoryStore,
    documents: DocumentIndex,
    filters: SearchFilters,
) -> tuple[ChunkContext, ...]:
    """Parent and sibling chunks of each chunk hit, in hit order.

    Args:
        hits: Ranked hits of a search.
        store: Where the context memories are read from.
        documents: The document index (chunk order and sections).
        filters: The search's filters; only their owner rule applies.

    Returns:
        One :class:`ChunkContext` per hit with a ``doc_id`` that has at least
        one of parent, previous or next; () when none has.
    """
    wanted: list[tuple[Memory, tuple[str | None, str | None, str | None]]] = []
    indexes: dict[tuple[str, str], list[Placement] | None] = {}
    for hit in hits:
        memory = hit.memory
        if memory.doc_id is None:
            continue
        key = (memory.owner, memory.doc_id)
        if key not in indexes:
            indexes[key] = documents.placements(*key)
        wanted.append((memory, _neighbours(memory, indexes[key])))
    ids = {memory_id for _, trio in wanted for memory_id in trio if memory_id is not None}
    found = store.get(list(ids))

    def visible(memory_id: str | None, owner: str) -> Memory | None:
        other = found.get(memory_id) if memory_id is not None else None
        if other is None or other.owner != owner or not filters.admits_owner(other.owner):
            return None
        return other

    entries: list[ChunkContext] = []
    for memory, (parent, previous, following) in wanted:
        entry = ChunkContext(
            memory_id=memory.memory_id,
            parent=visible(parent, memory.owner),
            previous=visible(previous, memory.owner),
            next=visible(following, memory.owner),
        )
        if (entry.parent, entry.previous, entry.next) != (None, None, None):
            entries.append(entry)
    return tuple(entries)

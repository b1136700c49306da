"""Request and response bodies of knowledge management: listing, clearing, search by vector."""

from __future__ import annotations

from typing import Annotated

import msgspec

from tribal_memory.base.validation import MAX_VECTOR_DIM
from tribal_memory.interfaces.api.schemas import MemoryOut, SearchScope


class MemoryPageOut(msgspec.Struct):
    """One page of memories, by id (empty: none, or past the end).

    ``next_after``: pass it as ``after`` to read the next page; null on the last.
    """

    memories: list[MemoryOut]
    next_after: str | None


class OwnerClearedOut(msgspec.Struct):
    """What clearing an owner deleted.

    Its memories (with their relations and learned rows), its documents'
    records, and ``learned_rows``: what its own questions taught the learned
    layer (retrieval events, cache entries, weights, expansions, anchors).
    """

    owner: str
    memories: int
    documents: int
    learned_rows: int


class VectorSearchRequest(SearchScope):
    """A raw embedding vector plus the prefilters of ``POST /v1/search``.

    ``vector``: as many numbers as the instance's embedding dimension
    (``embedding_dim`` in ``GET /v1/stats``), from the same model; it need
    not be unit length. The filters, ``near``/``steps``/``types``/``block``,
    ``k`` and ``min_score`` mean what they mean for search.
    """

    vector: Annotated[list[float], msgspec.Meta(max_length=MAX_VECTOR_DIM)]

"""Request and response bodies of knowledge management: listing, clearing, search by vector."""

from __future__ import annotations

import msgspec

from tribal_memory.api.schemas import AwareDatetime, MemoryOut, Score, _Request, near_of
from tribal_memory.models import MemoryKind, Near, SearchFilters


class MemoryPageOut(msgspec.Struct):
    """One page of memories, by id (empty: none, or past the end).

    ``next_after``: pass it as ``after`` to read the next page; null on the last.
    """

    memories: list[MemoryOut]
    next_after: str | None


class OwnerClearedOut(msgspec.Struct):
    """What clearing an owner deleted.

    Its memories (with their relations and learned rows) and its documents' records.
    """

    owner: str
    memories: int
    documents: int


class VectorSearchRequest(_Request):
    """A raw embedding vector plus the prefilters of ``POST /v1/search``.

    ``vector``: as many numbers as the instance's embedding dimension
    (``embedding_dim`` in ``GET /v1/stats``), from the same model; it need
    not be unit length. The filters, ``near``/``steps``/``types``/``block``,
    ``k`` and ``min_score`` mean what they mean for search.
    """

    vector: list[float]
    k: int = 10
    owner: str | None = None
    include_shared: bool = True
    tags: list[str] = msgspec.field(default_factory=list)
    kinds: list[MemoryKind] = msgspec.field(default_factory=list)
    sources: list[str] = msgspec.field(default_factory=list)
    since: AwareDatetime | None = None
    until: AwareDatetime | None = None
    min_score: Score = 0.0
    near: str | None = None
    steps: int | None = None
    types: list[str] | None = None
    block: list[str] | None = None

    def to_filters(self) -> SearchFilters:
        """The core :class:`SearchFilters` for this request."""
        return SearchFilters(
            owner=self.owner,
            include_shared=self.include_shared,
            tags=tuple(self.tags),
            kinds=tuple(self.kinds),
            sources=tuple(self.sources),
            since=self.since,
            until=self.until,
        )

    def near_filter(self) -> Near | None:
        """The core :class:`Near` of this body's ``near`` fields (see :func:`near_of`).

        Raises:
            InvalidInput: ``steps``, ``types`` or ``block`` given without ``near``.
        """
        return near_of(self.near, self.steps, self.types, self.block)

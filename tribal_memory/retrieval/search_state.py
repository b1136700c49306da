"""The state of one search as it passes the pipeline's stages (:mod:`.pipeline`).

The request first, then what each stage found: the scope's change counters
and past queries, the query vector (and what the vector index is searched
with), the started searches, the learned signals and the pool's row ids.
"""

from __future__ import annotations

import dataclasses
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Literal

from tribal_memory.base.models import SearchFilters
from tribal_memory.base.results import LearnedParts, SearchMode
from tribal_memory.embeddings.base import Vector
from tribal_memory.learned.anchors import AnchorMatch
from tribal_memory.learned.query_cache import PastQueries, PastQuery, cache_key
from tribal_memory.retrieval import signals as sig
from tribal_memory.store.base import RowRef, ScoredMemory


@dataclass(slots=True)
class SearchState:
    """One search as it passes the stages: the request, then what each stage found."""

    query: str
    k: int
    filters: SearchFilters
    mode: SearchMode
    min_score: float
    parts: LearnedParts
    scope: str
    started: float
    expand_graph: bool = False
    key: str = ""
    filter_key: str = ""
    """Fingerprint of the filters beyond owner and shared (:func:`filter_key`; "": none)."""
    pool: int = 0
    # 1. state
    past: PastQueries | None = None
    team_past: PastQueries | None = None
    cache_generation: int | None = None
    anchors_generation: int | None = None
    team_generation: int | None = None
    adapter_generation: int = 0
    # 3. start
    anchored: list[AnchorMatch] = field(default_factory=list)
    vector: Vector | None = None
    search_vector: Vector | None = None
    """What the vector index is searched with: ``vector``, or its adapted map."""
    passing: int | None = None
    fallback: Literal["vector"] | None = None
    text_search: Future[list[ScoredMemory]] | None = None
    # 4. semantic cache
    similar: list[PastQuery] = field(default_factory=list)
    team_similar: list[PastQuery] = field(default_factory=list)
    # 5. signals
    vector_search: Future[list[ScoredMemory]] | None = None
    expanding: list[sig.VariantSearch] = field(default_factory=list)
    expansion: sig.Expansion = field(default_factory=dict)
    priors: list[tuple[str, int | None]] = field(default_factory=list)
    """``(owner, cache generation)`` whose usage priors count (read in stage 7)."""
    # 6. fusion
    pool_refs: dict[RowRef, str] = field(default_factory=dict)
    """Row reference -> memory id of the pool's memories (read when variants found any)."""

    @property
    def has_past(self) -> bool:
        """Whether the scope has past queries with feedback."""
        return self.past is not None and bool(self.past.keys)

    @property
    def cache_key(self) -> str:
        """The cache entry that may answer this search (its query under its filters)."""
        return cache_key(self.key, self.filter_key)

    @property
    def plain_filters(self) -> bool:
        """Whether the filters are owner/shared only (a cached answer may serve them)."""
        f = dataclasses.replace(self.filters, exclude_kinds=(), exclude_doc_ids=())
        return f == SearchFilters(owner=f.owner, include_shared=f.include_shared)

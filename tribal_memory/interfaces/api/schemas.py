"""Request and response bodies of the HTTP API (msgspec Structs): the shared parts.

Here: what every body builds on (the request base, the annotated types, the
error body) and the bodies of memories and retrieval, which the others
reuse. The other resources have theirs beside their controllers:
``learned_schemas``, ``relation_schemas``, ``graph_schemas``,
``knowledge_schemas``, ``document_schemas``, ``stats_schemas``,
``transfer_schemas`` and ``tool_schemas``.

Request structs reject unknown fields, so a misspelt filter is a 400 rather
than a silently ignored option. Times are RFC 3339 strings with a timezone on
the way in and UTC (``...Z``) on the way out. Every score is in [0, 1], higher
is better.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

import msgspec

from tribal_memory.base.errors import InvalidInput
from tribal_memory.base.graph import Near, Traversal
from tribal_memory.base.models import MemoryInput, MemoryKind, MemoryPatch, SearchFilters
from tribal_memory.base.results import LearnedParts, SearchMode, Variant
from tribal_memory.base.validation import (
    MAX_BATCH_ITEMS,
    MAX_FILTER_VALUES,
    MAX_IDS,
    MAX_REF_CHARS,
    MAX_SOURCE_CHARS,
)

AwareDatetime = Annotated[datetime, msgspec.Meta(tz=True)]
"""A datetime that must carry a timezone (naive times are ambiguous)."""
Score = Annotated[float, msgspec.Meta(ge=0.0, le=1.0)]
ChunkIndex = Annotated[int, msgspec.Meta(ge=0, le=2**31 - 1)]
"""Position of a chunk in its document; stored as a 32-bit integer."""
Source = Annotated[str, msgspec.Meta(max_length=MAX_SOURCE_CHARS)]
"""A memory's source (path or URI), or one value of a filter list."""
Ref = Annotated[str, msgspec.Meta(max_length=MAX_REF_CHARS)]
"""A memory's ``doc_id`` or ``parent_id``."""
FilterValues = Annotated[list[Source], msgspec.Meta(max_length=MAX_FILTER_VALUES)]
"""A filter list (tags, sources, relation types, blocked names): at most 256 values."""
Kinds = Annotated[list[MemoryKind], msgspec.Meta(max_length=MAX_FILTER_VALUES)]
Ids = Annotated[list[Source], msgspec.Meta(max_length=MAX_IDS)]
"""Memory ids or paths named in one request: at most 1,000."""


class _Request(msgspec.Struct, forbid_unknown_fields=True):
    """Base of request bodies: unknown fields are an error."""


def near_of(
    near: str | None, steps: int | None, types: list[str] | None, block: list[str] | None
) -> Near | None:
    """The core :class:`Near` of a body's ``near``, ``steps``, ``types`` and ``block``.

    Returns:
        None without ``near``; else the neighbourhood of ``near`` within
        ``steps`` hops (default 1).

    Raises:
        InvalidInput: ``steps``, ``types`` or ``block`` given without ``near``.
    """
    if near is None:
        if steps is not None or types is not None or block is not None:
            raise InvalidInput("steps, types and block need near (the memory to search around)")
        return None
    return Near(
        near, Traversal(1 if steps is None else steps, tuple(types or ()), tuple(block or ()))
    )


# -- errors ---------------------------------------------------------------------


class ErrorOut(msgspec.Struct):
    """Every error response: a stable ``error`` code, a human ``detail`` and the HTTP ``status``."""

    error: str
    detail: str
    status: int


# -- memories -------------------------------------------------------------------


class CaptureRequest(_Request):
    """One memory to capture. ``content`` must be non-empty after stripping.

    ``owner``: who the memory belongs to; omitted, the API key's owner
    (``shared`` when authentication is off).
    """

    content: str
    owner: str | None = None
    kind: MemoryKind = "fact"
    tags: Ids = msgspec.field(default_factory=list)
    source: Source | None = None
    doc_id: Ref | None = None
    chunk_index: ChunkIndex | None = None
    parent_id: Ref | None = None
    event_time: AwareDatetime | None = None
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)

    def to_input(self, owner: str) -> MemoryInput:
        """The core :class:`MemoryInput` for this request, owned by ``owner``."""
        return msgspec.convert({**msgspec.structs.asdict(self), "owner": owner}, MemoryInput)


class BatchCaptureRequest(_Request):
    """Memories to capture in one write (all or nothing)."""

    memories: Annotated[list[CaptureRequest], msgspec.Meta(max_length=MAX_BATCH_ITEMS)]
    near_duplicates: bool = True
    """Report near-duplicates of stored memories (one vector search per new
    memory); false skips that search, e.g. for bulk loads. Repeats of the same
    content are still reported as ``exists``."""


class PatchRequest(_Request):
    """Fields to change; an absent (or null) field is left as it is."""

    content: str | None = None
    tags: Ids | None = None
    kind: MemoryKind | None = None
    source: Source | None = None
    event_time: AwareDatetime | None = None
    metadata: dict[str, Any] | None = None

    def to_patch(self) -> MemoryPatch:
        """The core :class:`MemoryPatch` for this request."""
        return msgspec.convert(self, MemoryPatch, from_attributes=True)


class MemoryOut(msgspec.Struct):
    """A stored memory.

    The wire shape of :class:`~tribal_memory.base.models.Memory`: the same
    fields in the same order (a test holds them equal), filled by
    :func:`~tribal_memory.interfaces.api.convert.memory_out`.
    """

    memory_id: str
    content: str
    owner: str
    kind: str
    tags: list[str]
    source: str | None
    doc_id: str | None
    chunk_index: int | None
    parent_id: str | None
    created_at: datetime
    updated_at: datetime
    event_time: datetime | None
    metadata: dict[str, Any]


class CaptureOut(msgspec.Struct):
    """Outcome of one capture.

    ``status``: ``created`` (new) or ``exists`` (same owner and content already
    stored; nothing written). ``near_duplicate_of``/``near_duplicate_score``
    name the most similar other memory of the owner when their cosine
    similarity (in [0, 1]) reached the near-duplicate threshold, else null.
    """

    memory: MemoryOut
    status: Literal["created", "exists"]
    near_duplicate_of: str | None
    near_duplicate_score: float | None


class BatchCaptureOut(msgspec.Struct):
    """One result per captured memory, in request order."""

    results: list[CaptureOut]


# -- retrieval ------------------------------------------------------------------


class SearchScope(_Request, kw_only=True):
    """What every search body shares: ``k``, prefilters, ``min_score``, ``near``.

    The fields mean what :class:`RecallRequest` says.
    """

    k: int = 10
    owner: str | None = None
    include_shared: bool = True
    tags: FilterValues = msgspec.field(default_factory=list)
    kinds: Kinds = msgspec.field(default_factory=list)
    sources: FilterValues = msgspec.field(default_factory=list)
    since: AwareDatetime | None = None
    until: AwareDatetime | None = None
    min_score: Score = 0.0
    near: str | None = None
    steps: int | None = None
    types: FilterValues | None = None
    block: FilterValues | None = None

    def near_filter(self) -> Near | None:
        """The core :class:`Near` of this body's ``near`` fields (see :func:`near_of`).

        Raises:
            InvalidInput: ``steps``, ``types`` or ``block`` given without ``near``.
        """
        return near_of(self.near, self.steps, self.types, self.block)

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


class RecallRequest(SearchScope):
    """A query plus prefilters (combined with AND).

    ``owner``: the caller; results hold its memories plus shared ones (unless
    ``include_shared`` is false); null searches every owner. ``tags``: any of
    them. ``kinds``/``sources``: exact matches. ``since``/``until``: inclusive
    bounds on ``event_time`` (or ``created_at`` when it has none). Hits scoring
    under ``min_score`` are dropped.

    ``context``: also return, apart from the hits, the parent heading chunk
    and the previous/next chunks of each document chunk hit.

    ``feedback``: log the retrieval so usage feedback can name it (the
    response carries its ``retrieval_id``). ``learned``: the learned parts to
    use, from ``cache``, ``expansion``, ``feedback``, ``anchors``, ``adapter`` (``[]``: plain
    search, the baseline); null uses the owner's A/B variant. ``session_id``
    (with ``feedback``): the agent task this retrieval belongs to; feedback on
    any retrieval of the session may name memories another of them returned.

    ``near``: search only the graph neighbourhood of this memory id: it and
    the memories within ``steps`` hops (1 to 5, default 1) over relations
    (either direction), following only ``types`` (default: every relation
    type) and never passing through ``block`` (relation types not followed,
    memory kinds neither returned nor walked through). Memories the caller
    may not see are never part of it, nor walked through. The neighbourhood
    is a prefilter on memory ids; ranking is otherwise the same.
    """

    query: str
    feedback: bool = False
    learned: FilterValues | None = None
    context: bool = False
    session_id: str | None = None

    def learned_parts(self) -> LearnedParts | None:
        """The core :class:`LearnedParts` named by ``learned`` (None: the owner's variant).

        Raises:
            InvalidInput: an unknown part name.
        """
        if self.learned is None:
            return None
        try:
            return LearnedParts.only(*self.learned)
        except ValueError as exc:
            raise InvalidInput(str(exc)) from exc


class SearchRequest(RecallRequest):
    """A recall request plus the ranking ``mode``.

    ``hybrid`` (vector + BM25, the default), ``vector``, ``text`` (BM25),
    ``hybrid_expanded`` (hybrid, then each candidate lifted by 0.1 x its best
    related candidate: relations, heading parent, same section), ``summary``
    (hybrid over section and document summaries only), ``title`` (sections whose
    titles match the query: their summaries and best chunks) or ``automatic``
    (one of these chosen from the query; the answer's ``mode`` and
    ``mode_reason`` say which and why). Summaries are left out of the other
    modes unless ``kinds`` names ``summary``.
    """

    mode: SearchMode = "hybrid"


class HitOut(MemoryOut):
    """One ranked memory: its fields (:class:`MemoryOut`), then how it ranked.

    ``score``: calibrated relevance in [0, 1], the estimated probability
    that the memory answers the question, on the same scale for every query
    (``tribal_memory.retrieval.calibration``; ``min_score`` compares with it).
    ``rank_score``: the relative score that ranked the hit (fusion, neighbour
    smoothing and learned gains; null where it is ``score``); hits come in its
    order, which ``score`` need not follow. ``cosine``: raw cosine similarity
    of memory and query in [-1, 1] (null when not a vector candidate).
    ``vector_score``: in
    hybrid search the cosine min-max normalised over the vector candidates, in
    ``vector`` mode the cosine clipped to [0, 1] (null when not a vector
    candidate). ``text_score``: in hybrid search BM25 min-max normalised over
    the BM25 candidates, in ``text`` mode BM25 over the query's best (null when
    not a BM25 candidate or BM25 did not run). All in [0, 1], higher is better;
    ``rank`` is 1-based.

    What the learned layer did (neutral on plain search): ``cached``: served
    from the query cache. ``expanded_from``: the query variant whose BM25
    match raised the hit (null: the query itself). ``boost``: score added by
    feedback (similar past queries and usage priors), in
    [-(max_penalty + skip_prior_weight), max_boost].
    ``anchor_match``: match of the query against the memory's anchors, in
    [0, 1] (null: no anchor matched).
    """

    score: float
    vector_score: float | None
    text_score: float | None
    rank: int
    rank_score: float | None
    cosine: float | None
    cached: bool
    expanded_from: str | None
    boost: float
    anchor_match: float | None


class ChunkContextOut(msgspec.Struct):
    """Surroundings of the chunk hit ``memory_id``, each null when there is none.

    ``parent``: the memory its ``parent_id`` names (the chunk opening its
    section, or for a section's first chunk the one opening the enclosing
    section). ``previous``/``next``: the chunks around it in the same document
    and section. Only memories of the hit's owner visible to the search appear.
    """

    memory_id: str
    parent: MemoryOut | None
    previous: MemoryOut | None
    next: MemoryOut | None


class SearchOut(msgspec.Struct):
    """Hits in rank order (empty: nothing matched) and how they were found.

    ``fallback`` is ``"vector"`` when a hybrid search ran on embeddings alone
    (too few memories for BM25), else null. ``took_ms``: server time in
    milliseconds. ``variant``: ``learned`` when learned parts ranked the hits,
    else ``baseline``. ``cached``: the query cache answered. ``retrieval_id``:
    the logged retrieval to send feedback for (null unless ``feedback`` was asked).
    ``context``: with ``"context": true``, one entry per document chunk hit
    that has a parent or neighbour, in hit order (empty otherwise).
    ``mode``: the mode that ran; ``mode_reason``: why, when it is not simply
    the one asked for (``automatic``'s rule; a ``title`` search that matched
    no title ran hybrid), else null. ``cosine_range``: the lowest and highest
    cosine similarity among the vector candidates (null: no vector search ran,
    or a cached answer); a highest far below the usual says that nothing
    stored is close to the question.
    """

    hits: list[HitOut]
    mode: SearchMode
    fallback: Literal["vector"] | None
    took_ms: float
    variant: Variant
    cached: bool
    retrieval_id: str | None
    context: list[ChunkContextOut] = msgspec.field(default_factory=list)
    mode_reason: str | None = None
    cosine_range: tuple[float, float] | None = None

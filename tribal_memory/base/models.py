"""Frozen dataclasses passed between layers.

LanceDB rows and ORM objects never leave their modules; every layer speaks in
these types. Times are timezone-aware UTC ``datetime`` objects.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any, Literal

import msgspec

SHARED_OWNER = "shared"
"""Owner whose memories every owner can see."""

MemoryKind = Literal["fact", "chunk", "document"]
MEMORY_KINDS: tuple[str, ...] = ("fact", "chunk", "document")

_ID_NAMESPACE = uuid.UUID("6f1c1a56-9a53-4b8e-9a0c-7d1e2b3c4d5e")


def memory_id_for(owner: str, content: str) -> str:
    """Deterministic memory id: UUIDv5 of ``owner`` and ``content``.

    Capturing the same content for the same owner twice yields the same id, which
    makes capture idempotent (the pattern of simonw/llm's ``Collection.embed``).
    """
    return str(uuid.uuid5(_ID_NAMESPACE, f"{owner}\x1f{content}"))


@dataclass(frozen=True, slots=True)
class MemoryInput:
    """One memory to capture. ``content`` must be non-empty after stripping."""

    content: str
    owner: str = SHARED_OWNER
    kind: MemoryKind = "fact"
    tags: tuple[str, ...] = ()
    source: str | None = None
    doc_id: str | None = None
    chunk_index: int | None = None
    parent_id: str | None = None
    event_time: datetime | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Memory:
    """A stored memory (DESIGN §2). ``memory_id`` is a UUID string."""

    memory_id: str
    content: str
    owner: str
    kind: MemoryKind
    tags: tuple[str, ...]
    source: str | None
    doc_id: str | None
    chunk_index: int | None
    parent_id: str | None
    created_at: datetime
    updated_at: datetime
    event_time: datetime | None
    metadata: dict[str, Any]


@dataclass(frozen=True, slots=True)
class MemoryPatch:
    """Fields to change in :meth:`MemoryService.update`; ``None`` leaves a field as it is."""

    content: str | None = None
    tags: tuple[str, ...] | None = None
    kind: MemoryKind | None = None
    source: str | None = None
    event_time: datetime | None = None
    metadata: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class CaptureResult:
    """Outcome of capturing one memory.

    ``status`` is ``"created"`` for a new memory and ``"exists"`` when the same
    owner already had the same content (nothing written). ``near_duplicate_of``
    names the most similar other memory of the same owner when its cosine
    similarity (``near_duplicate_score``, in [0, 1]) reaches the configured
    threshold; the new memory is stored all the same.
    """

    memory: Memory
    status: Literal["created", "exists"]
    near_duplicate_of: str | None = None
    near_duplicate_score: float | None = None


@dataclass(frozen=True, slots=True)
class SearchFilters:
    """Prefilters applied before ranking (all optional, combined with AND).

    ``owner``: the caller; results hold that owner's memories plus shared ones
    (``None``: every owner). ``tags``: a memory matches when it has any of them.
    ``kinds``/``sources``: exact matches. ``since``/``until``: bounds (inclusive)
    on the memory's time, which is ``event_time`` when set, else ``created_at``.
    ``memory_ids``: only these memories (``None``: no such restriction; empty:
    none passes), e.g. a memory's graph neighbourhood (:class:`Near`).
    """

    owner: str | None = None
    include_shared: bool = True
    tags: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()
    since: datetime | None = None
    until: datetime | None = None
    memory_ids: tuple[str, ...] | None = None

    def admits_owner(self, owner: str) -> bool:
        """True when a memory of ``owner`` is visible under these filters."""
        if self.owner is None:
            return True
        return owner == self.owner or (self.include_shared and owner == SHARED_OWNER)


@dataclass(frozen=True, slots=True)
class Hit:
    """One ranked result. All scores are in [0, 1], higher is better.

    ``score``: the fused score that ranks the hit. ``vector_score``: the
    cosine similarity to the query put on [0, 1] as the fusion did (hybrid:
    min-max over the vector candidates; ``vector`` mode: clipped) (``None``
    when the memory was not among the vector candidates). ``text_score``: BM25
    put on [0, 1] likewise (hybrid: min-max; ``text`` mode: over the query's
    best) (``None`` when not among the BM25 candidates or BM25 did not run).
    ``rank`` is 1-based. See :mod:`tribal_memory.retrieval`.

    What the learned layer did (DESIGN §4), all neutral on plain search:
    ``cached``: served from the query cache without a search. ``expanded_from``:
    the query variant whose BM25 match raised this hit (``None``: the query
    itself). ``boost``: score added from feedback (similar past queries and
    usage priors), in [-(max_penalty + skip_prior_weight), max_boost] (0.0:
    none). ``anchor_match``: BM25 match of the query against the memory's
    anchors divided by the best such match, in [0, 1] (``None``: no anchor
    matched).
    """

    memory: Memory
    score: float
    rank: int
    vector_score: float | None = None
    text_score: float | None = None
    cached: bool = False
    expanded_from: str | None = None
    boost: float = 0.0
    anchor_match: float | None = None


SearchMode = Literal["hybrid", "vector", "text", "hybrid_expanded"]
"""Which paths a search runs: both fused (hybrid), vector only, BM25 only (text), or
hybrid with graph-expanded scores (see :mod:`tribal_memory.retrieval.graph_expansion`)."""


@dataclass(frozen=True, slots=True)
class SearchResult:
    """Hits in rank order plus how they were found.

    ``mode``: ``"hybrid"``, ``"vector"`` or ``"text"``. ``fallback`` is
    ``"vector"`` when a hybrid search had to run on embeddings alone (no
    full-text index yet or too few memories for BM25 to mean anything), else
    ``None``. An empty ``hits`` list is a miss, not an error.

    ``variant`` is ``"learned"`` when the learned layer ranked the hits and
    ``"baseline"`` otherwise; ``cached`` is True when the query cache answered.
    ``retrieval_id`` identifies the logged retrieval event to send feedback
    for (``None`` unless feedback was asked for). ``context``: the heading and
    neighbouring chunks of the document chunks among the hits, when asked for
    (see :class:`ChunkContext`); it never changes the hits or their order.
    """

    hits: tuple[Hit, ...]
    mode: SearchMode
    fallback: Literal["vector"] | None = None
    took_ms: float = 0.0
    variant: Literal["learned", "baseline"] = "baseline"
    cached: bool = False
    retrieval_id: str | None = None
    context: tuple[ChunkContext, ...] = ()


@dataclass(frozen=True, slots=True)
class ChunkContext:
    """Surroundings of one chunk hit, for reading it in place.

    ``memory_id``: the hit. ``parent``: the memory its ``parent_id`` names
    (the chunk that opens its section, or for a section's first chunk the one
    opening the enclosing section). ``previous``/``next``: the chunks before
    and after it in the same document and section. Each is None when there is
    none, or when it is not visible to the searching owner.
    """

    memory_id: str
    parent: Memory | None
    previous: Memory | None
    next: Memory | None


DocumentStatus = Literal["created", "updated", "unchanged", "deleted"]


@dataclass(frozen=True, slots=True)
class DocumentResult:
    """Outcome of ingesting (or deleting) one document.

    ``path``: the document's path as recorded in its chunks' ``source``.
    ``status``: ``created`` (new document), ``updated`` (its content changed:
    chunks replaced), ``unchanged`` (same content hash; nothing done) or
    ``deleted``. ``chunks``: chunks the document has now (0 once deleted).
    ``added``/``removed``: chunk memories stored and deleted by this call.
    """

    path: str
    owner: str
    doc_id: str
    status: DocumentStatus
    chunks: int
    added: int
    removed: int


@dataclass(frozen=True, slots=True)
class DocumentInfo:
    """A stored document: one per (owner, path).

    ``format``: ``markdown``, ``text`` or ``pdf``. ``content_hash``: SHA-256
    (hex) of the bytes last ingested; ``byte_size`` their length in bytes.
    ``chunk_ids``: its chunk memories in document order (an id appears twice
    when two chunks have the same text).
    """

    path: str
    owner: str
    doc_id: str
    format: str
    content_hash: str
    byte_size: int
    chunk_ids: tuple[str, ...]
    ingested_at: datetime


@dataclass(frozen=True, slots=True)
class Relation:
    """A directed, typed edge between two memories. ``weight`` is >= 0."""

    source_id: str
    target_id: str
    type: str
    weight: float
    created_at: datetime


@dataclass(frozen=True, slots=True)
class MemoryPage:
    """One page of a listing, memories by id.

    ``next_after``: pass it as ``after`` to read the next page (None: this
    was the last one).
    """

    memories: tuple[Memory, ...]
    next_after: str | None


@dataclass(frozen=True, slots=True)
class OwnerCleared:
    """What clearing an owner's knowledge deleted.

    ``memories``: its memories (each with its relations and learned rows, as
    a single delete does). ``documents``: its ingested documents' records.
    """

    owner: str
    memories: int
    documents: int


@dataclass(frozen=True, slots=True)
class RelationInput:
    """An edge to write: ``source_id -[type]-> target_id`` with ``weight`` >= 0."""

    source_id: str
    target_id: str
    type: str
    weight: float = 1.0


@dataclass(frozen=True, slots=True)
class Neighbor:
    """A memory reached from another by BFS over relations.

    ``steps`` is the hop count (>= 1); ``via`` is the relation that reached it.
    """

    memory: Memory
    steps: int
    via: Relation


MAX_STEPS = 5
"""Most hops any graph walk takes."""


@dataclass(frozen=True, slots=True)
class Traversal:
    """How a walk over relations moves (either direction along each edge).

    ``steps``: most hops, 1 to :data:`MAX_STEPS`. ``types``: follow only
    relations of these types (empty: every type). ``block``: never pass
    through these: an edge whose type is listed is not followed, and a memory
    whose kind is listed (``fact``, ``chunk``, ``document``) is neither
    returned nor walked through (the walk's own start memories excepted). A
    name counts both ways, as a relation type and as a kind; ``block`` wins
    over ``types``.
    """

    steps: int = 1
    types: tuple[str, ...] = ()
    block: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Near:
    """Restrict a search to the graph neighbourhood of one memory.

    ``memory_id``: the constraint memory; it belongs to its own neighbourhood
    (0 steps). ``traversal``: how far and over which relations the
    neighbourhood reaches (see :class:`Traversal`).
    """

    memory_id: str
    traversal: Traversal = field(default_factory=Traversal)


@dataclass(frozen=True, slots=True)
class CommonNeighbor:
    """A memory within reach of every one of several memories (an intersection).

    ``steps``: its hop count from each of them, in the order they were given
    (each >= 1).
    """

    memory: Memory
    steps: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class StoreStats:
    """Counts and configuration of one instance.

    Table health (what slows reads; ``optimize()`` brings the first three
    down): ``fragments`` and ``small_fragments`` of the memory table,
    ``unindexed_rows`` (rows the full-text and scalar indexes lack yet),
    ``versions`` (table versions kept on disk).
    """

    memories: int
    owners: dict[str, int]
    kinds: dict[str, int]
    relations: int
    embedding_model: str
    embedding_dim: int
    fts_indexed: bool
    ann_indexed: bool
    table_version: int
    fragments: int = 0
    small_fragments: int = 0
    unindexed_rows: int = 0
    versions: int = 0


LEARNED_PARTS: tuple[str, ...] = ("cache", "expansion", "feedback", "anchors")
"""The switchable parts of the learned layer (DESIGN §4)."""

Variant = Literal["learned", "baseline"]


@dataclass(frozen=True, slots=True)
class LearnedParts:
    """Which learned parts a search may use. All off is plain hybrid search."""

    cache: bool = True
    expansion: bool = True
    feedback: bool = True
    anchors: bool = True

    @classmethod
    def none(cls) -> LearnedParts:
        """Every part off (the ``baseline`` variant)."""
        return cls(cache=False, expansion=False, feedback=False, anchors=False)

    @classmethod
    def only(cls, *names: str) -> LearnedParts:
        """Only the named parts on; names from :data:`LEARNED_PARTS`.

        Raises:
            ValueError: an unknown part name.
        """
        unknown = set(names) - set(LEARNED_PARTS)
        if unknown:
            raise ValueError(f"unknown learned parts {sorted(unknown)}; known: {LEARNED_PARTS}")
        return cls(**{name: name in names for name in LEARNED_PARTS})

    @property
    def names(self) -> tuple[str, ...]:
        """Names of the parts that are on, in :data:`LEARNED_PARTS` order."""
        return tuple(name for name in LEARNED_PARTS if getattr(self, name))

    @property
    def any(self) -> bool:
        """True when at least one part is on."""
        return bool(self.names)


@dataclass(frozen=True, slots=True)
class FeedbackResult:
    """Outcome of :meth:`MemoryService.record_usage_feedback`.

    ``used``/``unused``: memory ids of the retrieval reported used and not
    used. ``duplicate`` is True when the same feedback had been recorded
    before (nothing was applied twice). ``anchors_created``: anchors that
    became active through this feedback.
    """

    retrieval_id: str
    used: tuple[str, ...]
    unused: tuple[str, ...]
    duplicate: bool = False
    anchors_created: int = 0


@dataclass(frozen=True, slots=True)
class Anchor:
    """A query text attached to a memory so that the memory is found by it.

    ``source``: ``"manual"`` (added through the API, active at once) or
    ``"learned"`` (from feedback; active once ``uses`` reaches the setting
    ``anchor_min_uses``). ``confidence`` in [0, 1]: 1.0 for manual anchors,
    else the share of the ``anchor_min_uses`` successes reached (capped at 1).
    ``owner``: whose searches use it (the owner whose feedback made a learned
    anchor, the memory's owner for a manual one; ``shared``: everyone's).
    """

    memory_id: str
    text: str
    source: Literal["manual", "learned", "llm"]
    confidence: float
    uses: int
    active: bool
    created_at: datetime
    owner: str


MEMORY_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(Memory))
"""The fields of :class:`Memory`, in order: the one list every representation derives from."""


def memory_to_json(memory: Memory) -> dict[str, Any]:
    """A JSON-able dict of ``memory``, field by field in :data:`MEMORY_FIELDS` order.

    Times are ISO 8601 strings as :meth:`datetime.isoformat` writes them
    (``+00:00``, not msgspec's ``Z``: export files keep their bytes); tags a
    list. See :func:`memory_from_json`.
    """
    data: dict[str, Any] = msgspec.to_builtins(memory, builtin_types=(datetime,))
    return {k: v.isoformat() if isinstance(v, datetime) else v for k, v in data.items()}


def memory_from_json(data: dict[str, Any]) -> Memory:
    """The :class:`Memory` a :func:`memory_to_json` dict describes.

    Raises:
        ValueError: ``data`` is not such a dict (a :class:`msgspec.ValidationError`
            naming the missing or ill-typed field).
    """
    return msgspec.convert(data, Memory)

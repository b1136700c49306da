"""What a search returns and what the learned layer adds: hits, results, anchors, feedback.

All scores are in [0, 1], higher is better, unless a field says otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from tribal_memory.base.models import Memory

LEARNED_PARTS: tuple[str, ...] = ("cache", "expansion", "feedback", "anchors", "adapter")
"""The switchable parts of the learned layer (DESIGN §4)."""


@dataclass(frozen=True, slots=True)
class Hit:
    """One ranked result. All scores are in [0, 1], higher is better.

    ``score``: calibrated relevance, the estimated probability that the
    memory is evidence for the question, the same scale for every query
    (:mod:`tribal_memory.retrieval.calibration`; a cached hit keeps the score it
    had when it was reported used; ``title`` mode blends it with the title
    match; a search by vector answers the cosine). ``rank_score``: the score
    that ranked the hit (fusion plus the learned gains, relative to this
    query's candidates; ``None`` where the ranking score is ``score``).
    ``cosine``: the raw cosine similarity of memory and query vector, in
    [-1, 1] (``None`` when the memory was not a vector candidate). Hits are
    in ranking order, which ``score`` need not follow. ``vector_score``: the
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
    rank_score: float | None = None
    cosine: float | None = None


SearchMode = Literal["hybrid", "vector", "text", "hybrid_expanded", "title", "summary", "automatic"]
"""Which search runs: both paths fused (hybrid), vector only, BM25 only (text),
hybrid with graph-expanded scores (:mod:`tribal_memory.retrieval.graph_expansion`),
section titles (:mod:`tribal_memory.retrieval.title`), hybrid over section and
document summaries only (summary), or the mode chosen from the query
(:mod:`tribal_memory.retrieval.automatic`). Every mode but ``title`` and
``summary`` leaves summary memories out unless the ``kinds`` filter names them."""


@dataclass(frozen=True, slots=True)
class SearchResult:
    """Hits in rank order plus how they were found.

    ``mode``: the mode that ran (never ``"automatic"``: the one it chose).
    ``mode_reason``: why that mode ran when it is not simply the one asked for
    (``automatic``'s rule, or a ``title`` search that matched no title and ran
    hybrid), else ``None``. ``fallback`` is
    ``"vector"`` when a hybrid search had to run on embeddings alone (no
    full-text index yet or too few memories for BM25 to mean anything), else
    ``None``. An empty ``hits`` list is a miss, not an error.

    ``variant`` is ``"learned"`` when the learned layer ranked the hits and
    ``"baseline"`` otherwise; ``cached`` is True when the query cache answered.
    ``retrieval_id`` identifies the logged retrieval event to send feedback
    for (``None`` unless feedback was asked for). ``context``: the heading and
    neighbouring chunks of the document chunks among the hits, when asked for
    (see :class:`ChunkContext`); it never changes the hits or their order.
    ``filter_key``: fingerprint of the filters the search ran under beyond
    owner and shared (``""``: none); feedback on it teaches the query cache
    for those filters only. ``cosine_range``: the lowest and highest cosine
    similarity among the search's vector candidates (``None``: no vector
    search ran, or a cached answer); a highest far below the usual tells that
    nothing stored is close to the question.
    """

    hits: tuple[Hit, ...]
    mode: SearchMode
    fallback: Literal["vector"] | None = None
    took_ms: float = 0.0
    variant: Literal["learned", "baseline"] = "baseline"
    cached: bool = False
    retrieval_id: str | None = None
    context: tuple[ChunkContext, ...] = ()
    mode_reason: str | None = None
    filter_key: str = ""
    cosine_range: tuple[float, float] | None = None


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


Variant = Literal["learned", "baseline"]


@dataclass(frozen=True, slots=True)
class LearnedParts:
    """Which learned parts a search may use. All off is plain hybrid search."""

    cache: bool = True
    expansion: bool = True
    feedback: bool = True
    anchors: bool = True
    adapter: bool = True
    """The owner's query adapter maps the query vector (once it has one)."""

    @classmethod
    def none(cls) -> LearnedParts:
        """Every part off (the ``baseline`` variant)."""
        return cls(cache=False, expansion=False, feedback=False, anchors=False, adapter=False)

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

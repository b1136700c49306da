"""What the learned layer reports: usage counts and rates, the learning curve.

Rates are shares in [0, 1]; a rate over zero events is 0.0. Computed by
:mod:`tribal_memory.learned.stats`; here so that every layer (and the HTTP
client) can speak of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Bucket = Literal["day", "week"]


@dataclass(frozen=True, slots=True)
class UsageCounts:
    """Counts and rates over a set of retrieval events."""

    retrievals: int = 0
    with_feedback: int = 0
    cache_hits: int = 0
    usage_rate: float = 0.0
    retrieval_to_usage: float = 0.0
    cache_hit_rate: float = 0.0


@dataclass(frozen=True, slots=True)
class CurvePoint:
    """Usage in one period (``period``: ISO date of the day, or of the Monday of the week)."""

    period: str
    counts: UsageCounts


@dataclass(frozen=True, slots=True)
class RetrievalStats:
    """What the learned layer did and how often its answers were used.

    ``overall`` and ``variants`` (``learned`` / ``baseline``) count events;
    ``expansion_lift`` is the used rate of hits raised by a query variant
    minus that of the other hits, in [-1, 1] (None without expanded hits);
    ``learning_curve`` is one point per day or week, oldest first; ``weights``
    , ``cache_entries`` and ``anchors`` count the owner's rows; ``llm_calls``
    and ``llm_failures`` count LLM expansion calls in this process.
    """

    overall: UsageCounts
    variants: dict[str, UsageCounts]
    expansion_lift: float | None
    expanded_hits: int
    learning_curve: tuple[CurvePoint, ...]
    cache_entries: int
    cache_eligible: int
    weights: int
    anchors: int
    llm_calls: int = 0
    llm_failures: int = 0
    counters: dict[str, int] = field(default_factory=dict)

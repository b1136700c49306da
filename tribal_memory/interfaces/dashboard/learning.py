"""Learning at a glance: cache hit rate, usage, the learning curve and the A/B comparison."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from litestar import get
from litestar.params import FromQuery
from litestar.plugins.htmx import HTMXRequest
from litestar.response import Template

from tribal_memory.base.errors import InvalidInput
from tribal_memory.interfaces.api.auth import CallerDep
from tribal_memory.interfaces.api.deps import Service
from tribal_memory.interfaces.dashboard.charts import BarChart, LineChart, bar_chart, line_chart
from tribal_memory.interfaces.dashboard.common import blank, chrome, parse_day, render
from tribal_memory.learned.stats import RetrievalStats, UsageCounts


@dataclass(frozen=True, slots=True)
class VariantRow:
    """One A/B variant's counts, and the learned minus baseline difference row (``delta``)."""

    name: str
    counts: UsageCounts


@dataclass(frozen=True, slots=True)
class Learning:
    """The learning page: stats of the owner (``""``: every owner) with its charts.

    ``usage_lift``: learned usage rate minus baseline's, in [-1, 1] (None
    unless both variants have retrievals with feedback).
    """

    owner: str
    bucket: str
    since: str
    stats: RetrievalStats
    variants: tuple[VariantRow, ...]
    usage_lift: float | None
    curve: LineChart
    variant_bars: BarChart
    overall_bars: BarChart


@get("/learning", sync_to_thread=True)
def learning_page(
    request: HTMXRequest,
    service: Service,
    caller: CallerDep,
    owner: FromQuery[str | None] = None,
    bucket: FromQuery[str | None] = None,
    since: FromQuery[str | None] = None,
) -> Template:
    """What the learned layer did for the owner, as figures and server-drawn SVG charts.

    Raises:
        InvalidInput: 400, a bucket other than day or week, a bad date.
        Forbidden: 403, a non-admin key naming another owner.
    """
    period = blank(bucket) or "day"
    if period not in ("day", "week"):
        raise InvalidInput(f"bucket must be day or week, not {period!r}")
    scope = caller.scope(blank(owner))
    learner = caller.learner if caller.learner is not None else scope
    chosen: Literal["day", "week"] = "week" if period == "week" else "day"
    stats = service.retrieval_stats(owner=learner, bucket=chosen, since=parse_day(since))
    rows = tuple(VariantRow(name, counts) for name, counts in sorted(stats.variants.items()))
    learned, baseline = stats.variants.get("learned"), stats.variants.get("baseline")
    lift = None
    if learned and baseline and learned.with_feedback and baseline.with_feedback:
        lift = learned.usage_rate - baseline.usage_rate
    points = stats.learning_curve
    curve = line_chart(
        "Learning curve",
        [p.period for p in points],
        [
            ("usage rate", "line-usage", [p.counts.usage_rate for p in points]),
            ("used hits / returned", "line-ratio", [p.counts.retrieval_to_usage for p in points]),
            ("cache hit rate", "line-cache", [p.counts.cache_hit_rate for p in points]),
        ],
    )
    view = Learning(
        owner=blank(owner) or "",
        bucket=period,
        since=since or "",
        stats=stats,
        variants=rows,
        usage_lift=lift,
        curve=curve,
        variant_bars=bar_chart(
            "Usage rate per variant", [(r.name, r.counts.usage_rate) for r in rows]
        ),
        overall_bars=bar_chart(
            "Overall",
            [
                ("cache hit rate", stats.overall.cache_hit_rate),
                ("usage rate", stats.overall.usage_rate),
                ("used / returned", stats.overall.retrieval_to_usage),
            ],
        ),
    )
    return render(
        request, "learning.html", None, chrome=chrome(request, caller, "learning"), view=view
    )

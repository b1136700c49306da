"""Retrieval statistics over logged retrieval events (DESIGN §4, A/B).

Rates are shares in [0, 1]; a rate over zero events is 0.0. "Usage rate" is
the share of retrievals with feedback in which at least one hit was used;
"retrieval-to-usage" is used hits over returned hits in those retrievals.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import func, select

from tribal_memory.base.db import Database
from tribal_memory.base.stats import Bucket, CurvePoint, RetrievalStats, UsageCounts
from tribal_memory.base.tables import (
    FactAnchorRow,
    QueryCacheRow,
    QueryFactWeightRow,
    RetrievalEventRow,
)
from tribal_memory.learned.query_cache import eligible

__all__ = ["Bucket", "CurvePoint", "RetrievalStats", "UsageCounts", "retrieval_stats"]


@dataclass(slots=True)
class _Tally:
    retrievals: int = 0
    with_feedback: int = 0
    cache_hits: int = 0
    used_events: int = 0
    returned: int = 0
    used: int = 0

    def add(self, row: Any) -> None:
        self.retrievals += 1
        self.cache_hits += int(bool(row.cache_hit))
        if row.used_ids is not None:
            self.with_feedback += 1
            self.used_events += int(bool(row.used_ids))
            self.returned += len(row.results or ())
            self.used += len(row.used_ids)

    def counts(self) -> UsageCounts:
        return UsageCounts(
            self.retrievals,
            self.with_feedback,
            self.cache_hits,
            self.used_events / self.with_feedback if self.with_feedback else 0.0,
            self.used / self.returned if self.returned else 0.0,
            self.cache_hits / self.retrievals if self.retrievals else 0.0,
        )


def _period(created: datetime, bucket: Bucket) -> str:
    day = created.astimezone(UTC).date() if created.tzinfo else created.date()
    if bucket == "week":
        day -= timedelta(days=day.weekday())
    return day.isoformat()


def retrieval_stats(
    db: Database,
    *,
    owner: str | None = None,
    bucket: Bucket = "day",
    since: datetime | None = None,
    counters: dict[str, int] | None = None,
    min_successes: int = 3,
    min_success_rate: float = 0.8,
) -> RetrievalStats:
    """Aggregate retrieval events (of ``owner``, or all) created at or after ``since``."""
    overall = _Tally()
    variants: dict[str, _Tally] = {}
    curve: dict[str, _Tally] = {}
    expanded = [0, 0]  # hits, used
    others = [0, 0]
    query = select(RetrievalEventRow).order_by(RetrievalEventRow.created_at)
    if owner is not None:
        query = query.where(RetrievalEventRow.owner == owner)
    if since is not None:
        # Stored times are UTC; SQLite keeps no offset, so compare in UTC.
        since = since.astimezone(UTC) if since.tzinfo else since.replace(tzinfo=UTC)
        query = query.where(RetrievalEventRow.created_at >= since)
    with db.session() as session:
        for row in session.scalars(query).yield_per(1000):
            overall.add(row)
            variants.setdefault(row.variant, _Tally()).add(row)
            curve.setdefault(_period(row.created_at, bucket), _Tally()).add(row)
            if row.used_ids is not None:
                _count_expansion(row.results or (), set(row.used_ids), expanded, others)
        cache_entries, cache_eligible = _cache_counts(
            session, owner, min_successes, min_success_rate
        )
        weights = session.scalar(_count(QueryFactWeightRow, owner)) or 0
        anchors = session.scalar(_count(FactAnchorRow, owner)) or 0
    lift = None
    if expanded[0] and others[0]:
        lift = expanded[1] / expanded[0] - others[1] / others[0]
    counters = dict(counters or {})
    return RetrievalStats(
        overall.counts(),
        {name: tally.counts() for name, tally in sorted(variants.items())},
        lift,
        expanded[0],
        tuple(CurvePoint(p, t.counts()) for p, t in sorted(curve.items())),
        int(cache_entries),
        int(cache_eligible),
        int(weights),
        int(anchors),
        counters.get("llm_calls", 0),
        counters.get("llm_failures", 0),
        counters,
    )


def _count_expansion(
    results: Iterable[dict[str, Any]], used: set[str], expanded: list[int], others: list[int]
) -> None:
    for result in results:
        bucket = expanded if result.get("expanded_from") else others
        bucket[0] += 1
        bucket[1] += int(str(result.get("id")) in used)


def _count(table: type[QueryFactWeightRow | FactAnchorRow], owner: str | None) -> Any:
    query = select(func.count()).select_from(table)
    return query.where(table.owner == owner) if owner is not None else query


def _cache_counts(
    session: Any, owner: str | None, min_successes: int, min_rate: float
) -> tuple[int, int]:
    query = select(QueryCacheRow.success_count, QueryCacheRow.failure_count)
    if owner is not None:
        query = query.where(QueryCacheRow.owner == owner)
    rows = session.execute(query).all()
    answering = sum(1 for s, f in rows if eligible(s, f, min_successes, min_rate))
    return len(rows), answering

"""What the learned layer knows of one memory: the questions it answered and its feedback.

Read-only views for people looking inside the memory (the dashboard): the
(query, memory) weights feedback left on it, and the recent logged
retrievals that returned it with whether the caller then used it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import select

from tribal_memory.base.db import Database
from tribal_memory.base.tables import QueryFactWeightRow, RetrievalEventRow

SCAN_EVENTS = 2_000
"""Most recent retrieval events read to find those that returned a memory."""


@dataclass(frozen=True, slots=True)
class QuestionWeight:
    """Feedback on one (question, memory) pair.

    ``query``: the normalised question. ``weight`` in [-1, 1]: above 0 the
    memory was used for it, below 0 shown and skipped. ``owner``: whose
    feedback it is. ``updated_at``: the last feedback (UTC).
    """

    owner: str
    query: str
    weight: float
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class RetrievalUse:
    """One logged retrieval that returned the memory.

    ``rank``: the memory's 1-based rank in it. ``used``: True when feedback
    named it used, False when feedback left it unused, None without feedback.
    """

    retrieval_id: str
    owner: str
    query: str
    variant: str
    rank: int
    score: float
    used: bool | None
    created_at: datetime


@dataclass(frozen=True, slots=True)
class MemoryHistory:
    """The questions that used a memory and the retrievals that returned it, newest first."""

    questions: tuple[QuestionWeight, ...]
    retrievals: tuple[RetrievalUse, ...]


def _aware(value: datetime) -> datetime:
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def memory_history(
    db: Database, memory_id: str, *, owner: str | None, limit: int = 50
) -> MemoryHistory:
    """Feedback weights on ``memory_id`` and the recent retrievals that returned it.

    Args:
        db: The SQL database.
        memory_id: The memory.
        owner: Only this owner's feedback and retrievals (None: every owner's).
        limit: Most entries of each list, >= 1.

    Returns:
        Both lists newest first; empty when nothing was learned about it.
        Retrievals are looked for among the :data:`SCAN_EVENTS` newest events.
    """
    weights = QueryFactWeightRow
    events = RetrievalEventRow
    with db.session() as session:
        query = select(weights).where(weights.memory_id == memory_id)
        if owner is not None:
            query = query.where(weights.owner == owner)
        rows = session.scalars(query.order_by(weights.updated_at.desc()).limit(limit)).all()
        questions = tuple(
            QuestionWeight(r.owner, r.query_key, float(r.weight), _aware(r.updated_at))
            for r in rows
        )
        recent = select(events).order_by(events.created_at.desc()).limit(SCAN_EVENTS)
        if owner is not None:
            recent = recent.where(events.owner == owner)
        uses: list[RetrievalUse] = []
        for event in session.scalars(recent):
            for result in event.results or ():
                if str(result.get("id")) != memory_id:
                    continue
                used = None if event.used_ids is None else memory_id in event.used_ids
                uses.append(
                    RetrievalUse(
                        event.retrieval_id,
                        event.owner,
                        event.query,
                        event.variant,
                        int(result.get("rank", 0)),
                        float(result.get("score", 0.0)),
                        used,
                        _aware(event.created_at),
                    )
                )
                break
            if len(uses) >= limit:
                break
    return MemoryHistory(questions, tuple(uses))

"""FeedbackTracker: retrieval events, usage feedback and (query, memory) weights (DESIGN §4.3).

A retrieval logged with feedback asked for gets a ``retrieval_id``. When the
caller reports which of its memories it used, each used (query key, memory)
weight moves towards +1 and each retrieved-but-unused one towards -1::

    used:    w <- w + learning_rate * (1 - w)
    unused:  w <- w - penalty_rate  * (1 + w)

so weights stay in [-1, 1] whatever the order of updates. At query time the
weights of similar past queries (cosine similarity ``s`` of the query
embeddings at least ``tau``) are summed, each scaled by ``(s - tau) / (1 - tau)``
and by ``0.5 ** (age / half_life)``, and the sum ``S`` becomes a score boost
``max_boost * min(S, 1)`` (or a penalty ``max_penalty * max(S, -1)``). This is
a bounded, decaying form of click-through relevance feedback (Joachims,
"Optimizing search engines using clickthrough data", KDD 2002).

Whatever the question, the same weights also give each memory a usage prior
(:meth:`FeedbackTracker.priors`): how often it was used, and how often it was
shown among the top results and skipped. A result the reader saw and passed
over is negative evidence (Joachims et al., "Accurately interpreting
clickthrough data as implicit feedback", SIGIR 2005).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import case, func, select

from tribal_memory.base.config import Settings
from tribal_memory.base.db import Database
from tribal_memory.base.sql import days_since
from tribal_memory.base.tables import QueryFactWeightRow, RetrievalEventRow, utcnow
from tribal_memory.learned.memo import RowsByKey, sql_rows
from tribal_memory.learned.query_cache import PastQuery
from tribal_memory.learned.usage_index import UsageIndex, Weight

PRIOR_REUSE_S = 60.0
"""Longest time usage priors computed for an unchanged cache generation are reused, in s."""


@dataclass(frozen=True, slots=True)
class UsagePrior:
    """What feedback on any question says of one memory; both parts in [0, 1].

    ``used``: the sum of its positive decayed weights, capped at 1 (reported
    used). ``skipped``: the sum of its negative decayed weights' magnitudes,
    capped at 1 (retrieved within the penalty depth and not used).
    """

    used: float = 0.0
    skipped: float = 0.0


@dataclass(frozen=True, slots=True)
class RetrievalEvent:
    """A logged retrieval.

    ``results``: one dict per hit in rank order with ``id``, ``rank``, ``score``
    and the learned-layer flags (``cached``, ``expanded_from``, ``boost``,
    ``anchor_match``). ``used_ids`` is None until feedback arrives.
    ``session_id``: the agent session the retrieval belongs to (None: none);
    feedback on it may name memories any retrieval of that session returned.
    ``filter_key``: fingerprint of the search's filters beyond owner and shared
    (:func:`~tribal_memory.learned.query_cache.filter_key`; ``""``: none).
    """

    retrieval_id: str
    owner: str
    query: str
    variant: str
    results: tuple[dict[str, Any], ...]
    used_ids: tuple[str, ...] | None
    cache_hit: bool
    parts: tuple[str, ...]
    created_at: datetime
    feedback_at: datetime | None
    session_id: str | None = None
    filter_key: str = ""

    @property
    def result_ids(self) -> tuple[str, ...]:
        """Memory ids of the results, in rank order."""
        return tuple(str(r["id"]) for r in self.results)


def _aware(value: datetime) -> datetime:
    return value if value.tzinfo else value.replace(tzinfo=UTC)


class FeedbackTracker:
    """Logs retrieval events and turns usage feedback into bounded query→memory weights.

    Args:
        db: The SQL database.
        learning_rate: Step of a used weight towards +1, in (0, 1].
        penalty_rate: Step of an unused weight towards -1, in [0, 1].
        half_life_days: Age at which a weight counts half, in days.
        min_similarity: ``tau``, the least cosine similarity of a past query that counts.
        max_boost: Largest boost, in [0, 1].
        max_penalty: Largest penalty, in [0, 1].
    """

    def __init__(
        self,
        db: Database,
        *,
        learning_rate: float,
        penalty_rate: float,
        half_life_days: float,
        min_similarity: float,
        max_boost: float,
        max_penalty: float,
    ) -> None:
        self._db = db
        self.learning_rate = learning_rate
        self.penalty_rate = penalty_rate
        self.half_life_days = half_life_days
        self.min_similarity = min_similarity
        self.max_boost = max_boost
        self.max_penalty = max_penalty
        self._priors: dict[str, tuple[int, float, dict[str, UsagePrior]]] = {}
        """owner -> (cache generation, time.monotonic() when computed, priors)."""
        self._priors_seen: dict[str, int] = {}
        """owner -> the generation the last :meth:`priors` call saw."""
        self._priors_lock = threading.Lock()
        weights = QueryFactWeightRow
        self._weights: RowsByKey[Weight] = sql_rows(
            db, weights, [weights.memory_id, weights.weight, weights.updated_at], _weight
        )
        self._usage = UsageIndex(db, self._weights)

    @classmethod
    def from_settings(cls, db: Database, settings: Settings) -> FeedbackTracker:
        """The tracker with the feedback rates, half-life and bounds of ``settings``."""
        return cls(
            db,
            learning_rate=settings.feedback_learning_rate,
            penalty_rate=settings.feedback_penalty_rate,
            half_life_days=settings.feedback_half_life_days,
            min_similarity=settings.feedback_similarity,
            max_boost=settings.max_boost,
            max_penalty=settings.max_penalty,
        )

    # -- events -------------------------------------------------------------------

    def log(
        self,
        *,
        owner: str,
        query: str,
        variant: str,
        results: Sequence[dict[str, Any]],
        parts: Sequence[str],
        cache_hit: bool,
        session_id: str | None = None,
        filter_key: str = "",
    ) -> str:
        """Store a retrieval event; returns its new ``retrieval_id`` (a UUID4 string).

        ``filter_key``: see :class:`RetrievalEvent`.
        """
        retrieval_id = str(uuid.uuid4())
        with self._db.session() as session:
            session.add(
                RetrievalEventRow(
                    retrieval_id=retrieval_id,
                    owner=owner,
                    query=query,
                    variant=variant,
                    results=list(results),
                    parts=list(parts),
                    cache_hit=cache_hit,
                    created_at=utcnow(),
                    session_id=session_id,
                    filter_key=filter_key or None,
                )
            )
        return retrieval_id

    def event(self, retrieval_id: str) -> RetrievalEvent | None:
        """The logged event, or None when the id is unknown."""
        with self._db.session() as session:
            row = session.get(RetrievalEventRow, retrieval_id)
            if row is None:
                return None
            return RetrievalEvent(
                row.retrieval_id,
                row.owner,
                row.query,
                row.variant,
                tuple(row.results or ()),
                tuple(row.used_ids) if row.used_ids is not None else None,
                bool(row.cache_hit),
                tuple(row.parts or ()),
                _aware(row.created_at),
                _aware(row.feedback_at) if row.feedback_at else None,
                row.session_id,
                row.filter_key or "",
            )

    def session_results(self, owner: str, session_id: str) -> dict[str, float]:
        """``{memory_id: best score}`` over every retrieval ``owner`` logged in the session.

        Returns:
            {} when the session has no retrieval of that owner.
        """
        found: dict[str, float] = {}
        with self._db.session() as session:
            rows = session.scalars(
                select(RetrievalEventRow.results).where(
                    RetrievalEventRow.owner == owner, RetrievalEventRow.session_id == session_id
                )
            )
            for results in rows:
                for result in results or ():
                    memory_id, score = str(result["id"]), float(result["score"])
                    found[memory_id] = max(score, found.get(memory_id, score))
        return found

    def mark_used(self, retrieval_id: str, used_ids: Sequence[str], now: datetime) -> bool:
        """Record the used ids on the event once; False when it already had feedback."""
        with self._db.session() as session:
            row = session.get(RetrievalEventRow, retrieval_id, with_for_update=True)
            if row is None or row.used_ids is not None:
                return False
            row.used_ids = list(used_ids)
            row.feedback_at = now
            return True

    # -- weights ------------------------------------------------------------------

    def reinforce(
        self,
        owner: str,
        key: str,
        used: Sequence[str],
        unused: Sequence[str],
        now: datetime,
    ) -> None:
        """Move the (key, memory) weights of ``used`` towards +1 and of ``unused`` towards -1."""
        if not key or not (used or unused):
            return
        ids = list(dict.fromkeys([*used, *unused]))
        with self._db.session() as session:
            rows = {
                r.memory_id: r
                for r in session.scalars(
                    select(QueryFactWeightRow).where(
                        QueryFactWeightRow.owner == owner,
                        QueryFactWeightRow.query_key == key,
                        QueryFactWeightRow.memory_id.in_(ids),
                    )
                )
            }
            used_set = set(used)
            for memory_id in ids:
                row = rows.get(memory_id)
                if row is None:
                    if memory_id not in used_set and self.penalty_rate == 0:
                        continue
                    row = QueryFactWeightRow(
                        owner=owner, query_key=key, memory_id=memory_id, weight=0.0
                    )
                    session.add(row)
                weight = self.decayed(row.weight, row.updated_at, now)
                if memory_id in used_set:
                    weight += self.learning_rate * (1.0 - weight)
                else:
                    weight -= self.penalty_rate * (1.0 + weight)
                row.weight = min(1.0, max(-1.0, weight))
                row.updated_at = now

    def decayed(self, weight: float, updated_at: datetime | None, now: datetime) -> float:
        """``weight`` halved for every ``half_life_days`` since ``updated_at``."""
        if updated_at is None:
            return weight
        return float(weight * self._decay((now - _aware(updated_at)).total_seconds()))

    def _decay(self, age_s: float) -> float:
        """The factor a weight keeps after ``age_s`` seconds (1 for a future time)."""
        return float(0.5 ** (max(0.0, age_s) / (self.half_life_days * 86400.0)))

    def priors(
        self,
        owner: str,
        now: datetime,
        memory_ids: Collection[str],
        *,
        generation: int | None = None,
    ) -> dict[str, UsagePrior]:
        """Usage prior of each of ``memory_ids``: its decayed weights over all queries.

        A memory that proved useful for any past question is more likely to
        answer a new one, and one that was shown and passed over is less so
        (query-independent click priors); the caller scales them and applies
        them only to memories the query already retrieved.

        The weights come from memory (:class:`~.usage_index.UsageIndex`:
        the feedback weights memo turned around per memory, moved by the
        query keys each feedback changed) while the memo holds all of the
        owner's weights, else from SQL, where summing every weight of an
        owner costs tens of ms once thousands of (query, memory) pairs
        exist. Each feedback changes them, so the first search after a
        change computes the priors of ``memory_ids`` only; once a second
        search finds the same generation (feedback has paused), all of the
        owner's priors are computed and reused while the generation holds.

        Args:
            owner: Whose weights.
            now: The time the weights decay to.
            memory_ids: The memories whose priors are wanted (a search's pool).
            generation: The change counter of ``owner``'s query-cache entries,
                which every feedback and every deletion of a used memory
                changes: while it is the same, the priors computed for it are
                reused (for at most ``PRIOR_REUSE_S``, as they decay slowly).
                None: always read the weights of ``memory_ids``.

        Returns:
            ``{memory_id: UsagePrior}`` for those of ``memory_ids`` with any
            weight other than 0; {} without feedback.
        """
        if generation is None:
            return self._read_priors(owner, now, memory_ids)
        with self._priors_lock:
            known = self._priors.get(owner)
            seen_once = self._priors_seen.get(owner) == generation
            self._priors_seen[owner] = generation
        if (
            known is not None
            and known[0] == generation
            and time.monotonic() - known[1] < PRIOR_REUSE_S
        ):
            return {m: known[2][m] for m in memory_ids if m in known[2]}
        if not seen_once:  # feedback may still be flowing: compute only what is asked
            return self._priors_at(owner, now, memory_ids, generation)
        computed = self._priors_at(owner, now, None, generation)
        with self._priors_lock:
            self._priors[owner] = (generation, time.monotonic(), computed)
        return {m: computed[m] for m in memory_ids if m in computed}

    def _priors_at(
        self, owner: str, now: datetime, memory_ids: Collection[str] | None, generation: int
    ) -> dict[str, UsagePrior]:
        """Priors of ``memory_ids`` (None: all) from the in-memory weights, else from SQL."""
        found = self._usage.weights_of(owner, generation, memory_ids)
        if found is None:
            return self._read_priors(owner, now, memory_ids)
        now_s = _aware(now).timestamp()
        priors: dict[str, UsagePrior] = {}
        for memory_id, weights in found.items():
            used = skipped = 0.0
            counted = False
            for weight, updated_s in weights.values():
                if weight == 0:
                    continue
                counted = True
                value = weight * self._decay(now_s - updated_s) if updated_s is not None else weight
                if weight > 0:
                    used += value
                else:
                    skipped -= value
            if counted:
                priors[memory_id] = UsagePrior(min(1.0, used), min(1.0, skipped))
        return priors

    def _read_priors(
        self, owner: str, now: datetime, memory_ids: Collection[str] | None = None
    ) -> dict[str, UsagePrior]:
        """Priors of ``memory_ids`` (None: of every memory ``owner`` has weights for).

        Summed and decayed in SQL: one row per memory comes back, however many
        (query, memory) weights it has.
        """
        wanted = list(memory_ids) if memory_ids is not None else None
        if wanted is not None and not wanted:
            return {}
        weights = QueryFactWeightRow
        with self._db.session() as session:
            decay = func.pow(
                0.5, days_since(session, weights.updated_at, now) / self.half_life_days
            )
            value = weights.weight * decay
            query = (
                select(
                    weights.memory_id,
                    func.sum(case((weights.weight > 0, value), else_=0.0)),
                    func.sum(case((weights.weight < 0, -value), else_=0.0)),
                )
                .where(weights.weight != 0)
                .group_by(weights.memory_id)
            )
            if wanted is None:
                query = query.where(weights.owner == owner)
            else:
                # ``owner || ''`` keeps SQLite off the primary key's (owner, ...) prefix,
                # which it prefers for a long id list: that scans every weight of the
                # owner (10 ms at 14k weights) where the memory_id index reads the pool's.
                query = query.where(
                    weights.owner.concat("") == owner, weights.memory_id.in_(wanted)
                )
            rows = session.execute(query).all()
        return {
            str(memory_id): UsagePrior(min(1.0, float(used)), min(1.0, float(skipped)))
            for memory_id, used, skipped in rows
        }

    def boosts(
        self,
        owner: str,
        similar: Sequence[PastQuery],
        now: datetime,
        *,
        generation: int | None = None,
    ) -> dict[str, float]:
        """Score change per memory from the weights of ``similar`` past queries.

        ``generation``: the owner's ``query_cache:<owner>`` counter as just
        read; while it is unchanged the weights of a past query are read from
        SQL once (:class:`RowsByKey`). None: always read them.

        Returns:
            ``{memory_id: boost}`` with boosts in ``[-max_penalty, max_boost]``;
            memories without weights are absent ({} when nothing applies).
        """
        relevant = {q.key: q.similarity for q in similar if q.similarity >= self.min_similarity}
        if not relevant:
            return {}
        span = max(1e-9, 1.0 - self.min_similarity)
        totals: dict[str, float] = {}
        weights = self._weights.get(owner, list(relevant), generation)
        now_s = _aware(now).timestamp()
        for key, rows in weights.items():
            closeness = min(1.0, (relevant[key] - self.min_similarity) / span)
            for memory_id, weight, updated_s in rows:
                if updated_s is not None:
                    weight *= self._decay(now_s - updated_s)
                totals[memory_id] = totals.get(memory_id, 0.0) + closeness * weight
        return {
            memory_id: self.max_boost * min(total, 1.0)
            if total >= 0
            else self.max_penalty * max(total, -1.0)
            for memory_id, total in totals.items()
            if total != 0.0
        }


def _weight(values: Sequence[Any]) -> Weight:
    """A weight row as :class:`RowsByKey` keeps it (the time read once, as seconds)."""
    memory_id, weight, updated_at = values
    return memory_id, weight, _aware(updated_at).timestamp() if updated_at is not None else None

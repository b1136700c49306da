"""Each owner's query adapter: fitted from its feedback events, kept in SQL, applied to queries.

An owner's adapter (:mod:`tribal_memory.learned.adapter`) is fitted only
from that owner's own retrieval events with feedback (the questions it
asked, the hits it was shown in order, the ones it used), only once it has
``adapter_min_questions`` distinct such questions, and again after every
``adapter_retrain_every`` new events. Fitting runs on one background thread;
the new map replaces the old at once (a row of ``query_adapters``, whose
change counter every search reads with the others). It is deleted, exported
and imported with the owner's other learned rows.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
from sqlalchemy import delete, func, select

from tribal_memory.base.db import Database
from tribal_memory.base.models import SearchFilters
from tribal_memory.base.tables import QueryAdapterRow, RetrievalEventRow, utcnow
from tribal_memory.embeddings.base import Embedder, Vector, unit_rows
from tribal_memory.learned.adapter import AdapterFit, Examples, Matrix, apply, fit
from tribal_memory.learned.anchors import ALL_OWNERS
from tribal_memory.learned.text import query_key
from tribal_memory.store.base import MemoryStore

MAX_EVENTS = 2_000
"""Most recent feedback events an adapter is fitted on."""


logger = logging.getLogger(__name__)


def _log_failure(owner: str, done: Future[bool]) -> None:
    """Log a background fit that raised (the search goes on with the previous map)."""
    error = done.exception()
    if error is not None:
        logger.error("fitting the query adapter of %r failed: %s", owner, error, exc_info=error)


def generation_name(owner: str) -> str:
    """The change counter of ``owner``'s adapter row (kept by migration 0011's triggers)."""
    return f"query_adapter:{owner}"


@dataclass(frozen=True, slots=True)
class _Event:
    query: str
    shown: tuple[str, ...]
    used: tuple[str, ...]


class QueryAdapters:
    """The fitted adapters of one store's owners.

    Args:
        db: The SQL database (``retrieval_events``, ``query_adapters``).
        store: The memory store (vectors of used, skipped and random memories).
        embedder: Embeds the questions (``query=True``) when fitting.
        fit: How to fit.
        min_questions: Distinct questions with a used memory before an owner gets one.
        retrain_every: New feedback events between two fits.
        background: Fit on a background thread after feedback (False: only on
            :meth:`train`, e.g. for benchmarks that fit at a chosen moment).
    """

    def __init__(
        self,
        db: Database,
        store: MemoryStore,
        embedder: Embedder,
        *,
        fit: AdapterFit,
        min_questions: int,
        retrain_every: int,
        background: bool = True,
    ) -> None:
        self._db = db
        self._store = store
        self._embedder = embedder
        self._fit = fit
        self.min_questions = min_questions
        self.retrain_every = retrain_every
        self._background = background
        self._memo: dict[str, tuple[int, Matrix | None]] = {}
        self._lock = threading.Lock()
        self._pending: dict[str, Future[bool]] = {}
        self._executor: ThreadPoolExecutor | None = None

    # -- the search's side ------------------------------------------------------------

    def get(self, owner: str, generation: int) -> Matrix | None:
        """``owner``'s adapter as of its change counter ``generation``; None: it has none.

        Read from SQL once per counter value, then from memory.

        Raises:
            StoreUnavailable: the database cannot be read.
        """
        memo = self._memo.get(owner)
        if memo is not None and memo[0] == generation:
            return memo[1]
        with self._db.reading() as connection:
            row = connection.execute(
                select(QueryAdapterRow.dim, QueryAdapterRow.weights).where(
                    QueryAdapterRow.owner == owner
                )
            ).first()
        matrix = None
        if row is not None and row.dim == self._embedder.dim:
            matrix = np.frombuffer(row.weights, dtype="<f4").reshape(row.dim, row.dim).copy()
        self._memo[owner] = (generation, matrix)
        return matrix

    def apply(self, owner: str, generation: int, vector: Vector) -> Vector:
        """The vector a search of ``owner`` looks for: ``W q`` normalised, or ``q`` without one."""
        matrix = self.get(owner, generation)
        return vector if matrix is None else apply(matrix, vector)

    # -- the feedback's side ----------------------------------------------------------

    def note_feedback(self, owner: str) -> None:
        """After feedback of ``owner``: start a fit in the background when one is due."""
        if not self._background or owner == ALL_OWNERS:
            return
        with self._lock:
            running = self._pending.get(owner)
            if running is not None and not running.done():
                return
            if not self._due(owner):
                return
            if self._executor is None:
                self._executor = ThreadPoolExecutor(1, thread_name_prefix="tribal-adapter")
            future = self._executor.submit(self.train, owner)
            future.add_done_callback(lambda done: _log_failure(owner, done))
            self._pending[owner] = future

    def _due(self, owner: str) -> bool:
        with self._db.reading() as connection:
            events = connection.scalar(
                select(func.count())
                .select_from(RetrievalEventRow)
                .where(RetrievalEventRow.owner == owner, RetrievalEventRow.feedback_at.is_not(None))
            )
            seen = connection.scalar(
                select(QueryAdapterRow.events).where(QueryAdapterRow.owner == owner)
            )
        return int(events or 0) - int(seen or 0) >= self.retrain_every

    def wait(self) -> None:
        """Block until every fit started in the background has ended (benchmarks, tests)."""
        with self._lock:
            pending = list(self._pending.values())
        for future in pending:
            future.result()

    def close(self) -> None:
        """Let a running fit end and stop the background thread."""
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True)

    def train(self, owner: str) -> bool:
        """Fit ``owner``'s adapter now from its feedback events and store it.

        Returns:
            True when fitted; False when the owner has fewer than
            ``min_questions`` distinct questions with a used memory (nothing
            is stored, and an older adapter of the owner is deleted).

        Raises:
            StoreUnavailable / EmbeddingError: reading or embedding failed.
        """
        events, total = self._events(owner)
        questions = {query_key(e.query) for e in events}
        if len(questions) < self.min_questions:
            with self._db.session() as session:
                session.execute(delete(QueryAdapterRow).where(QueryAdapterRow.owner == owner))
            return False
        examples = self._examples(owner, events)
        if examples is None:
            return False
        matrix = fit(examples, self._fit)
        values = {
            "owner": owner,
            "dim": int(matrix.shape[0]),
            "weights": matrix.astype("<f4").tobytes(),
            "questions": len(questions),
            "events": total,
            "trained_at": utcnow(),
        }
        # Not an INSERT ... ON CONFLICT: SQLite applies its conflict handling to the
        # change-counter trigger's own insert, which then fails. Two processes fitting
        # the same owner's first adapter at once: one fails, is logged, and the next
        # feedback fits again.
        with self._db.session() as session:
            row = session.get(QueryAdapterRow, owner) or QueryAdapterRow(owner=owner)
            for name, value in values.items():
                setattr(row, name, value)
            session.add(row)
        return True

    def _events(self, owner: str) -> tuple[list[_Event], int]:
        """The owner's feedback events with a used memory (newest first), and the count of all."""
        with self._db.session() as session:
            rows = session.execute(
                select(
                    RetrievalEventRow.query, RetrievalEventRow.results, RetrievalEventRow.used_ids
                )
                .where(RetrievalEventRow.owner == owner, RetrievalEventRow.feedback_at.is_not(None))
                .order_by(RetrievalEventRow.feedback_at.desc())
            ).all()
        events = [
            _Event(query, tuple(str(r["id"]) for r in results), tuple(used))
            for query, results, used in rows
            if used
        ]
        return events[:MAX_EVENTS], len(rows)

    def _examples(self, owner: str, events: Sequence[_Event]) -> Examples | None:
        """Training rows: one per (event, used memory), with its skipped and random negatives."""
        filters = SearchFilters() if owner == ALL_OWNERS else SearchFilters(owner=owner)
        pool = self._store.ids_of(filters)
        rng = np.random.default_rng(len(events))
        size = min(self._fit.negatives, len(pool))
        randoms = [
            [pool[i] for i in rng.choice(len(pool), size=size)] if size else [] for _ in events
        ]
        wanted = {i for e in events for i in (*e.shown, *e.used)} | {i for r in randoms for i in r}
        vectors = self._store.vectors(sorted(wanted))
        texts = sorted({e.query for e in events})
        embedded = dict(zip(texts, self._embedder.embed_batch(texts, query=True), strict=True))
        rows: list[tuple[Vector, list[str]]] = []
        for event, random_ids in zip(events, randoms, strict=True):
            used = set(event.used)
            negatives = [i for i in event.shown if i not in used]
            negatives += [i for i in random_ids if i not in used]
            negatives = [i for i in dict.fromkeys(negatives) if i in vectors]
            rows += [(embedded[event.query], [u, *negatives]) for u in event.used if u in vectors]
        if not rows:
            return None
        width = max(len(ids) for _, ids in rows)
        dim = self._embedder.dim
        candidates = np.zeros((len(rows), width, dim), dtype=np.float32)
        mask = np.zeros((len(rows), width), dtype=bool)
        for n, (_, ids) in enumerate(rows):
            candidates[n, : len(ids)] = unit_rows(np.stack([vectors[i] for i in ids]))
            mask[n, : len(ids)] = True
        queries = np.stack([q for q, _ in rows]).astype(np.float32)
        return Examples(queries, candidates, mask)

"""QueryCache: questions proven by feedback, answered without a search (DESIGN §4.1).

Every query that received feedback gets an entry keyed by ``(owner, query
key)`` (see :func:`tribal_memory.learned.text.query_key`) holding success and
failure counts, the query's embedding and a snapshot of the memories that were
used. An entry answers (is *eligible*) once it has at least ``min_successes``
successes and a success rate of at least ``min_success_rate``. A reworded query
may hit an eligible entry whose query embedding is at least as similar as a
threshold (the semantic hit). Entries pointing at a memory that changes or goes
away are dropped by :func:`tribal_memory.learned.invalidation.forget_learned`.

The same entries, eligible or not, are the *past queries* that feedback boosts
and learned expansions look up by similarity (:meth:`QueryCache.similar`).

A search filtered beyond owner and shared (tags, kinds, sources, times, a
``near`` neighbourhood...) chooses among fewer memories, so what was used
under a filter is no answer to the same query unfiltered. Feedback on a
filtered search is counted and snapshotted under :func:`cache_key` (the
query key plus :func:`filter_key`, the filters' fingerprint), which only a
search with the same filters looks up; that entry keeps no embedding (it is
no past query), and the plain entry only gains the query's embedding (so
the query still counts as a past query for boosts and expansions).
"""

from __future__ import annotations

import bisect
import dataclasses
import hashlib
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
from sqlalchemy import bindparam, select

from tribal_memory.base.db import Database
from tribal_memory.base.models import (
    Memory,
    SearchFilters,
    memory_from_json,
    memory_to_json,
)
from tribal_memory.base.sql import query_cache_counter, read_generation
from tribal_memory.base.tables import QueryCacheRow, utcnow
from tribal_memory.embeddings.base import Vector, unit_rows
from tribal_memory.learned.memo import RowsByKey, sql_rows

MAX_PATCHED = 500
"""Most changed entries :meth:`QueryCache.past_queries` patches in; past that it reads all."""
MAX_KEPT_ENTRIES = 1024
"""Most entries :class:`QueryCache` keeps in memory per owner for repeated questions."""


def filter_key(filters: SearchFilters, mode: str = "") -> str:
    """Fingerprint of what a search's ``filters`` select beyond owner and shared.

    ``""`` when they select by owner and shared only (``exclude_kinds`` and
    ``exclude_doc_ids`` aside: a cached answer drops excluded kinds and
    conversations itself, so a search leaving out the current conversation
    learns with the others), else 16 hex digits of the
    SHA-256 of the rest (and of ``mode``, when given: a mode that is itself a
    selection, such as ``title``).
    """
    rest = dataclasses.replace(
        filters, owner=None, include_shared=True, exclude_kinds=(), exclude_doc_ids=()
    )
    if rest == SearchFilters() and not mode:
        return ""
    return hashlib.sha256(f"{rest!r}|{mode}".encode()).hexdigest()[:16]


def cache_key(query_key: str, filters_key: str) -> str:
    """The cache entry of a query under a filter: ``query_key`` itself when unfiltered."""
    return f"{query_key} |{filters_key}" if query_key and filters_key else query_key


def eligible(success: int, failure: int, min_successes: int, min_success_rate: float) -> bool:
    """True when a cache entry with these counts may answer (see the module docstring)."""
    total = success + failure
    return success >= min_successes and total > 0 and success / total >= min_success_rate


@dataclass(frozen=True, slots=True)
class CachedHit:
    """A memory in a cache entry: its snapshot, last score (in [0, 1]) and use count."""

    memory: Memory
    score: float
    uses: int


@dataclass(frozen=True, slots=True)
class CacheEntry:
    """One eligible cache entry; ``hits`` are most used first."""

    owner: str
    key: str
    query_text: str
    hits: tuple[CachedHit, ...]
    success_count: int
    failure_count: int

    @property
    def success_rate(self) -> float:
        """Successes over all feedbacks, in [0, 1]."""
        total = self.success_count + self.failure_count
        return self.success_count / total if total else 0.0


@dataclass(frozen=True, slots=True)
class PastQuery:
    """A past query similar to the current one; ``similarity`` is cosine in [-1, 1]."""

    key: str
    text: str
    similarity: float
    eligible: bool


@dataclass(slots=True)
class PastQueries:
    """One owner's past queries with feedback, as loaded for one search (read-only).

    Get it from :meth:`QueryCache.past_queries`; it is reused while the
    owner's entries do not change.
    """

    generation: int
    keys: list[str]
    texts: list[str]
    eligible: np.ndarray
    matrix: np.ndarray  # (n, dim), rows unit length
    eligible_keys: frozenset[str]
    """Keys of every eligible entry (with an embedding or not): the exact-key hits."""

    @property
    def empty(self) -> bool:
        """True when no entry has an embedding and none is eligible (nothing to look up)."""
        return not self.keys and not self.eligible_keys

    def similar(self, vector: Vector, *, min_similarity: float, limit: int = 20) -> list[PastQuery]:
        """Past queries with cosine similarity >= ``min_similarity`` to ``vector``, best first.

        Args:
            vector: The query embedding, shape ``(dim,)``.
            min_similarity: Least cosine similarity, in [-1, 1].
            limit: Most past queries returned.

        Returns:
            Up to ``limit`` past queries; [] when none is similar enough (or
            the embedding has another dimension).
        """
        query = np.asarray(vector, dtype=np.float32)
        if self.matrix.shape[1] != query.shape[0]:
            return []
        query = query / max(float(np.linalg.norm(query)), 1e-12)
        sims = self.matrix @ query
        order = np.argsort(-sims)[:limit]
        return [
            PastQuery(self.keys[i], self.texts[i], float(sims[i]), bool(self.eligible[i]))
            for i in order
            if sims[i] >= min_similarity
        ]


class QueryCache:
    """The ``query_cache`` table plus an in-memory index of its query embeddings.

    Args:
        db: The SQL database.
        min_successes: Successes an entry needs to answer (>= 1).
        min_success_rate: Success rate an entry needs to answer, in [0, 1].
    """

    def __init__(self, db: Database, *, min_successes: int, min_success_rate: float) -> None:
        self._db = db
        self._min_successes = min_successes
        self._min_rate = min_success_rate
        self._indexes: dict[str, PastQueries] = {}
        self._entries_read: RowsByKey[CacheEntry] = sql_rows(
            db,
            QueryCacheRow,
            _ENTRY_COLUMNS,
            _entry_of_values,
            max_keys=MAX_KEPT_ENTRIES,
            preload_rows=0,  # the hits' snapshots are large: keep only entries asked for
        )
        """Entries asked for, kept while their keys are unchanged (the owner's change log)."""
        self._lock = threading.Lock()

    def _eligible(self, success: int, failure: int) -> bool:
        return eligible(success, failure, self._min_successes, self._min_rate)

    def lookup(self, owner: str, key: str, *, generation: int | None = None) -> CacheEntry | None:
        """The eligible entry for exactly this key, or None (a miss).

        ``generation``: ``owner``'s change counter (:meth:`generation_name`)
        as the caller has just read it; the entry is then answered from
        memory when it was read at that counter, or before it and the change
        log does not name its key since (a repeated question costs no SQL,
        also after feedback on other questions). None always reads the table.
        """
        if not key:
            return None
        entry = self.get(owner, key, generation=generation)
        if entry is None or not self._eligible(entry.success_count, entry.failure_count):
            return None
        return entry

    @staticmethod
    def generation_name(owner: str) -> str:
        """The change counter of ``owner``'s entries (see ``base.sql.read_generation``)."""
        return query_cache_counter(owner)

    def past_queries(self, owner: str, *, generation: int | None = None) -> PastQueries | None:
        """``owner``'s entries as an in-memory index, or None when it has none.

        The index is reused while the owner's change counter (kept by database
        triggers: :func:`tribal_memory.base.sql.read_generation`) is unchanged, and
        rebuilt when any process changed the owner's entries since.

        Args:
            owner: Whose entries.
            generation: The counter, when the caller has just read it; None
                reads it here (one SQL statement).
        """
        with self._lock:
            cached = self._indexes.get(owner)
        if cached is not None and generation is not None and cached.generation == generation:
            return None if cached.empty else cached
        with self._db.reading() as session:  # a plain connection: on a search's path
            if generation is None:
                generation = read_generation(session, self.generation_name(owner))
                if cached is not None and cached.generation == generation:
                    return None if cached.empty else cached
            # After a feedback only the entries it touched are read again (the
            # change log of migration 0009); else, or when the log cannot say, all.
            changed = (
                self._db.changes(
                    session, self.generation_name(owner), cached.generation, generation
                )
                if cached is not None
                else None
            )
            if changed is not None and len(changed) > MAX_PATCHED:
                changed = None
            if changed is None:
                rows = session.execute(_PAST_OF_OWNER, {"owner": owner}).all()
            elif changed:
                keys = {"owner": owner, "keys": list(changed)}
                rows = session.execute(_PAST_OF_KEYS, keys).all()
            else:
                rows = []
        if cached is not None and changed is not None:
            index = _patched(cached, generation, changed, self._entries(rows))
        else:
            index = _built(generation, self._entries(rows))
        with self._lock:
            self._indexes[owner] = index
        return None if index.empty else index

    def _entries(self, rows: Sequence[Any]) -> _Entries:
        """Rows of :data:`_PAST_COLUMNS` as index parts, sorted by key; vectors unit length."""
        minimum, rate = self._min_successes, self._min_rate
        keys: list[str] = []
        texts: list[str] = []
        flags: list[bool] = []
        blobs: list[bytes] = []
        eligible_keys: set[str] = set()
        for key, text, success, failure, blob in sorted(rows, key=lambda row: str(row[0])):
            ok = eligible(success, failure, minimum, rate)
            if ok:
                eligible_keys.add(key)
            if blob is not None:
                keys.append(key)
                texts.append(text)
                flags.append(ok)
                blobs.append(blob)
        if blobs:  # every vector has the store's dimension (the model is checked on open)
            matrix = unit_rows(
                np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(blobs), -1)
            )
        else:
            matrix = np.zeros((0, 0), dtype=np.float32)
        return _Entries(keys, texts, flags, matrix, eligible_keys)

    def similar(
        self, owner: str, vector: Vector, *, min_similarity: float, limit: int = 20
    ) -> list[PastQuery]:
        """:meth:`PastQueries.similar` over ``owner``'s past queries ([] when it has none)."""
        index = self.past_queries(owner)
        if index is None:
            return []
        return index.similar(vector, min_similarity=min_similarity, limit=limit)

    def get(self, owner: str, key: str, *, generation: int | None = None) -> CacheEntry | None:
        """The entry for this key whether eligible or not, or None.

        ``generation``: as for :meth:`lookup`.
        """
        found = self._entries_read.get(owner, [key], generation)[key]
        return found[0] if found else None

    def remember(self, owner: str, key: str, text: str, embed: Callable[[], Vector]) -> None:
        """Keep ``owner``'s query as a past query (its entry, with an embedding); counts nothing.

        Args:
            owner: Whose query.
            key: The query key; an empty key records nothing.
            text: The query as asked.
            embed: Gives the query's embedding, called only when the entry has none.
        """
        if not key:
            return
        with self._db.session() as session:
            row = session.get(QueryCacheRow, (owner, key))
            if row is None:
                row = _new_row(owner, key, text)
                session.add(row)
            if row.query_vector is None:
                row.query_vector = np.asarray(embed(), dtype=np.float32).tobytes()
                row.updated_at = utcnow()

    def record(
        self,
        owner: str,
        key: str,
        text: str,
        embed: Callable[[], Vector] | None,
        used: Sequence[tuple[Memory, float]],
        *,
        now: datetime | None = None,
    ) -> None:
        """Count one feedback on the query: a success when ``used`` is non-empty.

        Args:
            owner: Whose query.
            key: The query key; an empty key records nothing.
            text: The query as asked.
            embed: Gives the query's embedding, called only when the entry has
                none yet (kept for similarity lookups); None: keep none.
            used: The memories reported used, each with its score in that retrieval.
            now: Time of the feedback (default: now).
        """
        if not key:
            return
        now = now or utcnow()
        with self._db.session() as session:
            row = session.get(QueryCacheRow, (owner, key))
            if row is None:
                row = _new_row(owner, key, text)
                session.add(row)
            if embed is not None and row.query_vector is None:
                row.query_vector = np.asarray(embed(), dtype=np.float32).tobytes()
            if used:
                row.success_count += 1
                row.last_success = now
                snapshot = {h["memory"]["memory_id"]: dict(h) for h in row.hits or []}
                for memory, score in used:
                    previous = snapshot.get(memory.memory_id, {"uses": 0})
                    snapshot[memory.memory_id] = {
                        "memory": memory_to_json(memory),
                        "score": float(score),
                        "uses": int(previous["uses"]) + 1,
                    }
                hits = sorted(snapshot.values(), key=lambda h: (-h["uses"], -h["score"]))
                row.hits = hits
                row.memory_ids = [h["memory"]["memory_id"] for h in hits]
            else:
                row.failure_count += 1
            row.updated_at = now


def _new_row(owner: str, key: str, text: str) -> QueryCacheRow:
    return QueryCacheRow(
        owner=owner,
        query_key=key,
        query_text=text,
        memory_ids=[],
        hits=[],
        success_count=0,
        failure_count=0,
    )


_ENTRY_COLUMNS = (
    QueryCacheRow.owner,
    QueryCacheRow.query_key,
    QueryCacheRow.query_text,
    QueryCacheRow.hits,
    QueryCacheRow.success_count,
    QueryCacheRow.failure_count,
)
"""What :meth:`QueryCache.get` reads of an entry."""


def _entry_of_values(values: Sequence[Any]) -> CacheEntry:
    """A :class:`CacheEntry` of the values of :data:`_ENTRY_COLUMNS`."""
    owner, key, text, hits, success, failure = values
    cached = tuple(
        CachedHit(memory_from_json(h["memory"]), float(h["score"]), int(h["uses"]))
        for h in hits or []
    )
    return CacheEntry(owner, key, text, cached, success, failure)


_PAST_COLUMNS = select(
    QueryCacheRow.query_key,
    QueryCacheRow.query_text,
    QueryCacheRow.success_count,
    QueryCacheRow.failure_count,
    QueryCacheRow.query_vector,
)
"""What :meth:`QueryCache.past_queries` reads of an entry."""
_PAST_OF_OWNER = _PAST_COLUMNS.where(QueryCacheRow.owner == bindparam("owner"))
_PAST_OF_KEYS = _PAST_OF_OWNER.where(QueryCacheRow.query_key.in_(bindparam("keys", expanding=True)))


@dataclass(slots=True)
class _Entries:
    """Parts of a :class:`PastQueries`, in key order (see :meth:`QueryCache._entries`)."""

    keys: list[str]
    texts: list[str]
    flags: list[bool]
    matrix: np.ndarray
    eligible_keys: set[str]


def _built(generation: int, entries: _Entries) -> PastQueries:
    return PastQueries(
        generation,
        entries.keys,
        entries.texts,
        np.array(entries.flags, dtype=bool),
        entries.matrix,
        frozenset(entries.eligible_keys),
    )


def _patched(
    index: PastQueries, generation: int, changed: set[str], fresh: _Entries
) -> PastQueries:
    """``index`` with the entries of ``changed`` keys replaced by ``fresh`` (their rows now).

    The same index, row for row, as :func:`_built` over every row would
    give (both in key order, vectors normalised one row at a time), read
    from a few rows instead of all: the changed keys' rows are taken out and
    the fresh ones put in at their places in key order (a feedback changes
    one or two keys of thousands, so nothing else moves). ``index`` itself
    is not changed (a search may still be using it).
    """
    if not index.keys:
        return _built(generation, fresh)
    gone = sorted(i for key in changed if (i := _position(index.keys, key)) is not None)
    keys, texts = list(index.keys), list(index.texts)
    for i in reversed(gone):
        del keys[i], texts[i]
    flags = np.delete(index.eligible, gone)
    matrix = np.delete(index.matrix, gone, axis=0)
    if fresh.keys:
        # Places among the kept keys; np.insert puts each row before its place.
        places = [bisect.bisect_left(keys, key) for key in fresh.keys]
        flags = np.insert(flags, places, np.array(fresh.flags, dtype=bool))
        matrix = np.insert(matrix, places, fresh.matrix, axis=0)
        for offset, (place, key, text) in enumerate(
            zip(places, fresh.keys, fresh.texts, strict=True)
        ):
            keys.insert(place + offset, key)
            texts.insert(place + offset, text)
    return PastQueries(
        generation,
        keys,
        texts,
        flags,
        matrix,
        frozenset((index.eligible_keys - changed) | fresh.eligible_keys),
    )


def _position(keys: Sequence[str], key: str) -> int | None:
    """Where ``key`` is in the sorted ``keys`` (None: absent)."""
    i = bisect.bisect_left(keys, key)
    return i if i < len(keys) and keys[i] == key else None

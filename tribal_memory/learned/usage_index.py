"""Every memory's feedback weights over all past queries, kept in memory as feedback arrives.

The usage prior of a memory (:meth:`FeedbackTracker.priors
<tribal_memory.learned.feedback.FeedbackTracker.priors>`) sums its weights
over every past query. Summing them in SQL for a search's pool costs a few
ms, and an agent that gives feedback after every search makes every search
the first after a change. The weights memo (:class:`~.memo.RowsByKey`)
already holds all of an owner's weights per query key while they are few
enough, and follows the change log; this index turns the same rows around,
per memory, and after a feedback moves only the rows of the query keys the
log names.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from tribal_memory.base.db import Database
from tribal_memory.learned.memo import RowsByKey
from tribal_memory.learned.query_cache import QueryCache

Weight = tuple[str, float, float | None]
"""A weight row as the memo keeps it: ``(memory_id, weight, updated_at)``, the time in s
since the epoch."""

MemoryWeights = dict[str, tuple[float, float | None]]
"""One memory's weights: query key -> ``(weight, updated_at)``, the time in s since the epoch."""


@dataclass(slots=True)
class _Index:
    generation: int
    rows: Mapping[str, list[Weight]]
    """The memo's rows the index was last brought to (a complete memo never changes them)."""
    by_memory: dict[str, MemoryWeights]


class UsageIndex:
    """Per owner, memory id -> its weights under every query key, from the weights memo.

    Args:
        db: The SQL database (its change log says which keys a feedback changed).
        weights: The memo of the ``query_fact_weights`` rows per (owner, query key).
    """

    def __init__(self, db: Database, weights: RowsByKey[Weight]) -> None:
        self._db = db
        self._weights = weights
        self._indexes: dict[str, _Index] = {}
        self._lock = threading.Lock()

    def weights_of(
        self, owner: str, generation: int, memory_ids: Collection[str] | None
    ) -> dict[str, MemoryWeights] | None:
        """The weights of each of ``memory_ids`` that has any, as of ``generation``.

        Args:
            owner: Whose weights.
            generation: The owner's ``query_cache:<owner>`` counter as just read.
            memory_ids: The memories asked for (None: every memory with weights).

        Returns:
            ``{memory_id: {query key: (weight, updated_at in s)}}`` (a copy),
            memories without weights absent; None when the owner has too many
            weights for the memo to hold them all (then read SQL instead).
        """
        rows, complete = self._weights.snapshot(owner, generation)
        if not complete:
            return None
        with self._lock:
            by_memory = self._current(owner, generation, rows).by_memory
            if memory_ids is None:
                return {m: dict(found) for m, found in by_memory.items()}
            return {m: dict(found) for m in memory_ids if (found := by_memory.get(m))}

    def _current(self, owner: str, generation: int, rows: Mapping[str, list[Weight]]) -> _Index:
        """The owner's index brought to ``rows`` (under ``self._lock``)."""
        index = self._indexes.get(owner)
        if index is not None and index.rows is rows:
            return index
        changed = None
        if index is not None and index.generation <= generation:
            name = QueryCache.generation_name(owner)
            with self._db.reading() as connection:
                changed = self._db.changes(connection, name, index.generation, generation)
        if index is None or changed is None:
            index = _Index(generation, rows, _by_memory(rows, rows.keys()))
        else:
            for key in changed:
                for memory_id, _, _ in index.rows.get(key, ()):
                    held = index.by_memory.get(memory_id)
                    if held is not None:
                        held.pop(key, None)
                        if not held:
                            del index.by_memory[memory_id]
            for memory_id, found in _by_memory(rows, changed).items():
                index.by_memory.setdefault(memory_id, {}).update(found)
            index.generation, index.rows = generation, rows
        self._indexes[owner] = index
        return index


def _by_memory(rows: Mapping[str, list[Weight]], keys: Collection[str]) -> dict[str, MemoryWeights]:
    """The rows of ``keys`` turned around: memory id -> {query key: (weight, updated_at)}."""
    by_memory: dict[str, MemoryWeights] = {}
    for key in keys:
        for memory_id, weight, updated_s in rows.get(key, ()):
            by_memory.setdefault(memory_id, {})[key] = (weight, updated_s)
    return by_memory

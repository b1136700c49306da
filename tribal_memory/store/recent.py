"""Rows written since the last ``optimize()``, compared in memory for near-duplicate checks.

See :class:`RecentRows`; :meth:`tribal_memory.store.lancedb.LanceMemoryStore.nearest`
uses it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from tribal_memory.base.models import SHARED_OWNER, SearchFilters
from tribal_memory.embeddings.base import Vector, unit_rows

MAX_ROWS = 50_000
"""Most rows :class:`RecentRows` holds (past it, near-duplicate checks take the slow path)."""


class RecentRows:
    """Vectors of the rows this process wrote since the last ``optimize()``, by owner.

    Those rows are outside the IVF index until ``optimize()`` folds them in,
    and LanceDB answers a multi-vector query over unindexed rows by scanning
    them once per query vector, several times slower than the indexed search.
    When the index's unindexed rows are exactly these,
    :meth:`~tribal_memory.store.lancedb.LanceMemoryStore.nearest` searches the
    index alone and these rows in memory (:func:`nearest_in`). Holds at most
    ``MAX_ROWS``; beyond that new rows are not recorded, the counts disagree
    and the slow path is taken.

    Not thread-safe: the store uses it under its write lock.
    """

    def __init__(self) -> None:
        self._by_owner: dict[str, dict[str, np.ndarray]] = {}
        self._owner_of: dict[str, str] = {}

    def __len__(self) -> int:
        return len(self._owner_of)

    def put(self, memory_id: str, owner: str, vector: Vector) -> None:
        """Record a written row (a rewrite of the same id replaces it)."""
        if memory_id not in self._owner_of and len(self._owner_of) >= MAX_ROWS:
            return
        self.drop([memory_id])
        unit = np.asarray(vector, dtype=np.float32)
        unit = unit / max(float(np.linalg.norm(unit)), 1e-12)
        self._by_owner.setdefault(owner, {})[memory_id] = unit
        self._owner_of[memory_id] = owner

    def drop(self, memory_ids: Iterable[str]) -> None:
        """Forget deleted (or rewritten) rows."""
        for memory_id in memory_ids:
            owner = self._owner_of.pop(memory_id, None)
            if owner is not None:
                rows = self._by_owner[owner]
                del rows[memory_id]
                if not rows:
                    del self._by_owner[owner]

    def ids(self) -> list[str]:
        """The ids of the rows held now (a copy)."""
        return list(self._owner_of)

    def matrices(self, owners: Iterable[str]) -> tuple[list[str], np.ndarray]:
        """(ids, unit vectors ``(n, dim)``) of the rows of ``owners`` (a copy)."""
        ids: list[str] = []
        vectors: list[np.ndarray] = []
        for owner in owners:
            for memory_id, vector in self._by_owner.get(owner, {}).items():
                ids.append(memory_id)
                vectors.append(vector)
        return ids, np.stack(vectors) if vectors else np.zeros((0, 0), dtype=np.float32)


def owners_only(filters: SearchFilters) -> list[str] | None:
    """The owners ``filters`` admits when it filters on owner alone, else None."""
    if filters != SearchFilters(owner=filters.owner, include_shared=filters.include_shared):
        return None
    if filters.owner is None:
        return None
    owners = [filters.owner]
    if filters.include_shared and filters.owner != SHARED_OWNER:
        owners.append(SHARED_OWNER)
    return owners


def nearest_in(
    vectors: Vector, ids: Sequence[str], matrix: np.ndarray
) -> list[tuple[str, float] | None]:
    """Per row of ``vectors``, the most cosine-similar of ``ids`` (rows of unit ``matrix``)."""
    if not ids:
        return [None] * len(vectors)
    queries = unit_rows(vectors)
    similarity = queries @ matrix.T
    best = similarity.argmax(axis=1)
    return [(ids[j], float(similarity[i, j])) for i, j in enumerate(best)]


def better(
    first: list[tuple[str, float] | None], second: list[tuple[str, float] | None]
) -> list[tuple[str, float] | None]:
    """Per position, the more similar of two answers (None loses)."""
    return [
        b if a is None or (b is not None and b[1] > a[1]) else a
        for a, b in zip(first, second, strict=True)
    ]

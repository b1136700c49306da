"""Exact vector search of a small table in memory, without LanceDB's query engine.

Over 10,000 rows a LanceDB vector query took 5.6-6.3 ms on the IVF index
and 10 ms exact (bypassing it), where numpy's product of the same unit
vectors with the query took 0.4 ms (in-process, 2 cores): at that size the
query's planning and execution cost far more than the arithmetic. A store of
up to ``max_rows`` rows keeps a copy of its vectors and row keys here, made
for one table version, and a vector search whose filter it can evaluate is
answered from it while the table is still at that version. At 100,000 rows
the product took 9.8 ms on both cores, more than the IVF index, so larger
tables are never copied.

The first search that finds the copy missing or made for an older version
brings it up to date, reading only the rows it lacks. A search therefore
sees exactly the rows LanceDB would show it (this handle's own writes at
once, other processes' after ``read_consistency_s``), every search of one
version is answered from the copy (the same question, the same scores), and
the answer is the exact top-k where the IVF index is approximate. A capture
batch's near-duplicate check is answered from it as well
(:meth:`VectorMirror.nearest_groups`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from tribal_memory.base.models import SHARED_OWNER, SearchFilters
from tribal_memory.embeddings.base import Vector, unit_rows
from tribal_memory.store.base import RowKey
from tribal_memory.store.lance_keys import KEY_COLUMNS, row_ids
from tribal_memory.store.lance_rows import owner_and_kind_only, vectors_of
from tribal_memory.store.lance_table import TableHandle
from tribal_memory.store.recent import nearest_in

NearestRow = tuple[str, float] | None
"""(memory_id, cosine similarity in [-1, 1]) of a vector's nearest row; None: no row passes."""


class _Rows:
    """Unit vectors with room to append, shared by the copies that only appended to it.

    A copy of ``n`` rows views the first ``n``; a later version's new rows are
    written after them in place (no copy of the rows before) when that copy
    is the last one appended to (``used == n``) and they fit. Otherwise, as
    after a deletion or when two reads start from the same copy, the rows are
    copied into a new buffer with :data:`HEADROOM` to spare. Without it every
    write copied all the vectors (19 MB at 12.5k rows): merging a write of
    256 rows took 13-24 ms in-process, where the whole read of such a write
    now takes 5-8 ms (:meth:`VectorMirror._read`).
    """

    __slots__ = ("array", "used")

    def __init__(self, *parts: np.ndarray) -> None:
        rows = sum(len(part) for part in parts)
        spare = max(int(rows * HEADROOM), MIN_HEADROOM)
        self.array = np.empty((rows + spare, parts[-1].shape[1]), np.float32)
        self.used = 0
        for part in parts:
            self.array[self.used : self.used + len(part)] = part
            self.used += len(part)

    def view(self) -> np.ndarray:
        """The rows written so far, ``(used, dim)``."""
        return self.array[: self.used]

    @staticmethod
    def appended(rows: _Rows | None, before: np.ndarray, unit: np.ndarray) -> _Rows:
        """Rows holding ``before`` (``rows``' first ones, if given), then ``unit`` (not empty)."""
        n = len(before)
        if rows is None or rows.used != n or n + len(unit) > len(rows.array):
            return _Rows(before, unit) if n else _Rows(unit)
        rows.array[n : n + len(unit)] = unit
        rows.used = n + len(unit)
        return rows


HEADROOM = 0.25
"""A new vector buffer has room for this share more rows than it holds..."""
MIN_HEADROOM = 1024
"""...and for at least this many."""


@dataclass(frozen=True, slots=True)
class _Copy:
    """The table's rows at one version: row ids, keys, codes of owner and kind, unit vectors."""

    version: int
    row_ids: np.ndarray  # (n,) int64, LanceDB's _rowid
    keys: list[RowKey]
    owner_codes: np.ndarray  # (n,) int32, values of ``owners``
    owners: dict[str, int]
    kind_codes: np.ndarray  # (n,) int32, values of ``kinds``
    kinds: dict[str, int]
    unit: np.ndarray  # (n, dim) float32, rows L2-normalised (a view of ``rows``)
    rows: _Rows | None = None

    @classmethod
    def empty(cls) -> _Copy:
        """A copy of no row, to merge the first read into."""
        none = np.zeros(0, dtype=np.int32)
        return cls(-1, np.zeros(0, dtype=np.int64), [], none, {}, none, {}, np.zeros((0, 0)))

    def merged(self, version: int, kept: np.ndarray | None, added: pa.Table | None) -> _Copy:
        """This copy's rows where ``kept`` (bool, (n,); None: all) is true, then those of ``added``.

        ``added`` holds the key columns, ``kind``, ``vector`` and ``_rowid`` (None: no row).
        """
        owners, kinds = dict(self.owners), dict(self.kinds)
        if kept is None or bool(kept.all()):
            base = self
        else:
            keys = [key for key, keep in zip(self.keys, kept.tolist(), strict=True) if keep]
            unit = self.unit[kept] if len(keys) else np.zeros((0, 0), dtype=np.float32)
            base = _Copy(
                self.version,
                self.row_ids[kept],
                keys,
                self.owner_codes[kept],
                owners,
                self.kind_codes[kept],
                kinds,
                unit,
            )
        if added is None or not added.num_rows:
            return _Copy(
                version,
                base.row_ids,
                base.keys,
                base.owner_codes,
                owners,
                base.kind_codes,
                kinds,
                base.unit,
                base.rows,
            )
        rows = _Rows.appended(base.rows, base.unit, unit_rows(vectors_of(added)))
        columns = [added.column(name).to_pylist() for name in KEY_COLUMNS]
        return _Copy(
            version,
            np.concatenate([base.row_ids, row_ids(added)]),
            base.keys + list(zip(*columns, strict=True)),
            np.concatenate([base.owner_codes, _codes(added.column("owner"), owners)]),
            owners,
            np.concatenate([base.kind_codes, _codes(added.column("kind"), kinds)]),
            kinds,
            rows.view(),
            rows,
        )

    def nearest(
        self, vector: Vector, filters: SearchFilters, k: int
    ) -> list[tuple[int, RowKey, float]]:
        """Up to ``k`` rows passing ``filters``, nearest first: (row id, key, cosine in [-1, 1]).

        Ties keep the copy's row order.
        """
        if not len(self.row_ids) or k < 1:
            return []
        query = np.asarray(vector, dtype=np.float32)
        query = query / max(float(np.linalg.norm(query)), 1e-12)
        # einsum's own loop, not BLAS: numpy's BLAS runs a product this size on
        # threads that spin between calls, which cost a server search 17 ms of
        # CPU (26 to 43) on 2 cores; einsum took 0.7 ms on one over 10k rows.
        scores = np.einsum("ij,j->i", self.unit, query)
        passing = self._mask(filters)
        if passing is not None:
            scores[~passing] = -np.inf
        if k < len(scores):
            best = np.argpartition(-scores, k - 1)[:k]
            best = best[np.lexsort((best, -scores[best]))]
        else:
            best = np.lexsort((np.arange(len(scores)), -scores))
        return [
            (int(self.row_ids[i]), self.keys[i], float(scores[i]))
            for i in best.tolist()
            if scores[i] > -np.inf
        ]

    def nearest_each(self, vectors: np.ndarray, filters: SearchFilters) -> list[NearestRow]:
        """Per row of ``vectors`` (unit, ``(n, dim)``), its nearest row passing ``filters``.

        (memory_id, cosine similarity in [-1, 1]) each; None for all when no row passes.
        """
        passing = self._mask(filters)
        rows = np.arange(len(self.keys)) if passing is None else np.flatnonzero(passing)
        ids = [self.keys[i][0] for i in rows.tolist()]
        return nearest_in(vectors, ids, self.unit[rows]) if ids else [None] * len(vectors)

    def _mask(self, filters: SearchFilters) -> np.ndarray | None:
        """Rows passing the owner and kind filters (None: every row)."""
        mask: np.ndarray | None = None
        if filters.owner is not None:
            names = [filters.owner]
            if filters.include_shared:
                names.append(SHARED_OWNER)
            mask = np.isin(self.owner_codes, _known(self.owners, names))
        if filters.kinds:
            kinds = np.isin(self.kind_codes, _known(self.kinds, filters.kinds))
            mask = kinds if mask is None else mask & kinds
        if filters.exclude_kinds:
            kept = ~np.isin(self.kind_codes, _known(self.kinds, filters.exclude_kinds))
            mask = kept if mask is None else mask & kept
        return mask


def _codes(column: pa.ChunkedArray, codes: dict[str, int]) -> np.ndarray:
    """Integer codes of a string column's values, adding a code for each new value to ``codes``."""
    values = column.to_pylist()
    for value in set(values) - codes.keys():
        codes[value] = len(codes)
    return np.fromiter((codes[v] for v in values), dtype=np.int32, count=len(values))


def _known(codes: dict[str, int], names: tuple[str, ...] | list[str]) -> list[int]:
    return [codes[name] for name in names if name in codes]


class VectorMirror:
    """The in-memory copy of one table handle's vectors, while the table is small.

    Every method runs on the store's event loop (one thread), so the copy
    needs no lock.

    Args:
        handle: The open memory table (read at each call: :meth:`TableHandle.reopen`).
        max_rows: Most rows copied (0: never copy; every search goes to LanceDB).
    """

    def __init__(self, handle: TableHandle, max_rows: int) -> None:
        self._handle = handle
        self.max_rows = max_rows
        self._copy: _Copy | None = None
        self._too_large: int | None = None  # a version found over max_rows
        self._reading: tuple[int, asyncio.Future[_Copy | None]] | None = None

    @property
    def active(self) -> bool:
        """Whether a copy is held: the table was small enough at its last read."""
        return self._copy is not None

    async def nearest(
        self, vector: Vector, filters: SearchFilters, k: int
    ) -> list[tuple[int, RowKey, float]] | None:
        """The exact top ``k`` (as :meth:`_Copy.nearest`), or None when the copy cannot answer.

        A copy older than the table is first brought up to date (searches
        asking meanwhile wait for the same read), so every search of one
        table version gets its answer from the same place and the same
        question gets the same scores.

        None: the filter is not one the copy evaluates, the table is over
        ``max_rows``, or it changed during the read (LanceDB answers).
        """
        if not owner_and_kind_only(filters):
            return None
        found = await self._current()
        return None if found is None else found.nearest(vector, filters, k)

    async def nearest_groups(
        self, groups: Sequence[tuple[Vector, SearchFilters]]
    ) -> list[list[NearestRow]] | None:
        """Per ``(vectors, filters)`` group, each vector's nearest row (:meth:`_Copy.nearest_each`).

        The near-duplicate check of a capture batch
        (:meth:`~.lance_search.LanceSearch.nearest`), exact. Timed inside a
        server at 12.5k rows, the check of a batch of 256 (20 owners) took
        90-128 ms on LanceDB's IVF index (one query per owner) and 41-60 ms
        here, the read of the previous batch's rows into the copy included.

        None when the copy cannot answer every group (as :meth:`nearest`).
        """
        if not all(owner_and_kind_only(filters) for _, filters in groups):
            return None
        found = await self._current()
        if found is None:
            return None
        return [found.nearest_each(unit_rows(vectors), filters) for vectors, filters in groups]

    async def _current(self) -> _Copy | None:
        """The copy at the table's current version (read first if older); None: no copy."""
        if self.max_rows <= 0:
            return None
        version = await self._handle.table.version()
        found = self._copy
        if found is None or found.version != version:
            if self._too_large == version:
                return None
            if self._reading is None or self._reading[0] != version:
                self._reading = (version, asyncio.ensure_future(self._read(version)))
            # shield: a cancelled search leaves the read to the others waiting for it
            found = await asyncio.shield(self._reading[1])
        return found

    async def _read(self, version: int) -> _Copy | None:
        """Bring the copy to ``version``; None when the table is too large or changes meanwhile.

        Only the rows the copy lacks are read: those with a row id above the
        copy's highest (LanceDB numbers a write's rows after every row before
        it). When the count shows that some of the copy's rows are gone
        besides, the row ids are listed to find which; a compaction, which
        moves every row, is a read of all. After a write of 256 rows at 12.5k
        this took 5-8 ms in-process; listing every row id and taking the new
        rows by id took 33-117 ms (13-22 without the copy of every vector).
        """
        table = self._handle.table
        try:
            rows = await table.count_rows()
            if rows > self.max_rows:
                self._too_large, self._copy = version, None
                return None
            base = self._copy or _Copy.empty()
            known = len(base.row_ids)
            query = table.query().select([*KEY_COLUMNS, "kind", "vector"]).with_row_id()
            if known:
                query = query.where(f"_rowid > {int(base.row_ids.max())}")
            added = await query.to_arrow()
            kept: np.ndarray | None = None  # all the copy's rows are still there
            if known + added.num_rows != rows:
                listed = await table.query().select(["chunk_index"]).with_row_id().to_arrow()
                kept = np.isin(base.row_ids, row_ids(listed))
            if await table.version() != version:
                return None
            self._copy = base.merged(version, kept, added)
            return self._copy
        except Exception:  # noqa: BLE001 - LanceDB answers; the next search reads again
            self._copy = None
            return None

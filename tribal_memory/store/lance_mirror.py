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
the answer is the exact top-k where the IVF index is approximate.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from tribal_memory.base.models import SHARED_OWNER, SearchFilters
from tribal_memory.embeddings.base import Vector, unit_rows
from tribal_memory.store.base import RowKey
from tribal_memory.store.lance_keys import KEY_COLUMNS, row_ids
from tribal_memory.store.lance_rows import owner_and_kind_only, vectors_of
from tribal_memory.store.lance_table import TableHandle


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
    unit: np.ndarray  # (n, dim) float32, rows L2-normalised

    @classmethod
    def empty(cls) -> _Copy:
        """A copy of no row, to merge the first read into."""
        none = np.zeros(0, dtype=np.int32)
        return cls(-1, np.zeros(0, dtype=np.int64), [], none, {}, none, {}, np.zeros((0, 0)))

    def merged(self, version: int, kept: np.ndarray, added: pa.Table | None) -> _Copy:
        """This copy's rows where ``kept`` (bool, (n,)) is true, then the rows of ``added``.

        ``added`` holds the key columns, ``kind``, ``vector`` and ``_rowid`` (None: no row).
        """
        owners, kinds = dict(self.owners), dict(self.kinds)
        keys = [key for key, keep in zip(self.keys, kept.tolist(), strict=True) if keep]
        if added is None or not added.num_rows:
            return _Copy(
                version,
                self.row_ids[kept],
                keys,
                self.owner_codes[kept],
                owners,
                self.kind_codes[kept],
                kinds,
                self.unit[kept] if len(keys) else np.zeros((0, 0), dtype=np.float32),
            )
        unit = unit_rows(vectors_of(added))
        columns = [added.column(name).to_pylist() for name in KEY_COLUMNS]
        return _Copy(
            version,
            np.concatenate([self.row_ids[kept], row_ids(added)]),
            keys + list(zip(*columns, strict=True)),
            np.concatenate([self.owner_codes[kept], _codes(added.column("owner"), owners)]),
            owners,
            np.concatenate([self.kind_codes[kept], _codes(added.column("kind"), kinds)]),
            kinds,
            np.concatenate([self.unit[kept], unit]) if len(keys) else unit,
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
        if self.max_rows <= 0 or not owner_and_kind_only(filters):
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
            if found is None:
                return None
        return found.nearest(vector, filters, k)

    async def _read(self, version: int) -> _Copy | None:
        """Bring the copy to ``version``; None when the table is too large or changes meanwhile.

        Only the rows the copy lacks are read (by row id, after one scan of
        the row ids): a write costs a read of its own rows, a compaction
        (which moves every row) a read of all.
        """
        table = self._handle.table
        try:
            if await table.count_rows() > self.max_rows:
                self._too_large, self._copy = version, None
                return None
            listed = await table.query().select(["chunk_index"]).with_row_id().to_arrow()
            ids = row_ids(listed)
            base = self._copy or _Copy.empty()
            missing = ids[~np.isin(ids, base.row_ids)].tolist()
            columns = [*KEY_COLUMNS, "kind", "vector"]
            added = (
                await table.take_row_ids(missing).select(columns).with_row_id().to_arrow()
                if missing
                else None
            )
            if await table.version() != version:
                return None
            self._copy = base.merged(version, np.isin(base.row_ids, ids), added)
            return self._copy
        except Exception:  # noqa: BLE001 - LanceDB answers; the next search reads again
            self._copy = None
            return None

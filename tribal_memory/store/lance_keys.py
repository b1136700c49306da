"""Every row's key in memory, so a search reads none of its candidates' rows from LanceDB.

Fusion and neighbour smoothing read four small columns of every candidate
(:data:`KEY_COLUMNS`). Kept only for the rows searches had returned, they
came from one ``take_row_ids`` per search path for the rest; at a million
memories most of a new question's 150 + 150 candidates are such rows, and
that read took 7.1 ms a path (300 random rows, 9.9 ms of CPU), where one
scan of the four columns of all 1,002,560 rows took 0.29 s and 65 MB, and
looking up 150 keys in what it read 0.5 ms (in-process, 2 cores). So
:class:`~.lance_rowcache.RowCache` keeps a :class:`KeyTable` of every row
of a table of up to ``row_keys_max_rows`` rows (a setting; about 65 MB a
million rows), read in one scan.

A key table never gives a wrong key. A row id's row is never rewritten
(see :mod:`.lance_rowcache`), so the table can only lack rows written since
it was read, which are read by row id as before, and hold rows deleted or
moved since, whose row ids no search returns. It is read again once
:data:`RELOAD_SHARE` of its rows (at least :data:`RELOAD_MIN_MISSES`) had
to be read beside it: a compaction moves every row, and a store that keeps
growing adds new ones. A scan costs about as much per row (0.3 microseconds)
as a read by row id costs per hundred rows (23 microseconds a row).

The same scan can read the whole rows (every column but the vector) when
they fit in ``max_bytes``, so a search's hits come from memory too: a take
of 10 hits by row id took 3.0 ms p50 over 10,000 rows (1.7 ms for the
memory id alone: LanceDB's cost per query), looking them up in the scanned
rows 0.38 ms with their conversion to memories; the scan of every column
took 8.6-19.7 ms at 10,000 rows, 115 ms at 102,560 (17.4 MB) and 0.93 s at
1,002,560 (170 MB), against 55 and 440 ms for the keys alone (in-process,
2 cores, the generated corpus of ``bench perf``). What holds for a row id's
key holds for its whole row (an update writes a new row).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from lancedb.table import AsyncTable

from tribal_memory.store.base import RowKey
from tribal_memory.store.lance_rows import COLUMNS

KEY_COLUMNS = ("memory_id", "owner", "doc_id", "chunk_index")
"""What fusion and neighbour smoothing read of every candidate (:data:`RowKey`)."""
RELOAD_SHARE = 0.01
"""Share of a key table's rows read by row id beside it after which it is read again."""
RELOAD_MIN_MISSES = 256
"""Fewest rows read by row id beside a key table before it is read again."""
RECHECK_AFTER_MISSES = 10_000
"""Rows read by row id after which a table found too large is counted again."""
MIN_ROW_BYTES = 128
"""Fewest bytes a whole row takes in Arrow memory (a memory id alone is 36): a table
of more rows than ``max_bytes / MIN_ROW_BYTES`` is not scanned for its whole rows."""


def row_ids(table: pa.Table) -> np.ndarray:
    """The ``_rowid`` column of a LanceDB answer as (n,) int64."""
    return np.asarray(table.column("_rowid").to_numpy(), dtype=np.int64)


@dataclass(frozen=True, slots=True)
class KeyTable:
    """The keys of a table's rows as of one scan.

    Attributes:
        row_ids: (n,) int64, LanceDB's ``_rowid`` of each row, ascending.
        columns: The :data:`KEY_COLUMNS` of those rows, in the same order;
            every memory column (:data:`~.lance_rows.COLUMNS`) when the
            whole rows were read (:attr:`whole`).
    """

    row_ids: np.ndarray
    columns: pa.Table

    @property
    def whole(self) -> bool:
        """Whether the table holds the rows' memories, not only their keys."""
        return set(COLUMNS) <= set(self.columns.column_names)

    def reload_after(self) -> int:
        """Rows read by row id beside this table after which it is read again."""
        return max(RELOAD_MIN_MISSES, int(RELOAD_SHARE * len(self.row_ids)))

    @classmethod
    def read_from(cls, scanned: pa.Table) -> KeyTable:
        """The key table of ``scanned`` (key or memory columns and ``_rowid``, any order)."""
        ids = row_ids(scanned)
        names = COLUMNS if set(COLUMNS) <= set(scanned.column_names) else KEY_COLUMNS
        columns = scanned.select(list(names))
        if len(ids) > 1 and not bool(np.all(ids[1:] > ids[:-1])):
            order = np.argsort(ids, kind="stable")
            ids, columns = ids[order], columns.take(pa.array(order))
        return cls(ids, columns.combine_chunks())

    def find(self, refs: Sequence[int]) -> dict[int, RowKey]:
        """The key of each of ``refs`` (row ids) that the table holds; the others are left out."""
        held, rows = self._held(refs, KEY_COLUMNS)
        if rows is None:
            return {}
        keys = zip(*(rows.column(name).to_pylist() for name in KEY_COLUMNS), strict=True)
        return dict(zip(held, keys, strict=True))

    def rows(self, refs: Sequence[int]) -> pa.Table | None:
        """The memory columns and ``_rowid`` of those of ``refs`` the table holds, in their order.

        None when none is held or the table holds keys only (not :attr:`whole`).
        """
        if not self.whole:
            return None
        held, rows = self._held(refs, COLUMNS)
        if rows is None:
            return None
        return rows.append_column("_rowid", pa.array(held, type=pa.int64()))

    def _held(self, refs: Sequence[int], names: Sequence[str]) -> tuple[list[int], pa.Table | None]:
        """The row ids of ``refs`` the table holds and their ``names`` columns (None: none)."""
        if not len(self.row_ids) or not refs:
            return [], None
        wanted = np.asarray(refs, dtype=np.int64)
        at = np.minimum(np.searchsorted(self.row_ids, wanted), len(self.row_ids) - 1)
        held = self.row_ids[at] == wanted
        if not held.any():
            return [], None
        return wanted[held].tolist(), self.columns.select(list(names)).take(pa.array(at[held]))


async def read_keys(table: AsyncTable, max_rows: int, max_bytes: int = 0) -> KeyTable | None:
    """Every row's key, in one scan; None when the table has more than ``max_rows`` rows.

    The whole rows are read instead when they take at most ``max_bytes`` of
    Arrow memory (0: never); a scan that passes it is stopped there and the
    keys alone are read.

    LanceDB's errors pass.
    """
    count = await table.count_rows()
    if count > max_rows:
        return None
    if count * MIN_ROW_BYTES <= max_bytes:
        whole = await _whole_rows(table, max_bytes)
        if whole is not None:
            return KeyTable.read_from(whole)
    scanned = await table.query().select(list(KEY_COLUMNS)).with_row_id().to_arrow()
    return KeyTable.read_from(scanned)


async def _whole_rows(table: AsyncTable, max_bytes: int) -> pa.Table | None:
    """Every row's memory columns and ``_rowid``; None once they pass ``max_bytes``."""
    reader = await table.query().select(list(COLUMNS)).with_row_id().to_batches()
    batches: list[pa.RecordBatch] = []
    read = 0
    async for batch in reader:
        read += batch.nbytes
        if read > max_bytes:
            return None
        batches.append(batch)
    return pa.Table.from_batches(batches, schema=reader.schema)

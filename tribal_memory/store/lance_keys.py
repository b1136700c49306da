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
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from lancedb.table import AsyncTable

from tribal_memory.store.base import RowKey

KEY_COLUMNS = ("memory_id", "owner", "doc_id", "chunk_index")
"""What fusion and neighbour smoothing read of every candidate (:data:`RowKey`)."""
RELOAD_SHARE = 0.01
"""Share of a key table's rows read by row id beside it after which it is read again."""
RELOAD_MIN_MISSES = 256
"""Fewest rows read by row id beside a key table before it is read again."""
RECHECK_AFTER_MISSES = 10_000
"""Rows read by row id after which a table found too large is counted again."""


def row_ids(table: pa.Table) -> np.ndarray:
    """The ``_rowid`` column of a LanceDB answer as (n,) int64."""
    return np.asarray(table.column("_rowid").to_numpy(), dtype=np.int64)


@dataclass(frozen=True, slots=True)
class KeyTable:
    """The keys of a table's rows as of one scan.

    Attributes:
        row_ids: (n,) int64, LanceDB's ``_rowid`` of each row, ascending.
        columns: The :data:`KEY_COLUMNS` of those rows, in the same order.
    """

    row_ids: np.ndarray
    columns: pa.Table

    def reload_after(self) -> int:
        """Rows read by row id beside this table after which it is read again."""
        return max(RELOAD_MIN_MISSES, int(RELOAD_SHARE * len(self.row_ids)))

    @classmethod
    def read_from(cls, scanned: pa.Table) -> KeyTable:
        """The key table of ``scanned`` (the key columns and ``_rowid``, in any order)."""
        ids = row_ids(scanned)
        columns = scanned.select(list(KEY_COLUMNS))
        if len(ids) > 1 and not bool(np.all(ids[1:] > ids[:-1])):
            order = np.argsort(ids, kind="stable")
            ids, columns = ids[order], columns.take(pa.array(order))
        return cls(ids, columns.combine_chunks())

    def find(self, refs: Sequence[int]) -> dict[int, RowKey]:
        """The key of each of ``refs`` (row ids) that the table holds; the others are left out."""
        if not len(self.row_ids) or not refs:
            return {}
        wanted = np.asarray(refs, dtype=np.int64)
        at = np.minimum(np.searchsorted(self.row_ids, wanted), len(self.row_ids) - 1)
        held = self.row_ids[at] == wanted
        if not held.any():
            return {}
        rows = self.columns.take(pa.array(at[held]))
        keys = zip(*(rows.column(name).to_pylist() for name in KEY_COLUMNS), strict=True)
        return dict(zip(wanted[held].tolist(), keys, strict=True))


async def read_keys(table: AsyncTable, max_rows: int) -> KeyTable | None:
    """Every row's key, in one scan; None when the table has more than ``max_rows`` rows.

    LanceDB's errors pass.
    """
    if await table.count_rows() > max_rows:
        return None
    scanned = await table.query().select(list(KEY_COLUMNS)).with_row_id().to_arrow()
    return KeyTable.read_from(scanned)

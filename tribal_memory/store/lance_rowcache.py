"""What a search reads of its candidates' rows, by LanceDB row id, and what it keeps.

A vector or BM25 search asks LanceDB for row ids and scores only: reading
any column of the 150 candidates of a path is a second stage of LanceDB's
plan that costs about as much CPU as the search itself (issue 30). Fusion
and neighbour smoothing need four small columns of every candidate
(:data:`KEY_COLUMNS`), the hits the whole row. :class:`RowCache` keeps both
by row id: the keys of every row seen (bounded), and the whole memories of
recent hits (a small LRU), reading what it lacks with one
``take_row_ids`` per search.

Why a row id may key a cache: without stable row ids (this store does not
enable them), LanceDB's row id is the row's address (fragment id << 32 |
offset). A fragment's rows are never rewritten in place: an update
(``merge_insert`` with every column) or a compaction writes the rows into new
fragments, deleting the old rows, and fragment ids are never reused. So what
a row id held once it holds for as long as a search can return it. Every
memory read is still checked against the memory id the search found, and
read by memory id where they differ.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Sequence

import pyarrow as pa
from lancedb.table import AsyncTable

from tribal_memory.base.models import Memory
from tribal_memory.store.base import RowKey, RowRef
from tribal_memory.store.event_loop import EventLoop
from tribal_memory.store.lance_rows import COLUMNS, in_list, memory_rows, to_memory

KEY_COLUMNS = ("memory_id", "owner", "doc_id", "chunk_index")
"""What fusion and neighbour smoothing read of every candidate (:data:`RowKey`)."""
MAX_KEYS = 250_000
"""Row keys kept (about 60 MB at most); all are dropped when full."""
MAX_MEMORIES = 4096
"""Whole memories of recent hits kept (least recently used dropped first)."""


class RowCache:
    """Keys and memories of the table's rows by row id, read from the table on a miss.

    Args:
        table: The open memory table.
        loop: The event loop every LanceDB call runs on.
        max_keys: Row keys kept (all dropped when full).
        max_memories: Whole memories kept (least recently used dropped).
    """

    def __init__(
        self,
        table: AsyncTable,
        loop: EventLoop,
        *,
        max_keys: int = MAX_KEYS,
        max_memories: int = MAX_MEMORIES,
    ) -> None:
        self._table = table
        self._loop = loop
        self._max_keys = max_keys
        self._max_memories = max_memories
        self._keys: dict[int, RowKey] = {}
        self._memories: OrderedDict[int, Memory] = OrderedDict()
        self._lock = threading.Lock()

    async def keys(self, refs: Sequence[int]) -> list[RowKey | None]:
        """The key of each row id, read in one ``take`` for those not kept (on the loop).

        Returns:
            One key per row id, None for a row the table no longer has.
        """
        with self._lock:
            missing = [r for r in refs if r not in self._keys]
        if missing:
            query = self._table.take_row_ids(missing).select(list(KEY_COLUMNS)).with_row_id()
            self._keep_keys(await query.to_arrow())
        with self._lock:
            return [self._keys.get(r) for r in refs]

    def memories(self, rows: Sequence[tuple[RowRef, str]]) -> dict[str, Memory]:
        """See :meth:`tribal_memory.store.base.RowSource.memories` (blocks on the loop).

        Rows not kept are read in one ``take`` by row id; one whose memory id
        is not the expected one (or that is gone) is read by memory id.
        """
        found: dict[str, Memory] = {}
        missing: list[tuple[int, str]] = []
        with self._lock:
            for ref, memory_id in rows:
                memory = self._memories.get(int(ref))
                if memory is not None and memory.memory_id == memory_id:
                    self._memories.move_to_end(int(ref))
                    found[memory_id] = memory
                else:
                    missing.append((int(ref), memory_id))
        if missing:
            found.update(self._loop.run("read", self._read(missing)))
        return found

    async def _read(self, rows: Sequence[tuple[int, str]]) -> dict[str, Memory]:
        query = self._table.take_row_ids([r for r, _ in rows]).select(list(COLUMNS)).with_row_id()
        table = await query.to_arrow()
        by_ref = dict(
            zip(
                table.column("_rowid").to_pylist(),
                (to_memory(row) for row in memory_rows(table)),
                strict=True,
            )
        )
        found: dict[str, Memory] = {}
        lost: list[str] = []
        with self._lock:
            for ref, memory_id in rows:
                memory = by_ref.get(ref)
                if memory is None or memory.memory_id != memory_id:
                    lost.append(memory_id)
                    continue
                found[memory_id] = memory
                self._memories[ref] = memory
                if len(self._memories) > self._max_memories:
                    self._memories.popitem(last=False)
        if lost:  # gone from that address since the search: read by id (absent if deleted)
            where = f"memory_id IN ({in_list(lost)})"
            again = await self._table.query().where(where).select(list(COLUMNS)).to_arrow()
            found.update((m.memory_id, m) for m in map(to_memory, memory_rows(again)))
        return found

    def _keep_keys(self, table: pa.Table) -> None:
        refs = table.column("_rowid").to_pylist()
        columns = [table.column(name).to_pylist() for name in KEY_COLUMNS]
        with self._lock:
            if len(self._keys) + len(refs) > self._max_keys:
                self._keys.clear()
            self._keys.update(zip(refs, zip(*columns, strict=True), strict=True))


class RowCounts:
    """Row counts per filter, kept until this handle writes or ``max_age_s`` passes.

    A search counts the rows passing its filters (the BM25 fallback and the
    choice of exact search need it); the count changes only with a write.
    This process's writes drop every count at once (:meth:`clear`); another
    process's writes are seen within ``max_age_s``, the read consistency
    interval within which this handle's reads see them at all.

    Args:
        max_age_s: Seconds a count is kept (0: never kept).
    """

    def __init__(self, max_age_s: float) -> None:
        self._max_age_s = max_age_s
        self._counts: dict[str | None, tuple[int, float]] = {}
        self._lock = threading.Lock()
        self._generation = 0

    def get(self, where: str | None) -> int | None:
        """The kept count of rows passing ``where`` (None: not kept or too old)."""
        with self._lock:
            kept = self._counts.get(where)
        if kept is None or time.monotonic() - kept[1] >= self._max_age_s:
            return None
        return kept[0]

    def generation(self) -> int:
        """The number of :meth:`clear` calls so far (a count read before one is stale)."""
        with self._lock:
            return self._generation

    def put(self, where: str | None, count: int, generation: int) -> None:
        """Keep ``count`` for ``where`` unless this handle wrote since ``generation``."""
        with self._lock:
            if generation == self._generation and len(self._counts) < MAX_COUNTS:
                self._counts[where] = (count, time.monotonic())

    def clear(self) -> None:
        """Drop every count (this handle wrote)."""
        with self._lock:
            self._generation += 1
            self._counts.clear()


MAX_COUNTS = 4096
"""Filters whose counts are kept at once."""

"""What a search reads of its candidates' rows, by LanceDB row id, and what it keeps.

A vector or BM25 search asks LanceDB for row ids and scores only: reading
any column of the 150 candidates of a path is a second stage of LanceDB's
plan that costs about as much CPU as the search itself (issue 30). Fusion
and neighbour smoothing need four small columns of every candidate
(:data:`~.lance_keys.KEY_COLUMNS`), the hits the whole row. :class:`RowCache`
keeps both by row id: the keys of every row of a table of up to
``max_table_rows`` rows (:mod:`.lance_keys`) and of the rows read since,
and the whole memories of recent hits (a small LRU), reading what it lacks
with one ``take_row_ids`` per search; a table whose rows fit in
``max_table_bytes`` has its whole rows in the key table, and a search's hits
come from there. A read by id of a recent hit takes its row again by row id
(:meth:`RowCache.get`).

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

import asyncio
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence

import pyarrow as pa

from tribal_memory.base.config import DEFAULT_ROW_KEYS_MAX_ROWS
from tribal_memory.base.models import Memory
from tribal_memory.store.base import RowKey, RowRef
from tribal_memory.store.event_loop import EventLoop
from tribal_memory.store.lance_keys import (
    KEY_COLUMNS,
    RECHECK_AFTER_MISSES,
    KeyTable,
    read_keys,
)
from tribal_memory.store.lance_rows import COLUMNS, in_list, memory_rows, to_memory
from tribal_memory.store.lance_table import TableHandle

MAX_KEYS = 250_000
"""Row keys kept beside the key table (about 60 MB at most); all are dropped when full."""
MAX_MEMORIES = 4096
"""Whole memories of recent hits kept (least recently used dropped first)."""


class RowCache:
    """Keys and memories of the table's rows by row id, read from the table on a miss.

    Args:
        handle: The open memory table (read at each call: :meth:`TableHandle.reopen`).
        loop: The event loop every LanceDB call runs on.
        max_keys: Row keys kept beside the key table (all dropped when full).
        max_memories: Whole memories kept (least recently used dropped).
        max_table_rows: Largest table whose keys are all read at once
            (:class:`~.lance_keys.KeyTable`; 0: never, each key is read
            when a search first returns its row).
        max_table_bytes: Most Arrow memory (bytes) of whole rows that scan
            reads instead of the keys, so hits are read from memory too
            (0: keys only; hits are read by row id).
    """

    def __init__(
        self,
        handle: TableHandle,
        loop: EventLoop,
        *,
        max_keys: int = MAX_KEYS,
        max_memories: int = MAX_MEMORIES,
        max_table_rows: int = DEFAULT_ROW_KEYS_MAX_ROWS,
        max_table_bytes: int = 0,
    ) -> None:
        self._handle = handle
        self._loop = loop
        self._max_keys = max_keys
        self._max_memories = max_memories
        self._max_table_rows = max_table_rows
        self._max_table_bytes = max_table_bytes
        self._keys: dict[int, RowKey] = {}
        self._memories: OrderedDict[int, Memory] = OrderedDict()
        self._refs: dict[str, int] = {}
        """The row id of each memory in ``_memories``, by memory id."""
        self._lock = threading.Lock()
        self._key_table: KeyTable | None = None
        self._reading: asyncio.Future[KeyTable | None] | None = None
        """The scan of every key in progress, or done (its table, None: too large or failed)."""
        self._misses = 0
        """Keys read by row id since the last scan started."""

    async def keys(self, refs: Sequence[int]) -> list[RowKey | None]:
        """The key of each row id, read in one ``take`` for those not kept (on the loop).

        The first call reads every row's key when the table has at most
        ``max_table_rows`` rows (calls meanwhile wait for the same scan), and
        again once :meth:`KeyTable.reload_after` rows were read beside it
        (a table found too large is counted again after
        ``RECHECK_AFTER_MISSES``).

        Returns:
            One key per row id; None for a row the table no longer has,
            unless its key was read before it went (a search that returned
            it then leaves it out when its memory cannot be read).
        """
        with self._lock:
            found = {r: self._keys[r] for r in refs if r in self._keys}
        missing = [r for r in refs if r not in found]
        if missing:
            key_table = await self._whole_table()
            if key_table is not None:
                found.update(key_table.find(missing))
                missing = [r for r in missing if r not in found]
        if missing:
            query = self._handle.table.take_row_ids(missing).select(list(KEY_COLUMNS)).with_row_id()
            found.update(self._keep_keys(await query.to_arrow()))
        return [found.get(r) for r in refs]

    async def _whole_table(self) -> KeyTable | None:
        """The key table, read first if not read yet (None: too large, off, or failed).

        Only the first scan is waited for; a later one runs while searches
        go on with the table it replaces.
        """
        if self._max_table_rows <= 0:
            return None
        if self._reading is None:
            self._misses = 0
            self._reading = asyncio.ensure_future(self._read_whole())
        if self._key_table is not None and not self._reading.done():
            return self._key_table  # read again in the background meanwhile
        # shield: a cancelled search leaves the scan to the others waiting for it
        return await asyncio.shield(self._reading)

    async def _read_whole(self) -> KeyTable | None:
        try:
            key_table = await read_keys(
                self._handle.table, self._max_table_rows, self._max_table_bytes
            )
        except Exception:  # noqa: BLE001 - keys are then read by row id; tried again later
            key_table = None
        if key_table is not None and not key_table.whole:
            # Past the bound (tables grow): later scans read the keys alone,
            # instead of up to max_table_bytes of rows again each time.
            self._max_table_bytes = 0
        with self._lock:
            self._key_table = key_table
            if key_table is not None:
                self._keys.clear()  # the table holds them
        return key_table

    def memories(self, rows: Sequence[tuple[RowRef, str]]) -> dict[str, Memory]:
        """See :meth:`tribal_memory.store.base.RowSource.memories` (may block on the loop).

        Rows not kept are looked up in the key table when it holds whole rows
        (:attr:`KeyTable.whole`), the rest read in one ``take`` by row id;
        one whose memory id is not the expected one (or that is gone) is read
        by memory id.
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
            key_table = self._key_table
        if missing and key_table is not None:
            held = key_table.rows([ref for ref, _ in missing])
            if held is not None:
                by_ref = self._kept(held)
                for ref, memory_id in missing:
                    memory = by_ref.get(ref)
                    if memory is not None and memory.memory_id == memory_id:
                        found[memory_id] = memory
                missing = [(ref, memory_id) for ref, memory_id in missing if memory_id not in found]
        if missing:
            found.update(self._loop.run("read", self._read(missing)))
        return found

    def get(self, memory_ids: Sequence[str]) -> dict[str, Memory]:
        """Memories by id, as :meth:`tribal_memory.store.base.MemoryStore.get` (blocks on the loop).

        A memory kept here (a recent hit, as an agent reads what its search
        returned) is read again by its row id, one ``take`` for all: cheaper
        than a filter on ``memory_id`` (a ``GET /v1/memories/{id}`` at 300
        rows took 5.3-5.7 against 6.7-7.6 ms p50:
        ``benchmarks/results/cache-hit-and-get.json``), and as current,
        since LanceDB's take leaves out deleted rows and an update writes a
        new row. The others, and any whose row has gone since, are read by
        memory id.

        Returns:
            ``{memory_id: memory}``; ids not stored are absent.

        Raises:
            StoreUnavailable: the read failed.
        """
        known: list[tuple[int, str]] = []
        others: list[str] = []
        with self._lock:
            for memory_id in dict.fromkeys(memory_ids):
                ref = self._refs.get(memory_id)
                if ref is None:
                    others.append(memory_id)
                else:
                    known.append((ref, memory_id))
        return self._loop.run("read", self._read(known, others))

    async def _read(
        self, rows: Sequence[tuple[int, str]], others: Sequence[str] = ()
    ) -> dict[str, Memory]:
        """The memories of ``rows`` (row id, memory id) read by row id, and of ``others`` by id.

        A row whose memory id is not the expected one, or that is gone, is
        read by memory id too (absent when deleted). Memories read are kept.
        """
        found: dict[str, Memory] = {}
        lost = list(others)
        if rows:
            query = self._handle.table.take_row_ids([r for r, _ in rows])
            by_ref = self._kept(await query.select(list(COLUMNS)).with_row_id().to_arrow())
            for ref, memory_id in rows:
                memory = by_ref.get(ref)
                if memory is None or memory.memory_id != memory_id:
                    lost.append(memory_id)
                else:
                    found[memory_id] = memory
        if lost:  # gone from that address since the search: read by id (absent if deleted)
            by_id = self._handle.table.query().where(f"memory_id IN ({in_list(lost)})")
            again = self._kept(await by_id.select(list(COLUMNS)).with_row_id().to_arrow())
            found.update((m.memory_id, m) for m in again.values())
        return found

    def _kept(self, table: pa.Table) -> dict[int, Memory]:
        """The memories of ``table`` (:data:`COLUMNS` and ``_rowid``) by row id, kept here."""
        by_ref = dict(
            zip(
                table.column("_rowid").to_pylist(),
                (to_memory(row) for row in memory_rows(table)),
                strict=True,
            )
        )
        with self._lock:
            for ref, memory in by_ref.items():
                self._memories[ref] = memory
                self._memories.move_to_end(ref)
                self._refs[memory.memory_id] = ref
            while len(self._memories) > self._max_memories:
                ref, dropped = self._memories.popitem(last=False)
                if self._refs.get(dropped.memory_id) == ref:
                    del self._refs[dropped.memory_id]
        return by_ref

    def _keep_keys(self, table: pa.Table) -> dict[int, RowKey]:
        """Keep the keys of ``table`` (key columns and ``_rowid``); returns them by row id.

        Counts them as misses of the key table: past its
        :meth:`KeyTable.reload_after` (or ``RECHECK_AFTER_MISSES`` without
        one), the next miss scans the table again.
        """
        refs = table.column("_rowid").to_pylist()
        columns = [table.column(name).to_pylist() for name in KEY_COLUMNS]
        read = dict(zip(refs, zip(*columns, strict=True), strict=True))
        with self._lock:
            if len(self._keys) + len(read) > self._max_keys:
                self._keys.clear()
            self._keys.update(read)
            key_table = self._key_table
        self._misses += len(read)
        limit = RECHECK_AFTER_MISSES if key_table is None else key_table.reload_after()
        if self._misses >= limit and self._reading is not None and self._reading.done():
            self._reading = None  # scanned again at the next miss
        return read


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

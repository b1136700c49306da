"""Upkeep of the LanceDB memory table: ``optimize()``, when it runs, health and copies.

:class:`Upkeep` is the part of
:class:`~tribal_memory.store.lancedb.LanceMemoryStore` that keeps the table
fast: it counts the writes, starts ``optimize()`` on a background thread when
they made it due (:class:`OptimizePolicy`), and reports what slows reads
(:meth:`Upkeep.health`, :meth:`Upkeep.index_state`). :func:`copy_table`
copies the table as of one version (backups).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

import lancedb
import pyarrow as pa
from lancedb.index import FTS

from tribal_memory.base.errors import StoreUnavailable
from tribal_memory.store.base import StoreCopy
from tribal_memory.store.event_loop import EventLoop, public_message
from tribal_memory.store.heap import release_free_memory
from tribal_memory.store.lance_index import IVF_SQ_NAME, AnnIndex, ann_state, has_index
from tribal_memory.store.lance_rows import FILE_FORMAT, TABLE, new_table_options
from tribal_memory.store.lance_table import TableHandle
from tribal_memory.store.lance_versions import (
    NO_CLEANUP,
    list_versions,
    pin_name,
    prune_versions,
)
from tribal_memory.store.recent import RecentRows
from tribal_memory.store.scan_cost import ScanCost

INTERVAL_PER_RUN_S = 4.0
"""Seconds of the interval rule per second the last ``optimize()`` took (see ``after_write``)."""
HEALTH_CHECK_WRITES = 50
"""Writes between two reads of the table's fragment count (a few ms each)."""
COPY_BATCH_ROWS = 2048
"""Rows per batch :func:`copy_table` reads and writes."""
PRUNE_FOLLOW_UPS = 2
"""Most prunes after the one that follows an ``optimize()`` (see :meth:`Upkeep.prune`)."""
logger = logging.getLogger("tribal_memory.store")


@dataclass(frozen=True, slots=True)
class OptimizePolicy:
    """When ``optimize()`` runs by itself and what it keeps (see :class:`LanceMemoryStore`).

    Attributes:
        ann_index_min_rows: Row count at which the IVF index is built.
        ann_quantised_min_rows: Row count from which it is built as IVF_SQ.
        every_rows: Least rows written between automatic runs.
        growth: Fraction of the table written before the next automatic run,
            unless ``interval_s`` passed since the last one.
        interval_s: Seconds after the last run past which ``every_rows``
            written rows suffice.
        keep_versions_s: Seconds a superseded table version stays on disk
            (:func:`~.lance_versions.prune_versions`).
        small_fragments: Small fragments at which the automatic run is due
            whatever the row count.
    """

    ann_index_min_rows: int
    ann_quantised_min_rows: int
    every_rows: int
    growth: float
    interval_s: float
    keep_versions_s: int
    small_fragments: int


class Upkeep:
    """Automatic and explicit ``optimize()`` of one store handle's table, and its diagnostics.

    Args:
        handle: The open memory table (read at each call: :meth:`TableHandle.reopen`).
        loop: The event loop every LanceDB call runs on.
        ann: What the handle knows of the IVF index (shared with the searches).
        recent: Rows written since the last ``optimize()`` (shared with the writes).
        write_lock: The store's write lock (held briefly for the bookkeeping).
        rewrite_lock: The store's lock of updates and deletes, which
            ``optimize()`` holds throughout (a compaction must not race a rewrite).
        policy: When the automatic ``optimize()`` runs.
        maintenance_lock: Taken by ``optimize()`` before anything else, so
            processes sharing the table optimise it one at a time (two at once
            make LanceDB reject one's commits, their work wasted); None: no
            lock beyond this process's.
    """

    def __init__(
        self,
        handle: TableHandle,
        loop: EventLoop,
        ann: AnnIndex,
        recent: RecentRows,
        *,
        write_lock: threading.Lock,
        rewrite_lock: threading.Lock,
        policy: OptimizePolicy,
        maintenance_lock: AbstractContextManager[object] | None = None,
    ) -> None:
        self._handle = handle
        self._shared_lock = maintenance_lock or nullcontext()
        self._loop = loop
        self._ann = ann
        self._recent = recent
        self._write_lock = write_lock
        self._rewrite_lock = rewrite_lock
        self._policy = policy
        self._optimized_at = time.monotonic()
        self._optimize_s = 0.0
        """Seconds the last ``optimize()`` took."""
        self._rows_since_optimize = 0
        self._written_at = time.monotonic()
        self._writes_since_check = 0
        self._fragments_due = False
        """The last fragment check found the run due, and no LanceDB ``optimize()`` ran since."""
        self._scans = ScanCost()
        self._searches_due = False
        """Searches paid a fold's price in scans of unindexed rows (:meth:`after_search`)."""
        self._maintenance: threading.Thread | None = None
        self._maintenance_lock = threading.Lock()
        self._timer: threading.Timer | None = None
        """A pending re-check of the automatic optimize (see :meth:`after_write`)."""
        self._prune_timer: threading.Timer | None = None
        """A pending removal of the versions the last ``optimize()`` superseded."""
        self._prune_first = False
        """The pending prune is the first after an ``optimize()`` (see :meth:`_prune_pending`)."""
        self._pruned_at = 0.0
        """When the last background prune started (``time.monotonic()``)."""

    def note_rows(self, rows: int) -> None:
        """Count ``rows`` rows written, updated or deleted; call it under the write lock."""
        self._rows_since_optimize += rows
        self._written_at = time.monotonic()

    def after_write(self) -> None:
        """Start the automatic ``optimize()`` in the background when a write made it due.

        Due when enough rows were written (``every_rows``, and ``growth`` of
        the table or ``interval_s`` since the last run: rows outside the
        indexes slow every search), or, checked every ``HEALTH_CHECK_WRITES``
        writes of any kind (capture, update, delete), when the table has
        ``small_fragments`` small fragments: a few hundred one-row fragments
        slow every search fivefold (issue 14) long before the row count calls
        for a rebuild. The write that made it due has returned by then; see
        :meth:`optimize` for what waits for it. When only the interval is
        missing, a timer checks again once it has passed, so rows written
        just before a store falls quiet (searches and feedback write nothing
        here) are indexed all the same. Fewer than ``every_rows`` rows are
        folded in once no write came for ``interval_s``: a store that agents
        only search and give feedback to would otherwise keep them outside
        the indexes for good, every search paying for them (issue 14). The
        interval is ``interval_s`` or ``INTERVAL_PER_RUN_S`` times the last
        run's duration, whichever is longer: a run rewrites the full-text
        index and what it compacts, so at a million memories it takes
        minutes, and a fixed minute would keep a core optimising while
        agents write (capture fell to half of the embedding's rate). The
        growth and fragment rules are not stretched. An automatic run that
        falls due while the last one's superseded versions are still kept
        starts once they are removed (a fragment check that found it due is
        remembered until then: updates went on leaving one-row fragments
        while the prunes ran). A failed check is logged, not raised.
        """
        self._writes_since_check += 1
        self._check_maintenance()

    def after_search(self) -> None:
        """Count one LanceDB query that read every unindexed row; fold them in once it paid off.

        Each such query pays about :data:`~.scan_cost.UNINDEXED_ROW_SCAN_S`
        per row written since the last ``optimize()``. Once that adds up to
        ``INTERVAL_PER_RUN_S`` times the last run's duration (at least
        :data:`~.scan_cost.FOLD_MIN_S`), the automatic ``optimize()`` starts
        whatever the row, growth and interval rules say (:class:`.ScanCost`:
        the fold then costs at most a quarter of the search time the rows
        already took). Without it, rows under ``every_rows`` stayed out of
        the indexes until writes paused for ``interval_s``, and a burst of
        2,048 captures at 100k memories slowed every search by 43-46% (p50
        over HTTP) for the minute the interval rule waited. No LanceDB call
        here; the run, when due, starts on the maintenance thread.
        """
        rows = self._rows_since_optimize
        if rows <= 0:
            return
        if not self._scans.add(rows, INTERVAL_PER_RUN_S * self._optimize_s):
            return
        self._searches_due = True
        if not self._prune_pending():  # else the pending prune checks again when done
            self._start_maintenance()

    def wait(self, timeout_s: float | None = None) -> bool:
        """Wait until no automatic ``optimize()`` runs; True when none is running now.

        Args:
            timeout_s: Longest wait in seconds (None: as long as it takes).
        """
        with self._maintenance_lock:
            thread = self._maintenance
        if thread is not None:
            thread.join(timeout_s)
            return not thread.is_alive()
        return True

    def close(self) -> None:
        """Cancel a pending check and wait for a running automatic ``optimize()`` to finish."""
        with self._maintenance_lock:
            timers = [self._timer, self._prune_timer]
            self._timer = self._prune_timer = None
        for timer in timers:
            if timer is not None:
                timer.cancel()
        self.wait()

    def optimize(self) -> None:
        """Fold new rows into the indexes, compact files, remove old versions; blocks.

        Also builds the IVF_FLAT index once the table has
        ``ann_index_min_rows`` rows, and rebuilds it when
        :meth:`AnnIndex.retrain_due`; after a (re)build the table is opened
        again in a new LanceDB session (:meth:`TableHandle.reopen`), so the
        old index's data leaves the index cache. Searches and captures go on while it
        runs: an append never conflicts with a compaction, and rows appended
        meanwhile simply stay unindexed until the next run. Updates and
        deletes wait for it (they rewrite fragments a compaction may be
        rewriting). A crash in the middle loses nothing: each LanceDB commit
        is atomic, and the files of an unfinished step are removed by a later
        ``optimize()``.

        Another process sharing the table (a replica) optimises it only after
        this one is done, and this one first reads the table's newest version,
        so neither rewrites files the other just replaced; waiting for it
        holds up no update or delete here.

        Raises:
            StoreUnavailable: a step failed (the steps before it stay done), or
                another process held the maintenance lock too long.
        """
        started = time.monotonic()
        rebuilt = False

        async def step() -> bool:
            nonlocal rebuilt
            rebuilt = await self._optimize()
            return True

        self._folding(step)
        if rebuilt:
            self._reopen()
        self._optimize_s = time.monotonic() - started
        release_free_memory()  # what the compaction and index builds freed (see .heap)
        self._prune_later()

    def _folding(self, step: Callable[[], Coroutine[Any, Any, bool]]) -> None:
        """Run ``step`` under the rewrite lock; note what it folded in when it returns True.

        True means it ran LanceDB's ``optimize()``: every row written before
        it started is in the indexes once it returns, so those rows leave the
        count of unindexed rows and :class:`RecentRows`.
        """
        with self._shared_lock, self._rewrite_lock:
            with self._write_lock:
                written, folded = self._rows_since_optimize, self._recent.ids()
            if not self._loop.run("optimize", step()):
                return
            with self._write_lock:
                self._rows_since_optimize = max(0, self._rows_since_optimize - written)
                self._recent.drop(folded)
                self._optimized_at = time.monotonic()
                self._fragments_due = False  # it compacted them
                self._searches_due = False  # it folded them in
                self._scans.reset()

    def prune(self) -> bool:
        """Remove the table versions superseded more than ``keep_versions_s`` ago, now; blocks.

        :meth:`optimize` does it too, and once more ``keep_versions_s`` after
        it ran, so that a store that falls quiet does not keep the versions
        its last ``optimize()`` superseded (see :mod:`.lance_versions`).
        LanceDB removes them inside an ``optimize()`` of its own, which folds
        in the rows written since and may finish an index step the last run
        left undone; what that commits supersedes one more version, which
        only a later prune removes. So a prune that committed something is
        followed by another ``keep_versions_s`` later, up to
        ``PRUNE_FOLLOW_UPS`` times after each ``optimize()``, unless rows
        were written since it started: those are left to the automatic
        ``optimize()`` (:meth:`after_write`), which prunes after itself.
        Without the follow-up, a store written to just before it fell quiet
        kept the version before its last fold for good; folding rows in
        prune after prune instead would extend the IVF index by a segment
        each time without the retraining an ``optimize()`` checks for.

        Returns:
            True when LanceDB committed a new version, leaving the one before
            it on disk until the next prune.

        Raises:
            StoreUnavailable: the table cannot be read or cleaned.
        """
        committed = 0

        async def step() -> bool:
            nonlocal committed
            # LanceDB's cleanup runs inside its optimize(), which folds in rows written meanwhile.
            done = await prune_versions(self._handle.table, self._policy.keep_versions_s)
            committed = done.committed
            return done.ran

        self._folding(step)
        return committed > 0

    def _prune_later(self, follow_ups: int = PRUNE_FOLLOW_UPS) -> None:
        """Run :meth:`prune` once ``keep_versions_s`` (and a second) have passed.

        Args:
            follow_ups: How many more prunes may follow that one (see :meth:`prune`).
        """
        with self._maintenance_lock:
            if self._prune_timer is not None:
                self._prune_timer.cancel()
            timer = threading.Timer(
                self._policy.keep_versions_s + 1.0, self._background_prune, args=(follow_ups,)
            )
            timer.daemon = True
            self._prune_timer = timer
            self._prune_first = follow_ups == PRUNE_FOLLOW_UPS
            timer.start()

    def _background_prune(self, follow_ups: int) -> None:
        """The prune timer's body; a failure is logged (the next ``optimize()`` retries).

        A prune that left a superseded version is followed by another while
        ``follow_ups`` allows; a follow-up is skipped when rows were written
        since the last prune started (see :meth:`prune`). An automatic
        ``optimize()`` that fell due while the first prune was pending waited
        for it (see :meth:`_prune_pending`); it starts now.
        """
        left = False
        if follow_ups == PRUNE_FOLLOW_UPS or self._written_at <= self._pruned_at:
            self._pruned_at = time.monotonic()
            try:
                left = self.prune()
            except StoreUnavailable as exc:
                logger.warning("removing old table versions failed: %s", exc.detail)
        with self._maintenance_lock:
            current = self._prune_timer is threading.current_thread()
            if current:
                self._prune_timer = None
        if not current:  # closed meanwhile, or replaced by a later run's prune
            return
        if left and follow_ups > 0:
            self._prune_later(follow_ups - 1)
        self._check_maintenance()

    def _prune_pending(self) -> bool:
        """True while the versions the last ``optimize()`` superseded are still on disk.

        Never with ``keep_versions_s`` 0: each run removes them itself. A
        follow-up prune (see :meth:`prune`) does not count: what it removes
        is one prune's fold, not a rewrite of the table, and an ``optimize()``
        due meanwhile (updates leaving one-row fragments) would otherwise
        wait ``keep_versions_s`` more.
        """
        if self._policy.keep_versions_s <= 0:
            return False
        with self._maintenance_lock:
            timer, first = self._prune_timer, self._prune_first
        return (
            first
            and timer is not None
            and timer.is_alive()
            and timer is not threading.current_thread()
        )

    def index_state(self) -> dict[str, bool]:
        """``{"fts": bool, "ann": bool}``: whether the BM25 and the IVF vector index exist.

        Raises:
            StoreUnavailable: the index list cannot be read.
        """
        indices = self._loop.run("read", self._handle.table.list_indices())
        return {"fts": has_index(indices, "FTS"), "ann": has_index(indices, "IVF")}

    def ann_index_stats(self) -> dict[str, int] | None:
        """The IVF index's figures, or None while there is none.

        ``{"trained_rows", "indexed_rows", "unindexed_rows", "segments",
        "quantised"}``. ``segments`` counts the parts a query searches (one
        after a (re)build, one more per ``optimize()`` that folded rows in);
        ``quantised`` is 1 for IVF_SQ, 0 for IVF_FLAT.

        Raises:
            StoreUnavailable: the index cannot be read.
        """
        table = self._handle.table
        name, trained = ann_state(self._loop.run("read", table.list_indices()))
        if name is None:
            return None
        stats = self._loop.run("read", table.index_stats(name))
        if stats is None:
            return None
        return {
            "trained_rows": trained,
            "indexed_rows": int(stats.num_indexed_rows),
            "unindexed_rows": int(stats.num_unindexed_rows),
            "segments": int(getattr(stats, "num_indices", 1) or 1),
            "quantised": int(name.startswith(IVF_SQ_NAME)),
        }

    def health(self) -> dict[str, int]:
        """What slows reads: ``{"fragments", "small_fragments", "unindexed_rows", "versions"}``.

        ``unindexed_rows``: the most rows any scalar or full-text index lacks
        (rows written since the last ``optimize()``); ``versions``: table
        versions kept on disk.

        Raises:
            StoreUnavailable: the table cannot be read.
        """
        table = self._handle.table
        stats: Any = self._loop.run("read", table.stats())  # a TypedDict in LanceDB 0.40
        fragments = stats["fragment_stats"]
        count, small = fragments["num_fragments"], fragments["num_small_fragments"]
        unindexed = 0
        for index in self._loop.run("read", table.list_indices()):
            if str(index.index_type).upper().startswith("IVF"):
                continue  # the vector index: searched exactly past it (see RecentRows)
            found = self._loop.run("read", table.index_stats(index.name))
            if found is not None:
                unindexed = max(unindexed, int(found.num_unindexed_rows))
        versions = len(self._loop.run("read", list_versions(table)))
        return {
            "fragments": int(count),
            "small_fragments": int(small),
            "unindexed_rows": unindexed,
            "versions": versions,
        }

    def _check_maintenance(self) -> None:
        """Start maintenance if due (see :meth:`after_write`); no write is counted."""
        policy = self._policy
        try:
            since = time.monotonic() - self._optimized_at
            interval = max(policy.interval_s, INTERVAL_PER_RUN_S * self._optimize_s)
            enough_rows = self._rows_since_optimize >= policy.every_rows
            due = enough_rows and (
                since >= interval
                or self._rows_since_optimize
                >= policy.growth * self._loop.run("count", self._handle.table.count_rows())
            )
            if enough_rows and not due:
                self._check_later(interval - since)
            elif not enough_rows and self._rows_since_optimize > 0:
                quiet = time.monotonic() - self._written_at
                due = quiet >= interval
                if not due:
                    self._check_later(interval - quiet)
            if not due and self._writes_since_check >= HEALTH_CHECK_WRITES:
                self._writes_since_check = 0
                self._fragments_due = self.health()["small_fragments"] >= policy.small_fragments
            due = due or self._fragments_due or self._searches_due
        except StoreUnavailable as exc:
            logger.warning("automatic optimize check skipped: %s", exc.detail)
            return
        if due and self._prune_pending():
            return  # the pending prune checks again once the superseded files are gone
        if due:
            self._start_maintenance()

    def _check_later(self, delay_s: float) -> None:
        """Run the automatic-optimize check again in ``delay_s`` seconds (one timer at a time)."""
        with self._maintenance_lock:
            timer = self._timer
            if timer is not None and timer.is_alive() and timer is not threading.current_thread():
                return
            self._timer = threading.Timer(max(0.0, delay_s), self._check_maintenance)
            self._timer.daemon = True
            self._timer.start()

    def _start_maintenance(self) -> None:
        """Run :meth:`optimize` on a maintenance thread unless one is running."""
        with self._maintenance_lock:
            if self._maintenance is not None and self._maintenance.is_alive():
                return
            self._maintenance = threading.Thread(
                target=self._background_optimize, name="tribal-maintenance", daemon=True
            )
            self._maintenance.start()

    def _background_optimize(self) -> None:
        """The maintenance thread's body; a failure is logged and the next due write retries.

        Another process optimising the same table at the same moment can make
        LanceDB reject one commit; nothing written is lost by that (a commit is
        atomic), so the thread logs it and ends.
        """
        started = time.perf_counter()
        logger.info("store maintenance started")
        try:
            self.optimize()
        except StoreUnavailable as exc:
            logger.warning("store maintenance failed: %s", exc.detail)
            return
        logger.info("store maintenance finished in %.2f s", time.perf_counter() - started)

    async def _optimize(self) -> bool:
        """LanceDB's steps of :meth:`optimize`; True when the IVF index was (re)built."""
        table, policy = self._handle.table, self._policy
        await table.checkout_latest()  # type: ignore[no-untyped-call]
        rebuilt = await self._ann.refit(
            table, policy.ann_index_min_rows, policy.ann_quantised_min_rows
        )
        # Compaction and index steps first, removing nothing: LanceDB's own age rule
        # would remove a version superseded a moment ago by this very compaction.
        await table.optimize(cleanup_older_than=NO_CLEANUP)
        await prune_versions(table, self._policy.keep_versions_s)
        return rebuilt

    def _reopen(self) -> None:
        """Open the table again after an IVF (re)build (:meth:`TableHandle.reopen`).

        The replaced index's partitions would otherwise stay in LanceDB's
        index cache until its bound evicts them. A failure is logged: the
        old handle goes on serving, with the old cache.
        """
        try:
            self._handle.reopen()
        except StoreUnavailable as exc:
            logger.warning("reopening the table after the index rebuild failed: %s", exc.detail)


def copy_table(source_uri: str, target_uri: str, *, file_format: str = FILE_FORMAT) -> StoreCopy:
    """Copy the memory table at ``source_uri`` as of its newest version into ``target_uri``.

    A handle of its own reads the newest version (every acknowledged write
    is in it: LanceDB commits a version before ``add`` returns) and pins it,
    so later writes do not reach the copy and no ``optimize()`` removes its
    files before the copy is done (a tag, :func:`~.lance_versions.pin_name`,
    deleted afterwards; one left by a crash goes after a day); the rows go in batches of
    ``COPY_BATCH_ROWS`` into a table of the same schema and model metadata
    at ``target_uri``, written in Lance ``file_format``, whose full-text
    index is then built (the scalar indexes are built when the copy is
    first opened).

    Returns:
        The version copied and the ids of the rows copied, in copy order.

    Raises:
        StoreUnavailable: the table cannot be read or the copy written.
    """
    try:
        return _copy_table(source_uri, target_uri, file_format)
    except Exception as exc:  # noqa: BLE001 - LanceDB/Arrow raise many types
        raise StoreUnavailable(f"cannot copy the memory store: {public_message(exc)}") from exc


def _copy_table(source_uri: str, target_uri: str, file_format: str) -> StoreCopy:
    table = lancedb.connect(source_uri).open_table(TABLE)
    version = int(table.version)
    pin = pin_name()
    table.tags.create(pin, version)  # no optimize() removes the version while it is copied
    try:
        return _copy_version(table, version, target_uri, file_format)
    finally:
        table.tags.delete(pin)


def _copy_version(table: Any, version: int, target_uri: str, file_format: str) -> StoreCopy:
    table.checkout(version)  # later writes by the server do not reach this handle
    schema = table.schema
    reader = table.search().select(list(schema.names)).limit(None).to_batches(COPY_BATCH_ROWS)
    ids: list[str] = []

    def batches() -> Iterator[pa.RecordBatch]:
        for batch in reader:
            ids.extend(str(i) for i in batch.column("memory_id").to_pylist())
            yield batch.select(schema.names)

    data = pa.RecordBatchReader.from_batches(schema, batches())
    copy = lancedb.connect(target_uri).create_table(
        TABLE,
        data=data,
        schema=schema,
        storage_options=new_table_options(file_format),
    )
    copy.create_index("content", config=FTS(with_position=False))
    return StoreCopy(version, ids)

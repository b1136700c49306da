"""The memory table's indexes: which exist, when the IVF index answers, when it is rebuilt.

The full-text (BM25 on ``content``) and scalar indexes (``memory_id``
BTREE, ``owner`` and ``kind`` BITMAP) are made when the table is opened
(:func:`ensure_indexes`). The IVF_FLAT cosine vector index is built once
the table is large enough and rebuilt as it grows, by ``optimize()``
(IVF_SQ, vectors quantised to 8 bits a dimension, once it is trained on
``ann_quantised_min_rows`` rows or more; see :data:`REFINE_FACTOR`)
(:meth:`AnnIndex.refit`); :class:`AnnIndex` is what a store handle knows of
it, and decides whether a vector search uses it (:meth:`AnnIndex.use_for`).

The coroutines here let LanceDB's errors pass; the store awaits them through
:func:`~tribal_memory.store.event_loop.translated`, which turns those into
:class:`~tribal_memory.base.errors.StoreUnavailable`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable

from lancedb.index import FTS, Bitmap, BTree, IndexConfig, IvfFlat, IvfSq
from lancedb.table import AsyncTable

EXACT_MAX_ROWS = 300
"""Prefiltered vector searches over fewer rows than this skip the IVF index (exact)."""
INDEX_CHECK_S = 30.0
"""Seconds between re-reads of which vector index exists (another process may build it)."""
IVF_PARTITION_ROWS = 1024
"""Rows per IVF partition the index is trained for (LanceDB's IVF_FLAT default is larger).

Smaller partitions let the near-duplicate check
(:data:`tribal_memory.store.lance_search.NEAREST_NPROBES`) scan fewer rows
per vector while a search keeps its recall by probing more of them
(``ann_nprobes``). Measured at 100k memories: the check's 2 probes took half
the time they took on LanceDB's default partitions and found as many twins;
search recall@10 stayed at 0.99 with 32 probes.
"""
PROBES_BASE_ROWS = 250_000
"""Trained rows up to which a search probes ``ann_nprobes`` partitions (:func:`probes_for`)."""
IVF_NAME = f"vector_ivf_p{IVF_PARTITION_ROWS}_rows_"
"""Name prefix of the IVF index (its partition size); the rows it was trained on follow.

An IVF index named otherwise (built with other partitions, e.g. by an older
release as ``vector_ivf_rows_<n>``) is rebuilt at the next ``optimize()``.
"""
IVF_SQ_NAME = f"vector_ivfsq_p{IVF_PARTITION_ROWS}_rows_"
"""Name prefix of the IVF_SQ index (same partitions, vectors quantised); trained rows follow."""
REFINE_FACTOR = 2
"""A search of the IVF_SQ index re-ranks ``k`` times this many rows by their full vectors.

(The near-duplicate check asks for this many rows per vector and computes
their cosines itself: ``LanceSearch._exact_distances``.)

So the scores it returns are exact cosine distances (without refining,
the distances LanceDB gives for IVF_SQ are far from them:
``tests/test_store.py::test_ann_search_scores_are_exact_cosines`` fails),
and the rows it returns are about those IVF_FLAT returns. Measured on ``bench perf``'s
corpus at a million rows, 64 probes, 200 questions, in-process
(``benchmarks/results/ivf-quantised-1m.json``): for the 150 candidates of
a search path, recall@150 against exact search 0.990 with IVF_SQ and
refine factor 2 as with IVF_FLAT (0.978 without refining), p50 15.1 ms
against 19.6 (p95 19.0 against 37.1), and an index of 370 MB against
1,469; recall@10 0.9955 for both.
"""
IVF_MAX_SEGMENTS = 2
"""Segments the IVF index may have before ``optimize()`` rebuilds it (see ``retrain_due``)."""
RETRAIN_GROWTH = 1.25
"""Growth since training after which extra segments make ``optimize()`` rebuild the index."""
IVF_SEGMENTS_CAP = 4
"""Segments after which ``optimize()`` rebuilds the index whatever the growth.

Without it a table that grows by less than ``RETRAIN_GROWTH`` between
rebuilds gains a segment per ``optimize()`` for as long as it takes: a
million-memory store rested at 7 segments after a ``bench perf`` load, and
a question asked for the first time took 42.7 ms p50 / 101 ms p95 over HTTP
against 35.2 / 67 on the same rows indexed in one segment
(``benchmarks/results/perf-1m-segments.json`` and ``perf-1m-file-format.json``).
"""


def probes_for(nprobes: int, trained_rows: int) -> int:
    """IVF partitions a vector search probes in an index trained on ``trained_rows`` rows.

    ``nprobes`` up to :data:`PROBES_BASE_ROWS`, then more with the square root
    of the size past it (62 for an index trained on 940k rows, 918
    partitions). With a fixed 32 the probed share falls from a third of the
    rows at 100k to 3% at a million, and so did recall. Measured on ``bench
    perf``'s 1M store (``benchmarks/results/perf-1m-nprobes.json``; probes
    31, 62, 124): recall@10 against exact search 0.942, 0.997, 1.000 (5%
    owner filter 0.911, 0.968, 0.992; 1% 0.906, 0.969, 0.988); the vector
    search's p50 14.1, 17.0, 30.9 ms.
    """
    if trained_rows <= PROBES_BASE_ROWS:
        return nprobes
    return max(nprobes, round(nprobes * math.sqrt(trained_rows / PROBES_BASE_ROWS)))


async def ensure_indexes(table: AsyncTable) -> list[IndexConfig]:
    """Create the full-text and scalar indexes ``table`` lacks; returns the indexes it had.

    The BM25 index on ``content`` (no positions: no phrase queries), a
    BTREE on ``memory_id`` and BITMAPs on ``owner`` and ``kind``, so lookups
    by id and owner prefilters read an index, not every row. Every search
    that does not ask for summaries has the prefilter ``kind NOT IN
    ('summary')``: without the ``kind`` index it read that column of every
    row, which at 100k memories slowed every search by several ms. A store
    made before gets the index when next opened. The IVF index is not made
    here (see :meth:`AnnIndex.refit`).
    """
    indices = await table.list_indices()
    if not has_index(indices, "FTS"):
        await table.create_index("content", config=FTS(with_position=False))
    names = {tuple(index.columns) for index in indices}
    for column, config in (("memory_id", BTree()), ("owner", Bitmap()), ("kind", Bitmap())):
        if (column,) not in names:
            await table.create_index(column, config=config)
    return list(indices)


def has_index(indices: Iterable[IndexConfig], index_type: str) -> bool:
    """Whether one of ``indices`` (from ``list_indices()``) has a type starting ``index_type``."""
    return any(str(index.index_type).upper().startswith(index_type) for index in indices)


def ann_state(indices: Iterable[IndexConfig]) -> tuple[str | None, int]:
    """(name of the IVF index or None, rows it was trained on) from ``list_indices()``.

    The trained row count is part of the index name (``IVF_NAME`` + ``<n>``);
    an index named otherwise counts as trained on its indexed rows. Of two (a
    rebuild interrupted before it dropped the old one), the one trained on
    more rows.
    """
    found: list[tuple[int, str]] = []
    for index in indices:
        if str(index.index_type).upper().startswith("IVF"):
            name = str(index.name)
            trained = _trained_rows(name)
            if trained is None:
                trained = int(getattr(index, "num_indexed_rows", 0) or 0)
            found.append((trained, name))
    if not found:
        return None, 0
    rows, name = max(found)
    return name, rows


def _trained_rows(name: str) -> int | None:
    """The rows an IVF index named by this release was trained on (None: named otherwise)."""
    for prefix in (IVF_NAME, IVF_SQ_NAME):
        if name.startswith(prefix) and name[len(prefix) :].isdigit():
            return int(name[len(prefix) :])
    return None


async def ivf_segments(table: AsyncTable) -> int:
    """Segments of the table's IVF index (one after a (re)build, one more per fold); 0 without.

    Reads only (``list_indices()`` and the index's statistics).
    """
    name, _ = ann_state(await table.list_indices())
    if name is None:
        return 0
    stats = await table.index_stats(name)
    return int(getattr(stats, "num_indices", 1) or 1) if stats is not None else 0


class AnnIndex:
    """What one store handle knows of the table's IVF vector index.

    Attributes:
        name: Name of the IVF index; None while there is none.
        trained_rows: Rows the index was trained on (0 with none).
        checked_at: ``time.monotonic()`` of the last re-read of the index list.
    """

    def __init__(self) -> None:
        self.name: str | None = None
        self.trained_rows = 0
        self.checked_at = time.monotonic()

    @property
    def quantised(self) -> bool:
        """Whether the index is IVF_SQ (its searches refine: :data:`REFINE_FACTOR`)."""
        return self.name is not None and self.name.startswith(IVF_SQ_NAME)

    def update(self, indices: Iterable[IndexConfig]) -> None:
        """Take name and trained rows from ``list_indices()`` (see :func:`ann_state`)."""
        self.name, self.trained_rows = ann_state(indices)

    async def use_for(self, table: AsyncTable, where: str | None, passing: int | None) -> bool:
        """True when the IVF index should answer a query with prefilter ``where``.

        A selective prefilter can leave too few rows in the probed partitions
        (seen once at 100k memories with a filter no scalar index covers), so
        when fewer than ``EXACT_MAX_ROWS`` rows pass, the search is exact over
        them. Over a larger filtered set exact search costs several times the
        index's.

        Whether the index exists is re-read every ``INDEX_CHECK_S`` seconds,
        so a replica that never optimises learns of another's index.

        Args:
            table: The memory table.
            where: The SQL prefilter (None: every row).
            passing: Rows known to pass ``where`` (None: counted here).
        """
        now = time.monotonic()
        if now - self.checked_at >= INDEX_CHECK_S:
            self.checked_at = now
            self.update(await table.list_indices())
        if self.name is None:
            return False
        if where is None:
            return True
        if passing is None:
            passing = await table.count_rows(where)
        return passing >= EXACT_MAX_ROWS

    async def refit(self, table: AsyncTable, min_rows: int, quantised_min_rows: int) -> bool:
        """Build, rebuild or keep the IVF index (``optimize()``'s first step); True when built.

        Builds it once the table has ``min_rows`` rows, and rebuilds it (new
        partitions) when :meth:`retrain_due`: IVF_SQ when the table then has
        ``quantised_min_rows`` rows or more, else IVF_FLAT. The new index is built before
        the old one is dropped, so a crash in between leaves a usable index
        (the next call drops the other). Rows outside the index are folded in
        by the ``table.optimize()`` that follows, not here.
        """
        rows = await table.count_rows()
        indices = await table.list_indices()
        self.update(indices)
        if rows >= min_rows and await self.retrain_due(table, rows, quantised_min_rows):
            quantised = rows >= quantised_min_rows
            name = f"{IVF_SQ_NAME if quantised else IVF_NAME}{rows}"
            kind = IvfSq if quantised else IvfFlat
            config = kind(distance_type="cosine", target_partition_size=IVF_PARTITION_ROWS)
            # LanceDB 0.40's annotation leaves out IvfSq, which create_index takes.
            await table.create_index("vector", config=config, name=name)  # type: ignore[arg-type]
            self.name, self.trained_rows = name, rows
            built = True
        else:
            built = False
        for index in indices:
            if str(index.index_type).upper().startswith("IVF") and index.name != self.name:
                await table.drop_index(index.name)
        return built

    async def retrain_due(self, table: AsyncTable, rows: int, quantised_min_rows: int) -> bool:
        """Whether ``optimize()`` should (re)build the IVF index instead of extending it.

        Yes with no index or one not named by this release (other partitions), with an
        IVF_FLAT index on a table of ``quantised_min_rows`` rows or more (once: the rebuild
        makes it IVF_SQ, which a table that shrinks keeps), and when the table (``rows``
        rows) has grown to four times the rows the index was trained on (its partitions no
        longer fit the data). Also when folding in the unindexed rows would give the index a
        segment beyond ``IVF_MAX_SEGMENTS`` (LanceDB extends an index by one segment per
        ``optimize()``, and a query searches every segment), provided the table has grown by
        ``RETRAIN_GROWTH`` since training: each rebuild is then at least that much larger
        than the last, so the rebuilds of a growing table cost a bounded multiple of the
        last one. And whatever the growth, when folding them in would go past
        ``IVF_SEGMENTS_CAP`` segments: a table growing slowly then pays a rebuild every few
        runs instead of slower searches for good.
        """
        if self.name is None or _trained_rows(self.name) is None:
            return True  # none yet, or built with other partitions
        if rows >= quantised_min_rows and not self.quantised:
            return True
        if rows >= 4 * self.trained_rows:
            return True
        stats = await table.index_stats(self.name)
        if stats is None or not stats.num_unindexed_rows:
            return False
        segments = int(getattr(stats, "num_indices", 1) or 1)
        if segments >= IVF_SEGMENTS_CAP:
            return True
        return rows >= RETRAIN_GROWTH * self.trained_rows and segments >= IVF_MAX_SEGMENTS

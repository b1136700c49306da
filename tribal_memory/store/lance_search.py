"""Search paths of the LanceDB memory table: vector, full-text, listed ids and nearest.

:class:`LanceSearch` is the part of
:class:`~tribal_memory.store.lancedb.LanceMemoryStore` that answers queries;
the store delegates its search methods to it. Vector search uses cosine
distance, exact or on the IVF index (:class:`~.lance_index.AnnIndex` decides);
full-text search uses LanceDB's BM25 index on ``content``.
"""

from __future__ import annotations

import asyncio
import math
import threading
from collections.abc import Sequence
from concurrent.futures import Future

import numpy as np
import pyarrow as pa
from lancedb.query import AsyncFTSQuery, AsyncVectorQuery, MatchQuery

from tribal_memory.base.errors import StoreUnavailable
from tribal_memory.base.models import Memory, SearchFilters
from tribal_memory.embeddings.base import Vector, unit_rows
from tribal_memory.store.base import RowRef, ScoredMemory
from tribal_memory.store.event_loop import EventLoop, translated
from tribal_memory.store.lance_index import REFINE_FACTOR, AnnIndex, probes_for
from tribal_memory.store.lance_mirror import VectorMirror
from tribal_memory.store.lance_rowcache import RowCache, RowCounts
from tribal_memory.store.lance_rows import (
    COLUMNS,
    filter_sql,
    in_list,
    lists_owner_or_kinds,
    memory_rows,
    nearest_rows,
    to_memory,
    vectors_of,
)
from tribal_memory.store.lance_table import TableHandle
from tribal_memory.store.recent import RecentRows, better, nearest_in, owners_only

NEAREST_NPROBES = 2
"""IVF partitions probed by :meth:`LanceSearch.nearest` (near-duplicate checks)."""
POSTFILTER_MIN_PASSING = 25_000
"""Rows a filter must pass before a filtered BM25 search may filter after ranking.

LanceDB's BM25 search with a filter first lists the rows the filter passes
(its scalar indexes) and then scores every one of them: its cost grows with
them, about 0.55 microseconds a row. At a million memories (``bench perf``'s
corpus, 150 results, scratch, in-process) an owner holding 1% took 10.0 ms
and one holding 5% 27.9, against 3.6 ms unfiltered. Ranking the whole table
and filtering the best ``wide`` rows after (LanceDB's ``postfilter``, which
reads the filter's columns of those rows) took 10.0 ms for 3,000 rows and
13.2 for 6,000. So a filter on owner and kind (two small columns; a tag
list is slower to read) passing at least this many rows, and few enough
that :func:`postfilter_rows` stays within :data:`POSTFILTER_MAX_ROWS`, is
applied after ranking; the others before, as always.
"""
POSTFILTER_MAX_ROWS = 6_000
"""Most rows ranked by a BM25 search that filters after ranking (:data:`POSTFILTER_MIN_PASSING`)."""
POSTFILTER_OVERSAMPLE = 2.0
"""Rows ranked per row wanted, over the share of the table the filter passes."""


def postfilter_rows(k: int, passing: int, total: int) -> int | None:
    """How many of the table's best BM25 rows to rank before filtering, or None: filter first.

    ``k`` rows are wanted of the ``passing`` rows (of ``total``) the filter
    passes; ranking ``POSTFILTER_OVERSAMPLE * k * total / passing`` rows finds
    about twice ``k`` passing ones. None when the filter passes fewer than
    :data:`POSTFILTER_MIN_PASSING` rows or that is over :data:`POSTFILTER_MAX_ROWS`.
    """
    if passing < POSTFILTER_MIN_PASSING or total <= 0:
        return None
    wide = math.ceil(POSTFILTER_OVERSAMPLE * k * total / passing)
    return wide if wide <= POSTFILTER_MAX_ROWS else None


class LanceSearch:
    """The queries of one store handle over its table, run on the store's event loop.

    Args:
        handle: The open memory table (read at each call: :meth:`TableHandle.reopen`).
        loop: The event loop every LanceDB call runs on.
        ann: What the handle knows of the IVF index (shared with maintenance).
        recent: Rows written since the last ``optimize()`` (shared with the writes).
        write_lock: The store's write lock; :meth:`nearest` reads ``recent`` under it.
        nprobes: IVF partitions searched per vector query once the index exists.
        mirror: The in-memory copy of a small table's vectors (its ``max_rows`` 0: off).
        row_keys_max_rows: Largest table whose keys are all kept in memory
            (:class:`~.lance_keys.KeyTable`; 0: never).
        whole_rows_max_mb: Most MiB of whole rows that key table holds instead
            of the keys, so hits are read from memory (0: keys only).
        counts: The row counts per filter the store keeps (:meth:`passing`).
    """

    def __init__(
        self,
        handle: TableHandle,
        loop: EventLoop,
        ann: AnnIndex,
        recent: RecentRows,
        write_lock: threading.Lock,
        *,
        nprobes: int,
        mirror: VectorMirror,
        row_keys_max_rows: int,
        whole_rows_max_mb: int,
        counts: RowCounts,
    ) -> None:
        self._handle = handle
        self._counts = counts
        self._loop = loop
        self._ann = ann
        self._recent = recent
        self._write_lock = write_lock
        self._nprobes = nprobes
        self._rows = RowCache(
            handle,
            loop,
            max_table_rows=row_keys_max_rows,
            max_table_bytes=whole_rows_max_mb * 2**20,
        )
        self._mirror = mirror

    async def passing(self, where: str | None) -> int:
        """Rows passing ``where`` (None: all rows), kept in :attr:`_counts` (on the loop)."""
        kept = self._counts.get(where)
        if kept is not None:
            return kept
        generation = self._counts.generation()
        found = int(await self._handle.table.count_rows(where))
        self._counts.put(where, found, generation)
        return found

    @property
    def vectors_in_memory(self) -> bool:
        """Whether the in-memory vector copy is held (the table was small enough at its last read).

        Vector searches it can filter are then answered from it, not from LanceDB.
        """
        return self._mirror.active

    def get(self, memory_ids: Sequence[str]) -> dict[str, Memory]:
        """See :meth:`MemoryStore.get`; recent hits are read by row id (:meth:`RowCache.get`)."""
        return self._rows.get(memory_ids)

    def start_vector_search(
        self,
        vector: Vector,
        filters: SearchFilters,
        k: int,
        *,
        exact: bool = False,
        passing: int | None = None,
    ) -> Future[list[ScoredMemory]]:
        """Start the top-``k`` cosine search for ``vector`` (shape ``(dim,)``); returns at once.

        Exact from the in-memory copy of a small table's vectors
        (:class:`~.lance_mirror.VectorMirror`) when it is current and the
        filter is on owner and kind only. Otherwise on LanceDB: exact when
        there is no IVF index, when fewer than
        :data:`~.lance_index.EXACT_MAX_ROWS` rows pass ``filters`` (``passing``
        when the caller counted them), or with ``exact``; otherwise the index
        searched in ``nprobes`` partitions.

        Returns:
            A future whose ``result()`` is up to ``k`` memories with their
            cosine similarity in [-1, 1], best first ([] when none pass), or
            raises ``StoreUnavailable``. Only row ids and scores are read
            here; each memory is read when first asked for
            (:meth:`ScoredMemory.deferred`).
        """
        where = filter_sql(filters)

        async def search() -> list[ScoredMemory]:
            copied = await self._mirror.nearest(vector, filters, k)
            if copied is not None:
                return [
                    ScoredMemory.deferred(key, score, ref, self._rows) for ref, key, score in copied
                ]
            indexed = not exact and await self._ann.use_for(self._handle.table, where, passing)
            table = await self._vector_query(vector, where, k, exact=not indexed).to_arrow()
            return await self._deferred(table, "_distance", distance=True)

        return self._loop.submit(translated("vector search", search()))

    def nearest(
        self, groups: Sequence[tuple[Vector, SearchFilters]]
    ) -> list[list[tuple[str, float] | None]]:
        """The nearest memory to each vector of each ``(vectors, filters)`` group, all at once.

        From the in-memory copy of a small table's vectors when it can answer
        every group (:meth:`~.lance_mirror.VectorMirror.nearest_groups`:
        exact). Otherwise the groups' queries run concurrently on the event
        loop and select ids and distances only. On the IVF index only the
        ``NEAREST_NPROBES`` partitions closest to each vector are searched: a near-duplicate lies
        next to its twin, so it is almost always there. When the rows outside
        the index are exactly those this process wrote since the last
        ``optimize()`` (:class:`RecentRows`), the query skips them and they
        are compared in memory instead; otherwise LanceDB scans them itself.

        Returns:
            Per group, one ``(memory_id, cosine similarity in [-1, 1])`` per
            row of its vectors (``(n, dim)``), None where no memory passes.

        Raises:
            StoreUnavailable: a query failed.
        """
        copied = self._loop.run("vector search", self._mirror.nearest_groups(groups))
        if copied is not None:
            return copied
        # Per group, the recent rows of its owners (None: LanceDB scans unindexed rows).
        recent = self._recent_rows_of([filters for _, filters in groups])

        async def search_all() -> list[pa.Table | None]:
            searches = (
                self._nearest(vectors, filters, fast=rows is not None)
                for (vectors, filters), rows in zip(groups, recent, strict=True)
            )
            return list(await asyncio.gather(*searches))

        tables = self._loop.run("vector search", search_all())
        answers: list[list[tuple[str, float] | None]] = []
        for table, (vectors, _), rows in zip(tables, groups, recent, strict=True):
            found = nearest_rows(table, len(vectors))
            if rows is not None and len(vectors) > 0:
                found = better(found, nearest_in(vectors, *rows))
            answers.append(found)
        return answers

    def vectors(self, memory_ids: Sequence[str]) -> dict[str, Vector]:
        """The stored vectors of the listed memories (absent: not stored); {} for no ids.

        Raises:
            StoreUnavailable: the query failed.
        """
        if not memory_ids:
            return {}
        where = f"memory_id IN ({in_list(memory_ids)})"
        query = self._handle.table.query().where(where).select(["memory_id", "vector"])
        table = self._loop.run("read", query.to_arrow())
        ids = table.column("memory_id").to_pylist()
        return dict(zip(ids, vectors_of(table), strict=True))

    def score_ids(
        self, vector: Vector, memory_ids: Sequence[str], filters: SearchFilters
    ) -> list[ScoredMemory]:
        """Cosine similarity in [-1, 1] of ``vector`` to each listed memory passing ``filters``.

        Exact: the rows are read by id (the ``memory_id`` index) with their
        vectors, and the cosines computed here; a vector query over the same
        ids plans a nearest-neighbour search and costs about twice as much.
        Ids not stored or not passing ``filters`` are absent; best first
        (ties: memory id); [] for no ids.

        Raises:
            StoreUnavailable: the query failed.
        """
        if not memory_ids:
            return []
        where = f"memory_id IN ({in_list(memory_ids)})"
        extra = filter_sql(filters)
        if extra:
            where = f"({where}) AND ({extra})"
        query = self._handle.table.query().where(where).select([*COLUMNS, "vector"])
        table = self._loop.run("read", query.to_arrow())
        if not table.num_rows:
            return []
        matrix = unit_rows(vectors_of(table))
        query_vector = np.asarray(vector, dtype=np.float32)
        cosines = matrix @ (query_vector / max(float(np.linalg.norm(query_vector)), 1e-12))
        found = [
            ScoredMemory(to_memory(row), float(cosine))
            for row, cosine in zip(memory_rows(table), cosines.tolist(), strict=True)
        ]
        found.sort(key=lambda s: (-s.score, s.memory.memory_id))
        return found

    def start_text_search(
        self, query: str, filters: SearchFilters, k: int
    ) -> Future[list[ScoredMemory]]:
        """Start the top-``k`` BM25 search of ``query`` over ``content``; returns at once.

        Returns:
            A future whose ``result()`` is up to ``k`` memories with their raw
            BM25 score (> 0, higher is better), best first; [] when nothing
            matches or ``query`` is blank. It raises ``StoreUnavailable`` when
            the search fails. Memories are read when first asked for, as in
            :meth:`start_vector_search`.
        """
        if not query.strip():
            done: Future[list[ScoredMemory]] = Future()
            done.set_result([])
            return done
        search = self._text_search(query, filters, k)
        return self._loop.submit(translated("full-text search", search))

    def start_text_scores(
        self, query: str, filters: SearchFilters, k: int
    ) -> Future[list[tuple[RowRef, float]]]:
        """Start a BM25 search answering ``[(row id, raw BM25 score)]``, best first.

        The ranking of :meth:`start_text_search` without reading any column:
        LanceDB's row ids (``_rowid``, which the vector and BM25 searches
        answer with too) come from the index, where a memory id costs a read
        of the rows. [] when nothing matches or ``query`` is blank. The
        future raises ``StoreUnavailable`` when the search fails.
        """
        if not query.strip():
            done: Future[list[tuple[RowRef, float]]] = Future()
            done.set_result([])
            return done

        async def search() -> list[tuple[RowRef, float]]:
            table = await self._text_answer(query, filters, k)
            refs = table.column("_rowid").to_pylist()
            scores = table.column("_score").to_pylist()
            return [(int(r), float(v)) for r, v in zip(refs, scores, strict=True)]

        return self._loop.submit(translated("full-text search", search()))

    def _vector_query(
        self, vector: Vector, where: str | None, k: int, *, exact: bool
    ) -> AsyncVectorQuery:
        query = (
            self._handle.table.query()
            .nearest_to(np.asarray(vector, dtype=np.float32))
            .column("vector")
            .distance_type("cosine")
            .select(["_distance"])
            .with_row_id()
            .limit(k)
        )
        if exact:
            query = query.bypass_vector_index()
        elif self._ann.name is not None:
            query = query.nprobes(probes_for(self._nprobes, self._ann.trained_rows))
            if self._ann.quantised:
                query = query.refine_factor(REFINE_FACTOR)
        return query.where(where) if where else query

    def _recent_rows_of(
        self, filters: Sequence[SearchFilters]
    ) -> list[tuple[list[str], np.ndarray] | None]:
        """Per filter, (ids, unit vectors) of the recent rows it admits, taken under the lock.

        None for a filter on more than owners, and for all of them unless the
        IVF index's unindexed rows are exactly the rows :attr:`_recent` holds.
        """
        with self._write_lock:
            name = self._ann.name
            if name is None:
                return [None] * len(filters)
            try:
                stats = self._loop.run("index stats", self._handle.table.index_stats(name))
            except StoreUnavailable:  # e.g. another process rebuilt it under a new name
                return [None] * len(filters)
            if getattr(stats, "num_unindexed_rows", None) != len(self._recent):
                return [None] * len(filters)
            owners = [owners_only(f) for f in filters]
            return [self._recent.matrices(o) if o is not None else None for o in owners]

    async def _nearest(
        self, vectors: Vector, filters: SearchFilters, *, fast: bool
    ) -> pa.Table | None:
        if len(vectors) == 0:
            return None
        where = filter_sql(filters)
        matrix = np.asarray(vectors, dtype=np.float32)
        indexed = fast or await self._ann.use_for(self._handle.table, where, None)
        quantised = indexed and self._ann.quantised
        query = (
            self._handle.table.query()
            .nearest_to(matrix if len(matrix) > 1 else matrix[0])
            .column("vector")
            .distance_type("cosine")
            .select(["memory_id", "_distance"])
            .limit(REFINE_FACTOR if quantised else 1)
        )
        if not indexed:
            query = query.bypass_vector_index()
        else:
            query = query.nprobes(NEAREST_NPROBES)
            if fast:
                query = query.fast_search()
        if quantised:
            query = query.with_row_id()
        table = await (query.where(where) if where else query).to_arrow()
        return await self._exact_distances(table, matrix) if quantised else table

    async def _exact_distances(self, table: pa.Table, matrix: np.ndarray) -> pa.Table:
        """``table`` (an IVF_SQ answer with ``_rowid``) with exact cosine ``_distance`` values.

        IVF_SQ's own distances are not cosines. LanceDB's ``refine_factor``
        re-ranks each query vector's rows apart, which made a batch's
        near-duplicate check about ten times slower than on IVF_FLAT (256
        vectors at a million rows, scratch: 646-884 against 66-78 ms); here
        the candidates' stored vectors are read in one take for the whole
        batch. A row gone since counts as dissimilar (distance 2).
        """
        if table.num_rows == 0:
            return table
        refs = table.column("_rowid").to_pylist()
        taken = self._handle.table.take_row_ids(sorted(set(refs))).select(["vector"]).with_row_id()
        rows = await taken.to_arrow()
        stored, queries = unit_rows(vectors_of(rows)), unit_rows(matrix)
        at = {ref: i for i, ref in enumerate(rows.column("_rowid").to_pylist())}
        positions = (
            table.column("query_index").to_pylist()
            if "query_index" in table.column_names
            else [0] * table.num_rows
        )
        distances = [
            1.0 - float(stored[at[ref]] @ queries[int(position)]) if ref in at else 2.0
            for ref, position in zip(refs, positions, strict=True)
        ]
        column = table.column_names.index("_distance")
        return table.set_column(column, "_distance", pa.array(distances, pa.float32()))

    async def _text_search(self, query: str, filters: SearchFilters, k: int) -> list[ScoredMemory]:
        table = await self._text_answer(query, filters, k)
        return await self._deferred(table, "_score", distance=False)

    async def _text_answer(self, query: str, filters: SearchFilters, k: int) -> pa.Table:
        """The best ``k`` BM25 rows passing ``filters``: ``_score`` and ``_rowid``, best first.

        A filter listing rows by owner or kinds
        (:func:`~.lance_rows.lists_owner_or_kinds`) passing many rows is
        applied to the table's best :func:`postfilter_rows` rows after ranking
        them, when at least ``k`` of those pass: the same rows as filtering
        first, up to the order of equal scores (a row ranked below them all
        scores no more than the ``k``-th). Otherwise, and when fewer pass, the
        filter comes first.
        """
        where = filter_sql(filters)
        if where:
            wide = None
            # Filtering first costs little for an exclusion alone (see the predicate).
            if lists_owner_or_kinds(filters):
                wide = postfilter_rows(k, await self.passing(where), await self._rows_now())
            if wide is not None:
                ranked = await self._bm25(query, wide).where(where).postfilter().to_arrow()
                if ranked.num_rows >= k:
                    return ranked.slice(0, k)
            return await self._bm25(query, k).where(where).to_arrow()
        return await self._bm25(query, k).to_arrow()

    async def _rows_now(self) -> int:
        """The table's rows: the kept count, else counted (metadata only) and not kept.

        A count kept by a search could predate another replica's write that
        this handle already shows, and ``/v1/stats`` reads the kept count of
        all rows: only a caller of the count itself keeps it.
        """
        kept = self._counts.get(None)
        return kept if kept is not None else int(await self._handle.table.count_rows())

    def _bm25(self, query: str, k: int) -> AsyncFTSQuery:
        """The top-``k`` BM25 query of ``query`` over ``content``, selecting scores and row ids."""
        return (
            self._handle.table.query()
            .nearest_to_text(MatchQuery(query, "content"))  # type: ignore[call-arg]
            .select(["_score"])
            .with_row_id()
            .limit(k)
        )

    async def _deferred(
        self, table: pa.Table, score_column: str, *, distance: bool
    ) -> list[ScoredMemory]:
        """The candidates of an answer of row ids and scores, in answer order.

        ``distance``: ``score_column`` holds cosine distance, turned into
        similarity (``1 - distance``); else it is used as it is (BM25). Each
        candidate carries its row's key (:class:`RowCache`) and its memory
        is read only when asked for; a row gone since the search is left out.
        """
        refs = [int(r) for r in table.column("_rowid").to_pylist()]
        scores = table.column(score_column).to_pylist()
        keys = await self._rows.keys(refs)
        return [
            ScoredMemory.deferred(
                key, 1.0 - float(score) if distance else float(score), ref, self._rows
            )
            for ref, score, key in zip(refs, scores, keys, strict=True)
            if key is not None
        ]

"""LanceDB memory store: one table ``memories``, vectors and a BM25 index on ``content``.

The table has a vector column and a native full-text (BM25) index on ``content``.

Vector search uses cosine distance: exact below ``ann_index_min_rows``, an
IVF_FLAT index above it (retrained as the table grows). Full-text search uses
LanceDB's inverted index with its English stemmer and stop-word list. Scalar
indexes on ``memory_id`` (BTREE) and ``owner`` (BITMAP) serve lookups by id
and owner prefilters. Rows written after an index was built are searched
unindexed until :meth:`LanceMemoryStore.optimize` folds them in, which also
compacts files and removes table versions older than ``keep_versions_s``.

All calls use LanceDB's async API on one background event loop, so a BM25
query can run while the caller embeds the query text.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Awaitable, Iterable, Iterator, Sequence
from concurrent.futures import Future
from datetime import timedelta
from typing import Any, Literal, TypeVar

import lancedb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from lancedb.index import FTS, Bitmap, BTree, IndexConfig, IvfFlat
from lancedb.query import AsyncVectorQuery, ColumnOrdering, MatchQuery
from lancedb.table import AsyncTable

from tribal_memory.base.errors import (
    EmbeddingModelMismatch,
    InvalidInput,
    NotFound,
    StoreUnavailable,
)
from tribal_memory.base.models import Memory, SearchFilters
from tribal_memory.embeddings.base import Vector
from tribal_memory.store.base import MemoryStore, ScoredMemory, StoreCopy
from tribal_memory.store.event_loop import (
    next_batch,
    public_message,
    shared_event_loop,
    translated,
)
from tribal_memory.store.lance_rows import (
    COLUMNS,
    DIM_KEY,
    MODEL_KEY,
    filter_sql,
    in_list,
    nearest_rows,
    quote,
    scored,
    table_schema,
    to_memory,
    to_row,
)
from tribal_memory.store.recent import RecentRows, better, nearest_in, owners_only

TABLE = "memories"
_T = TypeVar("_T")
logger = logging.getLogger("tribal_memory.store")
_EXACT_MAX_ROWS = 300
"""Prefiltered vector searches over fewer rows than this skip the IVF index (exact)."""
_HEALTH_CHECK_WRITES = 50
"""Writes between two reads of the table's fragment count (a few ms each)."""
_INDEX_CHECK_S = 30.0
"""Seconds between re-reads of which vector index exists (another process may build it)."""
_IVF_PARTITION_ROWS = 1024
"""Rows per IVF partition the index is trained for (LanceDB's IVF_FLAT default is larger).

Smaller partitions let the near-duplicate check (``_NEAREST_NPROBES``)
scan fewer rows per vector while a search keeps its recall by probing
more of them (``ann_nprobes``). Measured at 100k memories: the check's 2
probes took half the time they took on LanceDB's default partitions and
found as many twins; search recall@10 stayed at 0.99 with 32 probes.
"""
_IVF_NAME = f"vector_ivf_p{_IVF_PARTITION_ROWS}_rows_"
"""Name prefix of the IVF index (its partition size); the rows it was trained on follow.

An IVF index named otherwise (built with other partitions, e.g. by an older
release as ``vector_ivf_rows_<n>``) is rebuilt at the next ``optimize()``.
"""
_NEAREST_NPROBES = 2
"""IVF partitions probed by :meth:`LanceMemoryStore.nearest` (near-duplicate checks)."""
_IVF_MAX_SEGMENTS = 2
"""Segments the IVF index may have before ``optimize()`` rebuilds it (see ``_retrain_due``)."""
_RETRAIN_GROWTH = 1.25
"""Growth since training after which extra segments make ``optimize()`` rebuild the index."""
_COPY_BATCH_ROWS = 2048
"""Rows per batch :meth:`LanceMemoryStore.copy_to` reads and writes."""


class LanceMemoryStore(MemoryStore):
    """:class:`~tribal_memory.store.base.MemoryStore` over a local (or object-store) LanceDB.

    Every call goes through LanceDB's async API on one shared background event
    loop (:class:`EventLoop`); methods block until their result is in, except
    the ``start_*`` ones, which return at once.

    Args:
        uri: LanceDB location (a directory path or any URI LanceDB supports).
        model_id: Embedding model the vectors come from; recorded in the table.
        dim: Vector dimension; recorded in the table.
        read_consistency_s: Seconds after which this handle sees writes made by
            other processes (0: check on every read).
        ann_index_min_rows: Row count at which an IVF_FLAT cosine index is built.
        ann_nprobes: IVF partitions searched per query once the index exists.
        optimize_every_rows: Least rows written between automatic ``optimize()``
            runs; the gap also grows to ``optimize_growth`` of the table.
        optimize_growth: Fraction of the table written before the next
            automatic ``optimize()`` (each one rewrites compacted files and
            indexes, so a fixed gap would make bulk loads quadratic), unless
            ``optimize_interval_s`` passed since the last one.
        optimize_interval_s: Seconds after the last ``optimize()`` past which
            ``optimize_every_rows`` written rows suffice (a store that grows
            slowly gets its rows indexed within this time; a bulk load runs
            at most one ``optimize()`` per interval beyond the growth rule).
        keep_versions_s: Table versions older than this are removed by ``optimize()``.
        optimize_small_fragments: Small fragments (each small write, update or
            delete leaves one) at which the automatic ``optimize()`` runs
            whatever the row count; checked every ``_HEALTH_CHECK_WRITES`` writes.
        index_cache_mb: Bound of LanceDB's in-memory cache of index data (MiB),
            and a quarter of it for table metadata. The cache keeps replaced
            index versions until evicted, so without a bound a long-running
            server's memory grows with every ``optimize()``.

    Raises:
        EmbeddingModelMismatch: the table was created with another model or dimension.
        StoreUnavailable: the location cannot be opened or created.
    """

    def __init__(
        self,
        uri: str,
        model_id: str,
        dim: int,
        *,
        read_consistency_s: float = 1.0,
        ann_index_min_rows: int = 5_000,
        ann_nprobes: int = 32,
        optimize_every_rows: int = 2_000,
        optimize_growth: float = 0.1,
        optimize_interval_s: float = 60.0,
        keep_versions_s: int = 300,
        optimize_small_fragments: int = 32,
        index_cache_mb: int = 1024,
    ) -> None:
        self.model_id = model_id
        self.dim = dim
        self._uri = uri
        self._ann_index_min_rows = ann_index_min_rows
        self._ann_nprobes = ann_nprobes
        self._optimize_every_rows = optimize_every_rows
        self._optimize_growth = optimize_growth
        self._optimize_interval_s = optimize_interval_s
        self._optimized_at = time.monotonic()
        self._keep_versions = timedelta(seconds=keep_versions_s)
        self._optimize_small_fragments = optimize_small_fragments
        self._write_lock = threading.Lock()
        """Held briefly by every write for the table commit and the bookkeeping below."""
        self._rewrite_lock = threading.Lock()
        """Held by updates, deletes and ``optimize()``: a compaction and a rewrite of the
        same fragment must not race (appends never conflict with a compaction)."""
        self._maintenance: threading.Thread | None = None
        self._maintenance_lock = threading.Lock()
        self._timer: threading.Timer | None = None
        """A pending re-check of the automatic optimize (see :meth:`_maybe_optimize`)."""
        self._rows_since_optimize = 0
        self._writes_since_check = 0
        self._ann_name: str | None = None
        """Name of the IVF vector index; None while there is none."""
        self._index_checked_at = time.monotonic()
        self._ann_trained_rows = 0
        self._recent = RecentRows()
        self._loop = shared_event_loop()
        session = lancedb.Session(
            index_cache_size_bytes=index_cache_mb * 1024**2,
            metadata_cache_size_bytes=index_cache_mb * 1024**2 // 4,
        )
        self._table: AsyncTable = self._run("open", self._open(uri, read_consistency_s, session))

    @classmethod
    def open_existing(cls, uri: str) -> LanceMemoryStore | None:
        """The store at ``uri`` with the model its table records; None when it has no table.

        For tools that need no embedding model (backup). No table is created
        when there is none (LanceDB's connect makes a missing local directory).

        Raises:
            StoreUnavailable: the location cannot be read.
        """
        found = shared_event_loop().submit(translated("open", _recorded_model(uri))).result()
        if found is None:
            return None
        model_id, dim = found
        return cls(uri, model_id, dim)

    def _run(self, action: str, awaitable: Awaitable[_T]) -> _T:
        return self._loop.submit(translated(action, awaitable)).result()

    async def _open(
        self, uri: str, read_consistency_s: float, session: lancedb.Session
    ) -> AsyncTable:
        db = await lancedb.connect_async(
            uri, read_consistency_interval=timedelta(seconds=read_consistency_s), session=session
        )
        if TABLE in (await db.list_tables()).tables:
            table = await db.open_table(TABLE)
        else:
            table = await db.create_table(
                TABLE, schema=table_schema(self.model_id, self.dim), exist_ok=True
            )
        self._check_model(await table.schema())
        indices = await table.list_indices()
        if not _has(indices, "FTS"):
            await table.create_index("content", config=FTS(with_position=False))
        # Scalar indexes: lookups by id and owner prefilters read the index, not every row.
        names = {tuple(index.columns) for index in indices}
        for column, config in (("memory_id", BTree()), ("owner", Bitmap())):
            if (column,) not in names:
                await table.create_index(column, config=config)
        self._ann_name, self._ann_trained_rows = _ann_state(indices)
        return table

    def _check_model(self, schema: pa.Schema) -> None:
        meta = schema.metadata or {}
        stored_model = meta.get(MODEL_KEY, b"?").decode()
        stored_dim = int(meta.get(DIM_KEY, b"0"))
        if stored_model != self.model_id or stored_dim != self.dim:
            raise EmbeddingModelMismatch(
                f"the store was built with embedding model {stored_model} ({stored_dim}-d) "
                f"but this instance uses {self.model_id} ({self.dim}-d); use the same "
                "model (TRIBAL_EMBEDDING_MODEL) or another data directory"
            )

    def refresh(self) -> None:
        """Read the newest table version from now on (other processes' writes included).

        Reads otherwise see another process's writes within ``read_consistency_s``;
        a check-then-write that must not miss them (is this id stored yet?) calls
        this first.

        Raises:
            StoreUnavailable: the table cannot be read.
        """
        self._run("refresh", self._table.checkout_latest())  # type: ignore[no-untyped-call]

    # -- writes ---------------------------------------------------------------

    def add(self, memories: Sequence[Memory], vectors: Vector) -> None:
        """See :meth:`MemoryStore.add`."""
        if not memories:
            return
        if vectors.shape != (len(memories), self.dim):
            raise InvalidInput(
                f"expected vectors of shape ({len(memories)}, {self.dim}), got {vectors.shape}"
            )
        rows = [to_row(m, v) for m, v in zip(memories, vectors, strict=True)]
        with self._write_lock:
            self._run("write", self._table.add(rows))
            self._rows_since_optimize += len(rows)
            for memory, vector in zip(memories, vectors, strict=True):
                self._recent.put(memory.memory_id, memory.owner, vector)
        self._maybe_optimize()

    def replace(self, memory: Memory, vector: Vector | None) -> None:
        """See :meth:`MemoryStore.replace`."""
        with self._rewrite_lock, self._write_lock:
            written = self._run("update", self._replace(memory, vector))
            self._rows_since_optimize += 1
            self._recent.put(memory.memory_id, memory.owner, written)
        self._maybe_optimize()

    async def _replace(self, memory: Memory, vector: Vector | None) -> Vector:
        if vector is None:
            where = f"memory_id = {quote(memory.memory_id)}"
            stored = await self._table.query().where(where).select(["vector"]).to_arrow()
            if not stored.num_rows:
                raise NotFound(f"no memory with id {memory.memory_id}")
            vector = np.asarray(stored.column("vector")[0].as_py(), dtype=np.float32)
        builder = self._table.merge_insert("memory_id").when_matched_update_all()
        result = await builder.execute([to_row(memory, vector)])
        if not result.num_updated_rows:
            raise NotFound(f"no memory with id {memory.memory_id}")
        return vector

    def delete(self, memory_ids: Sequence[str]) -> int:
        """See :meth:`MemoryStore.delete`."""
        if not memory_ids:
            return 0
        where = f"memory_id IN ({in_list(memory_ids)})"
        with self._rewrite_lock, self._write_lock:
            existing = int(self._run("delete", self._table.count_rows(where)))
            if existing:
                self._run("delete", self._table.delete(where))
                self._rows_since_optimize += existing
            self._recent.drop(memory_ids)
        if existing:
            self._maybe_optimize()
        return existing

    # -- reads ----------------------------------------------------------------

    def get(self, memory_ids: Sequence[str]) -> dict[str, Memory]:
        """See :meth:`MemoryStore.get`."""
        if not memory_ids:
            return {}
        query = self._table.query().where(f"memory_id IN ({in_list(memory_ids)})")
        rows = self._run("read", query.select(list(COLUMNS)).to_list())
        return {row["memory_id"]: to_memory(row) for row in rows}

    def _vector_query(
        self, vector: Vector, where: str | None, k: int, *, exact: bool
    ) -> AsyncVectorQuery:
        query = (
            self._table.query()
            .nearest_to(np.asarray(vector, dtype=np.float32))
            .column("vector")
            .distance_type("cosine")
            .select([*COLUMNS, "_distance"])
            .limit(k)
        )
        if exact:
            query = query.bypass_vector_index()
        elif self._ann_name is not None:
            query = query.nprobes(self._ann_nprobes)
        return query.where(where) if where else query

    async def _use_index(self, where: str | None, passing: int | None = None) -> bool:
        """True when the IVF index should answer a query with prefilter ``where``.

        A selective prefilter can leave too few rows in the probed partitions
        (seen once at 100k memories with a filter no scalar index covers), so
        when fewer than ``_EXACT_MAX_ROWS`` rows pass, the search is exact over
        them. Over a larger filtered set exact search costs several times the
        index's.

        Whether the index exists is re-read every ``_INDEX_CHECK_S`` seconds,
        so a replica that never optimises learns of another's index.
        """
        now = time.monotonic()
        if now - self._index_checked_at >= _INDEX_CHECK_S:
            self._index_checked_at = now
            self._ann_name, self._ann_trained_rows = _ann_state(await self._table.list_indices())
        if self._ann_name is None:
            return False
        if where is None:
            return True
        if passing is None:
            passing = await self._table.count_rows(where)
        return passing >= _EXACT_MAX_ROWS

    def vector_search(
        self,
        vector: Vector,
        filters: SearchFilters,
        k: int,
        *,
        exact: bool = False,
        passing: int | None = None,
    ) -> list[ScoredMemory]:
        """See :meth:`MemoryStore.vector_search`. Scores are cosine similarity in [-1, 1].

        Exact below ``ann_index_min_rows`` rows (also when fewer rows pass
        ``filters``, or with ``exact``); above, an IVF_FLAT index searched in
        ``ann_nprobes`` partitions (``bench perf`` reports its recall@10
        against exact search).
        """
        return self.start_vector_search(vector, filters, k, exact=exact, passing=passing).result()

    def start_vector_search(
        self,
        vector: Vector,
        filters: SearchFilters,
        k: int,
        *,
        exact: bool = False,
        passing: int | None = None,
    ) -> Future[list[ScoredMemory]]:
        """See :meth:`MemoryStore.start_vector_search`: runs on the store's event loop."""
        where = filter_sql(filters)

        async def search() -> list[ScoredMemory]:
            indexed = not exact and await self._use_index(where, passing)
            table = await self._vector_query(vector, where, k, exact=not indexed).to_arrow()
            return scored(table, "_distance", distance=True)

        return self._loop.submit(translated("vector search", search()))

    def nearest(
        self, groups: Sequence[tuple[Vector, SearchFilters]]
    ) -> list[list[tuple[str, float] | None]]:
        """See :meth:`MemoryStore.nearest`: one multi-vector query per group, all at once.

        The groups' queries run concurrently on the event loop and select ids
        and distances only. On the IVF index only the ``_NEAREST_NPROBES``
        partitions closest to each vector are searched: a near-duplicate lies
        next to its twin, so it is almost always there. When the rows outside
        the index are exactly those this process wrote since the last
        ``optimize()`` (:class:`RecentRows`), the query skips them and they
        are compared in memory instead; otherwise LanceDB scans them itself.
        """
        # Per group, the recent rows of its owners (None: LanceDB scans unindexed rows).
        recent = self._recent_rows_of([filters for _, filters in groups])

        async def search_all() -> list[pa.Table | None]:
            searches = (
                self._nearest(vectors, filters, fast=rows is not None)
                for (vectors, filters), rows in zip(groups, recent, strict=True)
            )
            return list(await asyncio.gather(*searches))

        tables = self._run("vector search", search_all())
        answers: list[list[tuple[str, float] | None]] = []
        for table, (vectors, _), rows in zip(tables, groups, recent, strict=True):
            found = nearest_rows(table, len(vectors))
            if rows is not None and len(vectors) > 0:
                found = better(found, nearest_in(vectors, *rows))
            answers.append(found)
        return answers

    def _recent_rows_of(
        self, filters: Sequence[SearchFilters]
    ) -> list[tuple[list[str], np.ndarray] | None]:
        """Per filter, (ids, unit vectors) of the recent rows it admits, taken under the lock.

        None for a filter on more than owners, and for all of them unless the
        IVF index's unindexed rows are exactly the rows :attr:`_recent` holds.
        """
        with self._write_lock:
            name = self._ann_name
            if name is None:
                return [None] * len(filters)
            try:
                stats = self._run("index stats", self._table.index_stats(name))
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
        indexed = fast or await self._use_index(where)
        query = (
            self._table.query()
            .nearest_to(matrix if len(matrix) > 1 else matrix[0])
            .column("vector")
            .distance_type("cosine")
            .select(["memory_id", "_distance"])
            .limit(1)
        )
        if not indexed:
            query = query.bypass_vector_index()
        else:
            query = query.nprobes(_NEAREST_NPROBES)
            if fast:
                query = query.fast_search()
        return await (query.where(where) if where else query).to_arrow()

    def score_ids(
        self, vector: Vector, memory_ids: Sequence[str], filters: SearchFilters
    ) -> list[ScoredMemory]:
        """See :meth:`MemoryStore.score_ids`."""
        if not memory_ids:
            return []
        where = f"memory_id IN ({in_list(memory_ids)})"
        extra = filter_sql(filters)
        if extra:
            where = f"({where}) AND ({extra})"
        query = self._vector_query(vector, where, len(memory_ids), exact=True)
        return scored(self._run("vector search", query.to_arrow()), "_distance", distance=True)

    async def _text_search(self, query: str, where: str | None, k: int) -> list[ScoredMemory]:
        builder = (
            self._table.query()
            .nearest_to_text(MatchQuery(query, "content"))  # type: ignore[call-arg]
            .select([*COLUMNS, "_score"])
            .limit(k)
        )
        if where:
            builder = builder.where(where)
        return scored(await builder.to_arrow(), "_score", distance=False)

    def start_text_search(
        self, query: str, filters: SearchFilters, k: int
    ) -> Future[list[ScoredMemory]]:
        """See :meth:`MemoryStore.start_text_search`: runs on the store's event loop."""
        if not query.strip():
            done: Future[list[ScoredMemory]] = Future()
            done.set_result([])
            return done
        search = self._text_search(query, filter_sql(filters), k)
        return self._loop.submit(translated("full-text search", search))

    def start_text_scores(
        self, query: str, filters: SearchFilters, k: int
    ) -> Future[list[tuple[str, float]]]:
        """See :meth:`MemoryStore.start_text_scores`: runs on the store's event loop."""
        if not query.strip():
            done: Future[list[tuple[str, float]]] = Future()
            done.set_result([])
            return done
        where = filter_sql(filters)

        async def search() -> list[tuple[str, float]]:
            builder = (
                self._table.query()
                .nearest_to_text(MatchQuery(query, "content"))  # type: ignore[call-arg]
                .select(["memory_id", "_score"])
                .limit(k)
            )
            if where:
                builder = builder.where(where)
            table = await builder.to_arrow()
            ids = table.column("memory_id").to_pylist()
            scores = table.column("_score").to_pylist()
            return [(str(i), float(v)) for i, v in zip(ids, scores, strict=True)]

        return self._loop.submit(translated("full-text search", search()))

    def select(self, filters: SearchFilters, limit: int) -> list[Memory]:
        """See :meth:`MemoryStore.select`."""
        where = filter_sql(filters)
        query = self._table.query().select(list(COLUMNS)).limit(limit)
        if where:
            query = query.where(where)
        return [to_memory(row) for row in self._run("read", query.to_list())]

    def page(self, filters: SearchFilters, limit: int, *, after: str | None = None) -> list[Memory]:
        """See :meth:`MemoryStore.page`: LanceDB sorts the rows passing the prefilter by id."""
        clauses = [c for c in (filter_sql(filters),) if c]
        if after is not None:
            clauses.append(f"memory_id > {quote(after)}")
        query = (
            self._table.query()
            .select(list(COLUMNS))
            .order_by([ColumnOrdering(column_name="memory_id")])
            .limit(limit)
        )
        if clauses:
            query = query.where(" AND ".join(f"({c})" for c in clauses))
        return [to_memory(row) for row in self._run("read", query.to_list())]

    def ids_of(self, filters: SearchFilters) -> list[str]:
        """See :meth:`MemoryStore.ids_of`."""
        where = filter_sql(filters)
        query = self._table.query().select(["memory_id"])
        if where:
            query = query.where(where)
        table = self._run("read", query.to_arrow())
        return [str(value) for value in table.column("memory_id").to_pylist()]

    def start_count(self, filters: SearchFilters | None = None) -> Future[int]:
        """See :meth:`MemoryStore.start_count`: runs on the store's event loop."""
        where = filter_sql(filters) if filters is not None else None

        async def count() -> int:
            return int(await self._table.count_rows(where))

        return self._loop.submit(translated("count", count()))

    def scan(
        self, filters: SearchFilters | None = None, *, batch_size: int = 512
    ) -> Iterator[tuple[list[Memory], Vector]]:
        """See :meth:`MemoryStore.scan`; reads one table version (a snapshot) in storage order."""
        if batch_size < 1:
            raise InvalidInput("batch_size must be at least 1")
        where = filter_sql(filters) if filters is not None else None
        query = self._table.query().select([*COLUMNS, "vector"])
        if where:
            query = query.where(where)
        reader = self._run("scan", query.to_batches(max_batch_length=batch_size))
        while (batch := self._run("scan", next_batch(reader))) is not None:
            if not batch.num_rows:
                continue
            flat = batch.column("vector").flatten().to_numpy(zero_copy_only=False)
            vectors = np.asarray(flat, dtype=np.float32).reshape(batch.num_rows, self.dim)
            memories = [to_memory(row) for row in batch.select(list(COLUMNS)).to_pylist()]
            yield memories, vectors

    def memory_ids(self) -> list[str]:
        """Every row's ``memory_id``, repeats kept: :meth:`ids_of` with no filter.

        Raises:
            StoreUnavailable: the read failed.
        """
        return self.ids_of(SearchFilters())

    def group_counts(self, column: Literal["owner", "kind"]) -> dict[str, int]:
        """See :meth:`MemoryStore.group_counts`."""
        if column not in ("owner", "kind"):
            raise InvalidInput(f"cannot group by {column!r}")
        values = self._run("read", self._table.query().select([column]).to_arrow()).column(column)
        return {row["values"]: row["counts"] for row in pc.value_counts(values).to_pylist()}

    # -- maintenance ----------------------------------------------------------

    @property
    def version(self) -> int:
        """Current table version (increases with every write)."""
        return int(self._run("read", self._table.version()))

    def index_state(self) -> dict[str, bool]:
        """``{"fts": bool, "ann": bool}``: whether the BM25 and the IVF vector index exist."""
        indices = self._run("read", self._table.list_indices())
        return {"fts": _has(indices, "FTS"), "ann": _has(indices, "IVF")}

    def ann_index_stats(self) -> dict[str, int] | None:
        """The IVF index: ``{"trained_rows", "indexed_rows", "unindexed_rows", "segments"}``.

        None while there is no IVF index. ``segments`` counts the parts a
        query searches (one after a (re)build, one more per ``optimize()``
        that folded rows in).

        Raises:
            StoreUnavailable: the index cannot be read.
        """
        name, trained = _ann_state(self._run("read", self._table.list_indices()))
        if name is None:
            return None
        stats = self._run("read", self._table.index_stats(name))
        if stats is None:
            return None
        return {
            "trained_rows": trained,
            "indexed_rows": int(stats.num_indexed_rows),
            "unindexed_rows": int(stats.num_unindexed_rows),
            "segments": int(getattr(stats, "num_indices", 1) or 1),
        }

    def health(self) -> dict[str, int]:
        """What slows reads: ``{"fragments", "small_fragments", "unindexed_rows", "versions"}``.

        ``unindexed_rows``: the most rows any scalar or full-text index lacks
        (rows written since the last ``optimize()``); ``versions``: table
        versions kept on disk.

        Raises:
            StoreUnavailable: the table cannot be read.
        """
        stats: Any = self._run("read", self._table.stats())  # a TypedDict in LanceDB 0.40
        fragments = stats["fragment_stats"]
        count, small = fragments["num_fragments"], fragments["num_small_fragments"]
        unindexed = 0
        for index in self._run("read", self._table.list_indices()):
            if str(index.index_type).upper().startswith("IVF"):
                continue  # the vector index: searched exactly past it (see RecentRows)
            found = self._run("read", self._table.index_stats(index.name))
            if found is not None:
                unindexed = max(unindexed, int(found.num_unindexed_rows))
        versions = len(self._run("read", self._table.list_versions()))  # type: ignore[no-untyped-call]
        return {
            "fragments": int(count),
            "small_fragments": int(small),
            "unindexed_rows": unindexed,
            "versions": versions,
        }

    def copy_to(self, target: str) -> StoreCopy:
        """See :meth:`MemoryStore.copy_to`: the table pinned at its current version, row by row.

        A handle of its own reads the newest version (every acknowledged write
        is in it: LanceDB commits a version before ``add`` returns) and pins
        it, so later writes do not reach the copy; the rows go in batches of
        ``_COPY_BATCH_ROWS`` into a table of the same schema and model
        metadata at ``target``, whose full-text index is then built (the
        scalar indexes are built when the copy is first opened).
        """
        try:
            return _copy_table(self._uri, target)
        except Exception as exc:  # noqa: BLE001 - LanceDB/Arrow raise many types
            raise StoreUnavailable(f"cannot copy the memory store: {public_message(exc)}") from exc

    def _maybe_optimize(self) -> None:
        """Start the automatic ``optimize()`` in the background when a write made it due.

        Due when enough rows were written (``optimize_every_rows``, and
        ``optimize_growth`` of the table or ``optimize_interval_s`` since the
        last run: rows outside the indexes slow every search), or, checked every
        ``_HEALTH_CHECK_WRITES`` writes of any kind (capture, update, delete),
        when the table has ``optimize_small_fragments`` small fragments: a few
        hundred one-row fragments slow every search fivefold (issue 14) long
        before the row count calls for a rebuild. The write that made it due
        has returned by then; see :meth:`optimize` for what waits for it.
        When only the interval is missing, a timer checks again once it has
        passed, so rows written just before a store falls quiet (searches and
        feedback write nothing here) are indexed all the same.
        """
        self._writes_since_check += 1
        self._check_maintenance()

    def _check_maintenance(self) -> None:
        """Start maintenance if due (see :meth:`_maybe_optimize`); no write is counted."""
        try:
            since = time.monotonic() - self._optimized_at
            enough_rows = self._rows_since_optimize >= self._optimize_every_rows
            due = enough_rows and (
                since >= self._optimize_interval_s
                or self._rows_since_optimize >= self._optimize_growth * self.count()
            )
            if enough_rows and not due:
                self._check_later(self._optimize_interval_s - since)
            if not due and self._writes_since_check >= _HEALTH_CHECK_WRITES:
                self._writes_since_check = 0
                due = self.health()["small_fragments"] >= self._optimize_small_fragments
        except StoreUnavailable as exc:
            logger.warning("automatic optimize check skipped: %s", exc.detail)
            return
        if due:
            self._start_maintenance()

    def _check_later(self, delay_s: float) -> None:
        """Run the automatic-optimize check again in ``delay_s`` seconds (one timer at a time)."""
        with self._maintenance_lock:
            if self._timer is not None and self._timer.is_alive():
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

    def wait_for_maintenance(self, timeout_s: float | None = None) -> bool:
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
        """Cancel a pending check and wait for a running automatic ``optimize()`` to finish.

        See :meth:`MemoryStore.close`.
        """
        with self._maintenance_lock:
            timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
        self.wait_for_maintenance()

    def optimize(self) -> None:
        """See :meth:`MemoryStore.optimize`.

        Also builds the IVF_FLAT index once the table has ``ann_index_min_rows``
        rows, and retrains it (new partitions) whenever the table has grown to
        four times the rows it was trained on or the index would get more than
        ``_IVF_MAX_SEGMENTS`` segments.

        Searches and captures go on while it runs: an append never conflicts
        with a compaction, and rows appended meanwhile simply stay unindexed
        until the next run. Updates and deletes wait for it (they rewrite
        fragments a compaction may be rewriting). A crash in the middle loses
        nothing: each LanceDB commit is atomic, and the files of an unfinished
        step are removed by a later ``optimize()``.
        """
        with self._rewrite_lock:
            with self._write_lock:
                written, folded = self._rows_since_optimize, self._recent.ids()
            self._run("optimize", self._optimize())
            with self._write_lock:
                self._rows_since_optimize = max(0, self._rows_since_optimize - written)
                self._recent.drop(folded)
                self._optimized_at = time.monotonic()

    async def _optimize(self) -> None:
        rows = await self._table.count_rows()
        indices = await self._table.list_indices()
        self._ann_name, self._ann_trained_rows = _ann_state(indices)
        if rows >= self._ann_index_min_rows and await self._retrain_due(rows):
            # The new index is built before the old one is dropped, so a crash
            # in between leaves a usable index (the next optimize drops the other).
            name = f"{_IVF_NAME}{rows}"
            config = IvfFlat(distance_type="cosine", target_partition_size=_IVF_PARTITION_ROWS)
            await self._table.create_index("vector", config=config, name=name)
            self._ann_name, self._ann_trained_rows = name, rows
        for index in indices:
            if str(index.index_type).upper().startswith("IVF") and index.name != self._ann_name:
                await self._table.drop_index(index.name)
        await self._table.optimize(cleanup_older_than=self._keep_versions)

    async def _retrain_due(self, rows: int) -> bool:
        """Whether ``optimize()`` should (re)build the IVF index instead of extending it.

        Yes with no index or one not named by this release (other
        partitions), and when the table has grown to four times the rows the
        index was trained on (its partitions no longer fit the data).
        Also when folding in the unindexed rows would give the index a segment
        beyond ``_IVF_MAX_SEGMENTS`` (LanceDB extends an index by one segment
        per ``optimize()``, and a query searches every segment), provided the
        table has grown by ``_RETRAIN_GROWTH`` since training: each rebuild is
        then at least that much larger than the last, so the rebuilds of a
        growing table cost a bounded multiple of the last one.
        """
        if self._ann_name is None or not self._ann_name.startswith(_IVF_NAME):
            return True  # none yet, or built with other partitions
        if rows >= 4 * self._ann_trained_rows:
            return True
        if rows < _RETRAIN_GROWTH * self._ann_trained_rows:
            return False
        stats = await self._table.index_stats(self._ann_name)
        if stats is None or not stats.num_unindexed_rows:
            return False
        return int(getattr(stats, "num_indices", 1) or 1) >= _IVF_MAX_SEGMENTS


async def _recorded_model(uri: str) -> tuple[str, int] | None:
    """(model id, dimension) recorded in the table at ``uri``; None when there is no table."""
    db = await lancedb.connect_async(uri)
    if TABLE not in (await db.list_tables()).tables:
        return None
    meta = (await (await db.open_table(TABLE)).schema()).metadata or {}
    return meta.get(MODEL_KEY, b"?").decode(), int(meta.get(DIM_KEY, b"0"))


def _copy_table(source_uri: str, target_uri: str) -> StoreCopy:
    """Copy the table at ``source_uri`` as of its newest version into ``target_uri``."""
    table = lancedb.connect(source_uri).open_table(TABLE)
    version = int(table.version)
    table.checkout(version)  # later writes by the server do not reach this handle
    schema = table.schema
    reader = table.search().select(list(schema.names)).limit(None).to_batches(_COPY_BATCH_ROWS)
    ids: list[str] = []

    def batches() -> Iterator[pa.RecordBatch]:
        for batch in reader:
            ids.extend(str(i) for i in batch.column("memory_id").to_pylist())
            yield batch.select(schema.names)

    data = pa.RecordBatchReader.from_batches(schema, batches())
    copy = lancedb.connect(target_uri).create_table(TABLE, data=data, schema=schema)
    copy.create_index("content", config=FTS(with_position=False))
    return StoreCopy(version, ids)


def _has(indices: Iterable[IndexConfig], index_type: str) -> bool:
    return any(str(index.index_type).upper().startswith(index_type) for index in indices)


def _ann_state(indices: Iterable[IndexConfig]) -> tuple[str | None, int]:
    """(name of the IVF index or None, rows it was trained on) from ``list_indices()``.

    The trained row count is part of the index name (``_IVF_NAME`` + ``<n>``);
    an index named otherwise counts as trained on its indexed rows. Of two (a
    rebuild interrupted before it dropped the old one), the one trained on
    more rows.
    """
    found: list[tuple[int, str]] = []
    for index in indices:
        if str(index.index_type).upper().startswith("IVF"):
            name = str(index.name)
            if name.startswith(_IVF_NAME) and name[len(_IVF_NAME) :].isdigit():
                found.append((int(name[len(_IVF_NAME) :]), name))
            else:
                found.append((int(getattr(index, "num_indexed_rows", 0) or 0), name))
    if not found:
        return None, 0
    rows, name = max(found)
    return name, rows

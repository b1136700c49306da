"""LanceDB memory store: one table ``memories``, vectors and a BM25 index on ``content``.

The table has a vector column and a native full-text (BM25) index on ``content``.

Vector search uses cosine distance: exact below ``ann_index_min_rows``, an
IVF_FLAT index above it (retrained as the table grows; IVF_SQ with a refine
step from ``ann_quantised_min_rows``). Full-text search uses
LanceDB's inverted index with its English stemmer and stop-word list. Scalar
indexes on ``memory_id`` (BTREE), ``owner`` and ``kind`` (BITMAP) serve lookups
by id, owner prefilters and the summary exclusion of every search. Rows
written after an index was built are searched unindexed until
:meth:`LanceMemoryStore.optimize` folds them in, which also compacts files and
removes table versions superseded more than ``keep_versions_s`` ago.

All calls use LanceDB's async API on one background event loop, so a BM25
query can run while the caller embeds the query text.

:class:`LanceMemoryStore` (here) opens the table, writes and reads rows; it
delegates the searches to :class:`~.lance_search.LanceSearch` and the
upkeep (automatic ``optimize()``, health, copies) to
:class:`~.lance_upkeep.Upkeep`; :mod:`.lance_index` decides about the
indexes and :mod:`.lance_rows` converts rows.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import Future
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Literal

import numpy as np
import pyarrow.compute as pc
from lancedb.query import ColumnOrdering

from tribal_memory.base.config import (
    DEFAULT_ANN_QUANTISED_MIN_ROWS,
    DEFAULT_KEEP_VERSIONS_S,
    DEFAULT_ROW_KEYS_MAX_ROWS,
    DEFAULT_WHOLE_ROWS_MAX_MB,
    Settings,
)
from tribal_memory.base.errors import InvalidInput, NotFound
from tribal_memory.base.models import Memory, SearchFilters
from tribal_memory.embeddings.base import Vector
from tribal_memory.store.base import MemoryStore, RowRef, ScoredMemory, StoreCopy
from tribal_memory.store.event_loop import next_batch, shared_event_loop, translated
from tribal_memory.store.lance_footprint import TableFootprint, table_footprint
from tribal_memory.store.lance_index import AnnIndex
from tribal_memory.store.lance_mirror import VectorMirror
from tribal_memory.store.lance_rowcache import RowCounts
from tribal_memory.store.lance_rows import (
    COLUMNS,
    TABLE,
    filter_sql,
    in_list,
    quote,
    to_memory,
    to_row,
    vectors_of,
)
from tribal_memory.store.lance_search import LanceSearch
from tribal_memory.store.lance_table import TableHandle, recorded_model
from tribal_memory.store.lance_upkeep import OptimizePolicy, Upkeep, copy_table
from tribal_memory.store.lance_versions import pin_version
from tribal_memory.store.recent import RecentRows


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
        ann_index_min_rows: Row count at which an IVF cosine index is built.
        ann_quantised_min_rows: Row count from which that index is built as
            IVF_SQ, searched with a refine step (:data:`.lance_index.REFINE_FACTOR`).
        ann_nprobes: IVF partitions searched per query once the index exists, up to
            250k trained rows; more past that (:func:`.lance_index.probes_for`).
        exact_vector_max_rows: Tables of up to this many rows answer vector
            search from an in-memory copy of their vectors
            (:class:`~.lance_mirror.VectorMirror`; 0: never).
        row_keys_max_rows: Tables of up to this many rows keep every row's key
            in memory (:class:`~.lance_keys.KeyTable`; 0: never).
        whole_rows_max_mb: Tables whose rows (every column but the vector) fit
            in this many MiB keep them whole in that key table, so a search's
            hits are read from memory (0: never).
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
        keep_versions_s: Seconds a superseded table version stays readable
            before ``optimize()`` removes it (:mod:`.lance_versions`): above
            every reader's ``read_consistency_s`` plus its longest search.
        optimize_small_fragments: Small fragments (each small write, update or
            delete leaves one) at which the automatic ``optimize()`` runs
            whatever the row count; checked every
            :data:`~.lance_upkeep.HEALTH_CHECK_WRITES` writes.
        index_cache_mb: Bound of LanceDB's in-memory cache of index data (MiB),
            and a quarter of it for table metadata. The cache keeps replaced
            index versions until evicted, so without a bound a long-running
            server's memory grows with every ``optimize()``.
        maintenance_lock: Held by every ``optimize()`` (taken first): with a
            lock shared by the processes using one table (the core passes a
            PostgreSQL advisory lock), they optimise it one at a time.

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
        ann_quantised_min_rows: int = DEFAULT_ANN_QUANTISED_MIN_ROWS,
        ann_nprobes: int = 32,
        exact_vector_max_rows: int = 25_000,
        row_keys_max_rows: int = DEFAULT_ROW_KEYS_MAX_ROWS,
        whole_rows_max_mb: int = DEFAULT_WHOLE_ROWS_MAX_MB,
        optimize_every_rows: int = 2_000,
        optimize_growth: float = 0.1,
        optimize_interval_s: float = 60.0,
        keep_versions_s: int = DEFAULT_KEEP_VERSIONS_S,
        optimize_small_fragments: int = 32,
        index_cache_mb: int = 1024,
        maintenance_lock: AbstractContextManager[object] | None = None,
    ) -> None:
        self.model_id = model_id
        self.dim = dim
        self._uri = uri
        self._write_lock = threading.Lock()
        """Held briefly by every write for the table commit and the bookkeeping below."""
        self._rewrite_lock = threading.Lock()
        """Held by updates, deletes and ``optimize()``: a compaction and a rewrite of the
        same fragment must not race (appends never conflict with a compaction)."""
        self._ann = AnnIndex()
        self._recent = RecentRows()
        self._counts = RowCounts(read_consistency_s)
        self._groups: dict[str, tuple[int, dict[str, int]]] = {}
        """Per column, the table version :meth:`group_counts` last scanned and its answer."""
        self._loop = shared_event_loop()
        self._handle = TableHandle(
            self._loop,
            uri,
            model_id,
            dim,
            read_consistency_s=read_consistency_s,
            index_cache_mb=index_cache_mb,
        )
        self._ann.update(self._handle.indices)
        self._search = LanceSearch(
            self._handle,
            self._loop,
            self._ann,
            self._recent,
            self._write_lock,
            nprobes=ann_nprobes,
            mirror=VectorMirror(self._handle, exact_vector_max_rows),
            row_keys_max_rows=row_keys_max_rows,
            whole_rows_max_mb=whole_rows_max_mb,
            counts=self._counts,
        )
        policy = OptimizePolicy(
            ann_index_min_rows=ann_index_min_rows,
            ann_quantised_min_rows=ann_quantised_min_rows,
            every_rows=optimize_every_rows,
            growth=optimize_growth,
            interval_s=optimize_interval_s,
            keep_versions_s=keep_versions_s,
            small_fragments=optimize_small_fragments,
        )
        self._upkeep = Upkeep(
            self._handle,
            self._loop,
            self._ann,
            self._recent,
            write_lock=self._write_lock,
            rewrite_lock=self._rewrite_lock,
            policy=policy,
            maintenance_lock=maintenance_lock,
        )

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        model_id: str,
        dim: int,
        *,
        maintenance_lock: AbstractContextManager[object] | None = None,
    ) -> LanceMemoryStore:
        """The store at ``settings.lancedb_uri`` with the upkeep and index settings it names.

        Args:
            settings: ``lancedb_uri``, ``read_consistency_s``, the ``ann_*``,
                ``exact_vector_max_rows``, ``row_keys_max_rows``, ``whole_rows_max_mb``,
                ``optimize_*``, ``keep_versions_s`` and ``index_cache_mb`` settings.
            model_id: As in the constructor.
            dim: As in the constructor.
            maintenance_lock: As in the constructor.

        Raises:
            EmbeddingModelMismatch, StoreUnavailable: as the constructor.
        """
        return cls(
            settings.lancedb_uri,
            model_id,
            dim,
            read_consistency_s=settings.read_consistency_s,
            ann_index_min_rows=settings.ann_index_min_rows,
            ann_quantised_min_rows=settings.ann_quantised_min_rows,
            ann_nprobes=settings.ann_nprobes,
            exact_vector_max_rows=settings.exact_vector_max_rows,
            row_keys_max_rows=settings.row_keys_max_rows,
            whole_rows_max_mb=settings.whole_rows_max_mb,
            optimize_every_rows=settings.optimize_every_rows,
            optimize_growth=settings.optimize_growth,
            optimize_interval_s=settings.optimize_interval_s,
            keep_versions_s=settings.keep_versions_s,
            optimize_small_fragments=settings.optimize_small_fragments,
            index_cache_mb=settings.index_cache_mb,
            maintenance_lock=maintenance_lock,
        )

    @classmethod
    def open_existing(
        cls, uri: str, *, keep_versions_s: int = DEFAULT_KEEP_VERSIONS_S
    ) -> LanceMemoryStore | None:
        """The store at ``uri`` with the model its table records; None when it has no table.

        For tools that need no embedding model (backup). No table is created
        when there is none (LanceDB's connect makes a missing local directory).
        ``keep_versions_s`` is the constructor's.

        Raises:
            StoreUnavailable: the location cannot be read.
        """
        found = shared_event_loop().run("open", recorded_model(uri))
        if found is None:
            return None
        model_id, dim = found
        return cls(uri, model_id, dim, keep_versions_s=keep_versions_s)

    def refresh(self) -> None:
        """Read the newest table version from now on (other processes' writes included).

        Reads otherwise see another process's writes within ``read_consistency_s``;
        a check-then-write that must not miss them (is this id stored yet?) calls
        this first.

        Raises:
            StoreUnavailable: the table cannot be read.
        """
        self._loop.run("refresh", self._handle.table.checkout_latest())  # type: ignore[no-untyped-call]
        self._counts.clear()

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
            self._loop.run("write", self._handle.table.add(rows))
            self._wrote()
            self._upkeep.note_rows(len(rows))
            for memory, vector in zip(memories, vectors, strict=True):
                self._recent.put(memory.memory_id, memory.owner, vector)
        self._upkeep.after_write()

    def replace(self, memory: Memory, vector: Vector | None) -> None:
        """See :meth:`MemoryStore.replace`."""
        with self._rewrite_lock, self._write_lock:
            written = self._loop.run("update", self._replace(memory, vector))
            self._wrote()
            self._upkeep.note_rows(1)
            self._recent.put(memory.memory_id, memory.owner, written)
        self._upkeep.after_write()

    async def _replace(self, memory: Memory, vector: Vector | None) -> Vector:
        table = self._handle.table
        if vector is None:
            where = f"memory_id = {quote(memory.memory_id)}"
            stored = await table.query().where(where).select(["vector"]).to_arrow()
            if not stored.num_rows:
                raise NotFound(f"no memory with id {memory.memory_id}")
            vector = np.asarray(stored.column("vector")[0].as_py(), dtype=np.float32)
        builder = table.merge_insert("memory_id").when_matched_update_all()
        result = await builder.execute([to_row(memory, vector)])
        if not result.num_updated_rows:
            raise NotFound(f"no memory with id {memory.memory_id}")
        return vector

    def rekey(self, old_id: str, memory: Memory, vector: Vector) -> None:
        """See :meth:`MemoryStore.rekey`."""
        with self._rewrite_lock, self._write_lock:
            self._loop.run("update", self._rekey(old_id, memory, vector))
            self._wrote()
            self._upkeep.note_rows(2)
            self._recent.drop([old_id])
            self._recent.put(memory.memory_id, memory.owner, vector)
        self._upkeep.after_write()

    async def _rekey(self, old_id: str, memory: Memory, vector: Vector) -> None:
        table, where = self._handle.table, f"memory_id = {quote(old_id)}"
        if not await table.count_rows(where):
            raise NotFound(f"no memory with id {old_id}")
        # One merge: the new row is inserted and the old one deleted in the same commit.
        builder = (
            table.merge_insert("memory_id")
            .when_not_matched_insert_all()
            .when_not_matched_by_source_delete(where)
        )
        await builder.execute([to_row(memory, np.asarray(vector, dtype=np.float32))])

    def delete(self, memory_ids: Sequence[str]) -> int:
        """See :meth:`MemoryStore.delete`."""
        if not memory_ids:
            return 0
        where = f"memory_id IN ({in_list(memory_ids)})"
        with self._rewrite_lock, self._write_lock:
            existing = int(self._loop.run("delete", self._handle.table.count_rows(where)))
            if existing:
                self._loop.run("delete", self._handle.table.delete(where))
                self._wrote()
                self._upkeep.note_rows(existing)
            self._recent.drop(memory_ids)
        if existing:
            self._upkeep.after_write()
        return existing

    # -- reads ----------------------------------------------------------------

    def get(self, memory_ids: Sequence[str]) -> dict[str, Memory]:
        """See :meth:`MemoryStore.get`."""
        if not memory_ids:
            return {}
        return self._search.get(memory_ids)

    def select(self, filters: SearchFilters, limit: int) -> list[Memory]:
        """See :meth:`MemoryStore.select`."""
        where = filter_sql(filters)
        query = self._handle.table.query().select(list(COLUMNS)).limit(limit)
        if where:
            query = query.where(where)
        return [to_memory(row) for row in self._loop.run("read", query.to_list())]

    def page(self, filters: SearchFilters, limit: int, *, after: str | None = None) -> list[Memory]:
        """See :meth:`MemoryStore.page`: LanceDB sorts the rows passing the prefilter by id."""
        clauses = [c for c in (filter_sql(filters),) if c]
        if after is not None:
            clauses.append(f"memory_id > {quote(after)}")
        query = (
            self._handle.table.query()
            .select(list(COLUMNS))
            .order_by([ColumnOrdering(column_name="memory_id")])
            .limit(limit)
        )
        if clauses:
            query = query.where(" AND ".join(f"({c})" for c in clauses))
        return [to_memory(row) for row in self._loop.run("read", query.to_list())]

    def ids_of(self, filters: SearchFilters) -> list[str]:
        """See :meth:`MemoryStore.ids_of`."""
        where = filter_sql(filters)
        query = self._handle.table.query().select(["memory_id"])
        if where:
            query = query.where(where)
        table = self._loop.run("read", query.to_arrow())
        return [str(value) for value in table.column("memory_id").to_pylist()]

    def start_count(self, filters: SearchFilters | None = None) -> Future[int]:
        """See :meth:`MemoryStore.start_count`: runs on the store's event loop.

        A count is kept until this handle writes or the read consistency
        interval passes (:class:`RowCounts`), so searches do not count the
        same filter again and again.
        """
        where = filter_sql(filters) if filters is not None else None
        kept = self._counts.get(where)
        if kept is not None:
            done: Future[int] = Future()
            done.set_result(kept)
            return done
        return self._loop.submit(translated("count", self._search.passing(where)))

    def _wrote(self) -> None:
        """Forget what searches kept of the table's rows (called under the write lock)."""
        self._counts.clear()

    def scan(
        self, filters: SearchFilters | None = None, *, batch_size: int = 512
    ) -> Iterator[tuple[list[Memory], Vector]]:
        """See :meth:`MemoryStore.scan`; reads one table version (a snapshot) in storage order."""
        if batch_size < 1:
            raise InvalidInput("batch_size must be at least 1")
        where = filter_sql(filters) if filters is not None else None
        query = self._handle.table.query().select([*COLUMNS, "vector"])
        if where:
            query = query.where(where)
        # A scan of more than one batch (an export) pins its version once a second
        # batch is read: optimize() removes versions superseded keep_versions_s ago.
        version = int(self._loop.run("scan", self._handle.table.version()))
        pin: str | None = None
        try:
            reader = self._loop.run("scan", query.to_batches(max_batch_length=batch_size))
            batch = self._loop.run("scan", next_batch(reader))
            while batch is not None:
                following = self._loop.run("scan", next_batch(reader))
                if following is not None and pin is None:
                    pin = self._loop.run("scan", pin_version(self._handle.table, version))
                if batch.num_rows:
                    memories = [to_memory(row) for row in batch.select(list(COLUMNS)).to_pylist()]
                    yield memories, vectors_of(batch)
                batch = following
        finally:
            if pin is not None:
                self._loop.run("scan", self._handle.table.tags.delete(pin))

    def memory_ids(self) -> list[str]:
        """Every row's ``memory_id``, repeats kept: :meth:`ids_of` with no filter (or raises)."""
        return self.ids_of(SearchFilters())

    def group_counts(self, column: Literal["owner", "kind"]) -> dict[str, int]:
        """See :meth:`MemoryStore.group_counts`.

        A scan of the column (about 0.2 s at a million rows), kept with the table
        version it read: asked again before the next write, the counts are
        returned without a scan (``/v1/stats`` polled by a dashboard or plugin).
        """
        if column not in ("owner", "kind"):
            raise InvalidInput(f"cannot group by {column!r}")
        # The version is read before the scan: a write in between makes the
        # counts newer than their version, never older.
        version = self.version
        kept = self._groups.get(column)
        if kept is not None and kept[0] == version:
            return dict(kept[1])
        table = self._loop.run("read", self._handle.table.query().select([column]).to_arrow())
        values = table.column(column)
        counts = {row["values"]: row["counts"] for row in pc.value_counts(values).to_pylist()}
        self._groups[column] = (version, counts)
        return dict(counts)

    # -- search (see LanceSearch) ---------------------------------------------

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

        ``exact`` bypasses the IVF index (``bench perf`` compares the two's
        recall@10); see :meth:`LanceSearch.start_vector_search` for when it is used.
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
        """See :meth:`MemoryStore.start_vector_search`; :meth:`LanceSearch.start_vector_search`.

        Counted as a scan of the unindexed rows (:meth:`Upkeep.after_search`)
        unless the in-memory vector copy answers.
        """
        if not self._search.vectors_in_memory:
            self._upkeep.after_search()
        return self._search.start_vector_search(vector, filters, k, exact=exact, passing=passing)

    def nearest(
        self, groups: Sequence[tuple[Vector, SearchFilters]]
    ) -> list[list[tuple[str, float] | None]]:
        """See :meth:`MemoryStore.nearest`; the groups run at once (:meth:`LanceSearch.nearest`)."""
        return self._search.nearest(groups)

    def vectors(self, memory_ids: Sequence[str]) -> dict[str, Vector]:
        """See :meth:`MemoryStore.vectors`: read by id (the ``memory_id`` index)."""
        return self._search.vectors(memory_ids)

    def score_ids(
        self, vector: Vector, memory_ids: Sequence[str], filters: SearchFilters
    ) -> list[ScoredMemory]:
        """See :meth:`MemoryStore.score_ids`: exact cosine similarity in [-1, 1], best first."""
        return self._search.score_ids(vector, memory_ids, filters)

    def start_text_search(
        self, query: str, filters: SearchFilters, k: int
    ) -> Future[list[ScoredMemory]]:
        """See :meth:`MemoryStore.start_text_search`: runs on the store's event loop.

        Counted as a scan of the unindexed rows (:meth:`Upkeep.after_search`).
        """
        self._upkeep.after_search()
        return self._search.start_text_search(query, filters, k)

    def start_text_scores(
        self, query: str, filters: SearchFilters, k: int
    ) -> Future[list[tuple[RowRef, float]]]:
        """See :meth:`MemoryStore.start_text_scores`: runs on the store's event loop.

        Counted as a scan of the unindexed rows (:meth:`Upkeep.after_search`).
        """
        self._upkeep.after_search()
        return self._search.start_text_scores(query, filters, k)

    # -- maintenance (see Upkeep) ---------------------------------------------

    @property
    def version(self) -> int:
        """Current table version (increases with every write)."""
        return int(self._loop.run("read", self._handle.table.version()))

    def index_state(self) -> dict[str, bool]:
        """See :meth:`MemoryStore.index_state`: ``{"fts": bool, "ann": bool}``."""
        return self._upkeep.index_state()

    def ann_index_stats(self) -> dict[str, int] | None:
        """The IVF index's row counts and segments, or None; see :meth:`Upkeep.ann_index_stats`."""
        return self._upkeep.ann_index_stats()

    def health(self) -> dict[str, int]:
        """See :meth:`MemoryStore.health` and :meth:`Upkeep.health`."""
        return self._upkeep.health()

    def cache_bytes(self) -> int:
        """See :meth:`MemoryStore.cache_bytes`: LanceDB's index and metadata caches of this handle.

        Bounded by ``index_cache_mb`` (index data) plus a quarter of it (metadata).
        """
        return self._handle.cache_bytes

    def footprint(self) -> TableFootprint | None:
        """Bytes on disk by what they hold (:func:`~.lance_footprint.table_footprint`).

        None when the table is not in a local directory (object storage).

        Raises:
            StoreUnavailable: the table cannot be read.
        """
        table_dir = Path(self._uri) / f"{TABLE}.lance"
        if "://" in self._uri or not table_dir.is_dir():
            return None
        rows = int(self._loop.run("count", self._handle.table.count_rows()))
        return table_footprint(table_dir, rows, self.dim)

    def copy_to(self, target: str) -> StoreCopy:
        """See :meth:`MemoryStore.copy_to`: the current version, row by row (:func:`copy_table`)."""
        return copy_table(self._uri, target)

    def wait_for_maintenance(self, timeout_s: float | None = None) -> bool:
        """Wait until no automatic ``optimize()`` runs; True when none is running now.

        Args:
            timeout_s: Longest wait in seconds (None: as long as it takes).
        """
        return self._upkeep.wait(timeout_s)

    def close(self) -> None:
        """See :meth:`MemoryStore.close`: waits for a running automatic ``optimize()``."""
        self._upkeep.close()

    def optimize(self) -> None:
        """See :meth:`MemoryStore.optimize`; also (re)builds the IVF index (see :class:`Upkeep`)."""
        self._upkeep.optimize()

"""LanceDB memory store: one table ``memories`` with a vector column and a
native full-text (BM25) index on ``content``.

Vector search uses cosine distance (exact below ``ann_index_min_rows``, an
IVF_FLAT index above it). Full-text search uses LanceDB's inverted index with
its English stemmer and stop-word list. Rows written after an index was built
are searched unindexed until :meth:`LanceMemoryStore.optimize` folds them in,
which also compacts files and removes table versions older than
``keep_versions_s``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import lancedb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from lancedb.index import FTS, IvfFlat
from lancedb.query import MatchQuery

from tribal_memory.embeddings.base import Vector
from tribal_memory.errors import (
    EmbeddingModelMismatch,
    InvalidInput,
    NotFound,
    StoreUnavailable,
    TribalError,
)
from tribal_memory.models import SHARED_OWNER, Memory, SearchFilters
from tribal_memory.store.base import ScoredMemory

TABLE = "memories"
MODEL_KEY = b"tribal.embedding_model"
DIM_KEY = b"tribal.embedding_dim"
_COLUMNS = (
    "memory_id",
    "content",
    "owner",
    "kind",
    "tags",
    "source",
    "doc_id",
    "chunk_index",
    "parent_id",
    "created_at",
    "updated_at",
    "event_time",
    "anchor_text",
    "metadata",
)
_ANN_NPROBES = 20


def _schema(model_id: str, dim: int) -> pa.Schema:
    ts = pa.timestamp("us", tz="UTC")
    return pa.schema(
        [
            pa.field("memory_id", pa.string(), nullable=False),
            pa.field("content", pa.string(), nullable=False),
            pa.field("owner", pa.string(), nullable=False),
            pa.field("kind", pa.string(), nullable=False),
            pa.field("tags", pa.list_(pa.string())),
            pa.field("source", pa.string()),
            pa.field("doc_id", pa.string()),
            pa.field("chunk_index", pa.int32()),
            pa.field("parent_id", pa.string()),
            pa.field("created_at", ts, nullable=False),
            pa.field("updated_at", ts, nullable=False),
            pa.field("event_time", ts),
            pa.field("anchor_text", pa.string()),
            pa.field("metadata", pa.string()),
            pa.field("vector", pa.list_(pa.float32(), dim)),
        ],
        metadata={MODEL_KEY: model_id.encode(), DIM_KEY: str(dim).encode()},
    )


def _quote(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _in_list(values: Sequence[str]) -> str:
    return ", ".join(_quote(v) for v in values)


def _timestamp(value: datetime) -> str:
    if value.tzinfo is None:
        raise InvalidInput("time filters need a timezone (e.g. 2024-01-01T00:00:00Z)")
    try:
        utc = value.astimezone(UTC)
    except OverflowError as exc:  # e.g. 0001-01-01T00:00:00+01:00 is before year 1 in UTC
        raise InvalidInput(f"time filter {value.isoformat()} is out of range") from exc
    # The year zero-padded: strftime("%Y") writes year 999 as "999", which LanceDB rejects.
    return "TIMESTAMP " + _quote(f"{utc.year:04d}-{utc:%m-%dT%H:%M:%S.%f}Z")


def filter_sql(filters: SearchFilters) -> str | None:
    """The SQL ``WHERE`` clause (DataFusion dialect) for ``filters``, or None for no filter."""
    clauses: list[str] = []
    if filters.owner is not None:
        owners = [filters.owner]
        if filters.include_shared and filters.owner != SHARED_OWNER:
            owners.append(SHARED_OWNER)
        clauses.append(f"owner IN ({_in_list(owners)})")
    if filters.tags:
        clauses.append(f"array_has_any(tags, [{_in_list(filters.tags)}])")
    if filters.kinds:
        clauses.append(f"kind IN ({_in_list(filters.kinds)})")
    if filters.sources:
        clauses.append(f"source IN ({_in_list(filters.sources)})")
    if filters.since is not None:
        clauses.append(f"coalesce(event_time, created_at) >= {_timestamp(filters.since)}")
    if filters.until is not None:
        clauses.append(f"coalesce(event_time, created_at) <= {_timestamp(filters.until)}")
    return " AND ".join(clauses) if clauses else None


def _to_row(memory: Memory, vector: Vector) -> dict[str, Any]:
    return {
        "memory_id": memory.memory_id,
        "content": memory.content,
        "owner": memory.owner,
        "kind": memory.kind,
        "tags": list(memory.tags),
        "source": memory.source,
        "doc_id": memory.doc_id,
        "chunk_index": memory.chunk_index,
        "parent_id": memory.parent_id,
        "created_at": memory.created_at,
        "updated_at": memory.updated_at,
        "event_time": memory.event_time,
        "anchor_text": memory.anchor_text,
        "metadata": json.dumps(memory.metadata, sort_keys=True),
        "vector": np.asarray(vector, dtype=np.float32).tolist(),
    }


def _utc(value: datetime | None) -> datetime | None:
    return None if value is None else value.astimezone(UTC)


def _to_memory(row: dict[str, Any]) -> Memory:
    created = _utc(row["created_at"])
    updated = _utc(row["updated_at"])
    assert created is not None and updated is not None  # non-nullable columns
    return Memory(
        memory_id=row["memory_id"],
        content=row["content"],
        owner=row["owner"],
        kind=row["kind"],
        tags=tuple(row["tags"] or ()),
        source=row["source"],
        doc_id=row["doc_id"],
        chunk_index=row["chunk_index"],
        parent_id=row["parent_id"],
        created_at=created,
        updated_at=updated,
        event_time=_utc(row["event_time"]),
        anchor_text=row["anchor_text"] or "",
        metadata=json.loads(row["metadata"] or "{}"),
    )


@contextmanager
def _translated(action: str) -> Iterator[None]:
    """Turn LanceDB/Arrow errors into :class:`StoreUnavailable` (ours pass through)."""
    try:
        yield
    except TribalError:
        raise
    except Exception as exc:  # noqa: BLE001 - lancedb raises ValueError/OSError/RuntimeError/...
        raise StoreUnavailable(f"memory store {action} failed: {exc}") from exc


class LanceMemoryStore:
    """:class:`~tribal_memory.store.base.MemoryStore` over a local (or object-store) LanceDB.

    Args:
        uri: LanceDB location (a directory path or any URI LanceDB supports).
        model_id: Embedding model the vectors come from; recorded in the table.
        dim: Vector dimension; recorded in the table.
        read_consistency_s: Seconds after which this handle sees writes made by
            other processes (0: check on every read).
        ann_index_min_rows: Row count at which an IVF_FLAT cosine index is built.
        optimize_every_rows: Rows written between automatic ``optimize()`` runs.
        keep_versions_s: Table versions older than this are removed by ``optimize()``.

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
        ann_index_min_rows: int = 100_000,
        optimize_every_rows: int = 2_000,
        keep_versions_s: int = 3600,
    ) -> None:
        self.model_id = model_id
        self.dim = dim
        self._ann_index_min_rows = ann_index_min_rows
        self._optimize_every_rows = optimize_every_rows
        self._keep_versions = timedelta(seconds=keep_versions_s)
        self._write_lock = threading.Lock()
        self._rows_since_optimize = 0
        self._ann = False
        with _translated("open"):
            self._db = lancedb.connect(
                uri, read_consistency_interval=timedelta(seconds=read_consistency_s)
            )
            if TABLE in self._db.list_tables().tables:
                self._table = self._db.open_table(TABLE)
                self._check_model()
            else:
                self._table = self._db.create_table(
                    TABLE, schema=_schema(model_id, dim), exist_ok=True
                )
                self._check_model()
            if not self._has_index("FTS"):
                self._table.create_index("content", config=FTS(with_position=False))
            self._ann = self._has_index("IVF")

    def _check_model(self) -> None:
        meta = self._table.schema.metadata or {}
        stored_model = meta.get(MODEL_KEY, b"?").decode()
        stored_dim = int(meta.get(DIM_KEY, b"0"))
        if stored_model != self.model_id or stored_dim != self.dim:
            raise EmbeddingModelMismatch(
                f"the store was built with embedding model {stored_model} ({stored_dim}-d) "
                f"but this instance uses {self.model_id} ({self.dim}-d); use the same "
                "model (TRIBAL_EMBEDDING_MODEL) or another data directory"
            )

    def _has_index(self, index_type: str) -> bool:
        return any(
            str(index.index_type).upper().startswith(index_type)
            for index in self._table.list_indices()
        )

    def refresh(self) -> None:
        """Read the newest table version from now on (other processes' writes included).

        Reads otherwise see another process's writes within ``read_consistency_s``;
        a check-then-write that must not miss them (is this id stored yet?) calls
        this first.

        Raises:
            StoreUnavailable: the table cannot be read.
        """
        with _translated("refresh"):
            self._table.checkout_latest()  # type: ignore[no-untyped-call]

    # -- writes ---------------------------------------------------------------

    def add(self, memories: Sequence[Memory], vectors: Vector) -> None:
        """See :meth:`MemoryStore.add`."""
        if not memories:
            return
        if vectors.shape != (len(memories), self.dim):
            raise InvalidInput(
                f"expected vectors of shape ({len(memories)}, {self.dim}), got {vectors.shape}"
            )
        rows = [_to_row(m, v) for m, v in zip(memories, vectors, strict=True)]
        with self._write_lock, _translated("write"):
            self._table.add(rows)
            self._rows_since_optimize += len(rows)
        self._maybe_optimize()

    def replace(self, memory: Memory, vector: Vector | None) -> None:
        """See :meth:`MemoryStore.replace`."""
        with self._write_lock, _translated("update"):
            if vector is None:
                stored = self._rows(f"memory_id = {_quote(memory.memory_id)}", with_vector=True)
                if not stored:
                    raise NotFound(f"no memory with id {memory.memory_id}")
                vector = np.asarray(stored[0]["vector"], dtype=np.float32)
            row = _to_row(memory, vector)
            (self._table.merge_insert("memory_id").when_matched_update_all().execute([row]))
            self._rows_since_optimize += 1

    def set_anchor_text(self, memory_id: str, anchor_text: str) -> bool:
        """See :meth:`MemoryStore.set_anchor_text`."""
        where = f"memory_id = {_quote(memory_id)}"
        with self._write_lock, _translated("update"):
            if not self._table.count_rows(where):
                return False
            self._table.update(where=where, values={"anchor_text": anchor_text})
            self._rows_since_optimize += 1
        return True

    def delete(self, memory_ids: Sequence[str]) -> int:
        """See :meth:`MemoryStore.delete`."""
        if not memory_ids:
            return 0
        where = f"memory_id IN ({_in_list(memory_ids)})"
        with self._write_lock, _translated("delete"):
            existing = self._table.count_rows(where)
            if existing:
                self._table.delete(where)
                self._rows_since_optimize += existing
        return int(existing)

    # -- reads ----------------------------------------------------------------

    def _rows(
        self, where: str, *, with_vector: bool = False, limit: int | None = None
    ) -> list[dict[str, Any]]:
        columns = [*_COLUMNS, "vector"] if with_vector else list(_COLUMNS)
        query = self._table.search().where(where).select(columns)
        query = query.limit(limit) if limit is not None else query.limit(None)
        return list(query.to_list())

    def get(self, memory_ids: Sequence[str]) -> dict[str, Memory]:
        """See :meth:`MemoryStore.get`."""
        if not memory_ids:
            return {}
        with _translated("read"):
            rows = self._rows(f"memory_id IN ({_in_list(memory_ids)})")
        return {row["memory_id"]: _to_memory(row) for row in rows}

    def vector_search(self, vector: Vector, filters: SearchFilters, k: int) -> list[ScoredMemory]:
        """See :meth:`MemoryStore.vector_search`. Scores are cosine similarity in [-1, 1]."""
        return self.vector_search_many(np.asarray(vector, dtype=np.float32)[None, :], filters, k)[0]

    def vector_search_many(
        self, vectors: Vector, filters: SearchFilters, k: int
    ) -> list[list[ScoredMemory]]:
        """See :meth:`MemoryStore.vector_search_many`: one query per row of ``vectors``."""
        if len(vectors) == 0:
            return []
        where = filter_sql(filters)
        matrix = np.asarray(vectors, dtype=np.float32)
        with _translated("vector search"):
            query = (
                self._table.search(
                    matrix if len(matrix) > 1 else matrix[0], vector_column_name="vector"
                )
                .distance_type("cosine")  # type: ignore[attr-defined]  # vector builder
                .select([*_COLUMNS, "_distance"])
                .limit(k)
            )
            if self._ann:
                query = query.nprobes(_ANN_NPROBES)
            if where:
                query = query.where(where, prefilter=True)
            rows = query.to_list()
        results: list[list[ScoredMemory]] = [[] for _ in range(len(matrix))]
        for row in rows:
            results[int(row.get("query_index", 0))].append(
                ScoredMemory(_to_memory(row), 1.0 - float(row["_distance"]))
            )
        return results

    def score_ids(
        self, vector: Vector, memory_ids: Sequence[str], filters: SearchFilters
    ) -> list[ScoredMemory]:
        """See :meth:`MemoryStore.score_ids`."""
        if not memory_ids:
            return []
        where = f"memory_id IN ({_in_list(memory_ids)})"
        extra = filter_sql(filters)
        if extra:
            where = f"({where}) AND ({extra})"
        with _translated("vector search"):
            rows = (
                self._table.search(
                    np.asarray(vector, dtype=np.float32), vector_column_name="vector"
                )
                .distance_type("cosine")  # type: ignore[attr-defined]  # vector builder
                .select([*_COLUMNS, "_distance"])
                .where(where, prefilter=True)
                .limit(len(memory_ids))
                .to_list()
            )
        return [ScoredMemory(_to_memory(r), 1.0 - float(r["_distance"])) for r in rows]

    def text_search(self, query: str, filters: SearchFilters, k: int) -> list[ScoredMemory]:
        """See :meth:`MemoryStore.text_search`. Scores are raw BM25 (>= 0)."""
        if not query.strip():
            return []
        where = filter_sql(filters)
        with _translated("full-text search"):
            builder = (
                self._table.search(
                    MatchQuery(query, "content"),  # type: ignore[call-arg]  # stub lacks defaults
                    query_type="fts",
                )
                .select([*_COLUMNS, "_score"])
                .limit(k)
            )
            if where:
                builder = builder.where(where, prefilter=True)
            rows = builder.to_list()
        return [ScoredMemory(_to_memory(r), float(r["_score"])) for r in rows]

    def select(self, filters: SearchFilters, limit: int) -> list[Memory]:
        """See :meth:`MemoryStore.select`."""
        where = filter_sql(filters)
        with _translated("read"):
            query = self._table.search().select(list(_COLUMNS)).limit(limit)
            if where:
                query = query.where(where)
            rows = query.to_list()
        return [_to_memory(row) for row in rows]

    def count(self, filters: SearchFilters | None = None) -> int:
        """See :meth:`MemoryStore.count`."""
        where = filter_sql(filters) if filters is not None else None
        with _translated("count"):
            return int(self._table.count_rows(where))

    def scan(
        self, filters: SearchFilters | None = None, *, batch_size: int = 512
    ) -> Iterator[tuple[list[Memory], Vector]]:
        """See :meth:`MemoryStore.scan`; reads one table version (a snapshot) in storage order."""
        if batch_size < 1:
            raise InvalidInput("batch_size must be at least 1")
        where = filter_sql(filters) if filters is not None else None
        with _translated("scan"):
            query = self._table.search().select([*_COLUMNS, "vector"]).limit(None)
            if where:
                query = query.where(where)
            for batch in query.to_batches(batch_size):
                if not batch.num_rows:
                    continue
                flat = batch.column("vector").flatten().to_numpy(zero_copy_only=False)
                vectors = np.asarray(flat, dtype=np.float32).reshape(batch.num_rows, self.dim)
                memories = [_to_memory(row) for row in batch.select(list(_COLUMNS)).to_pylist()]
                yield memories, vectors

    def memory_ids(self) -> list[str]:
        """Every row's ``memory_id`` at the current table version, repeats kept (a check).

        Raises:
            StoreUnavailable: the read failed.
        """
        with _translated("read"):
            table = self._table.search().select(["memory_id"]).limit(None).to_arrow()
        return [str(value) for value in table.column("memory_id").to_pylist()]

    def group_counts(self, column: str) -> dict[str, int]:
        """Memories per distinct value of ``column`` (``owner`` or ``kind``)."""
        if column not in ("owner", "kind"):
            raise InvalidInput(f"cannot group by {column!r}")
        with _translated("read"):
            values = self._table.search().select([column]).limit(None).to_arrow().column(column)
        return {row["values"]: row["counts"] for row in pc.value_counts(values).to_pylist()}

    # -- maintenance ----------------------------------------------------------

    @property
    def version(self) -> int:
        """Current table version (increases with every write)."""
        return int(self._table.version)

    def index_state(self) -> dict[str, bool]:
        """``{"fts": bool, "ann": bool}``: which indexes exist."""
        with _translated("read"):
            return {"fts": self._has_index("FTS"), "ann": self._has_index("IVF")}

    def _maybe_optimize(self) -> None:
        if self._rows_since_optimize >= self._optimize_every_rows:
            self.optimize()

    def optimize(self) -> None:
        """See :meth:`MemoryStore.optimize`; also builds the ANN index once the table is large."""
        with self._write_lock, _translated("optimize"):
            rows = self._table.count_rows()
            if rows >= self._ann_index_min_rows and not self._has_index("IVF"):
                self._table.create_index("vector", config=IvfFlat(distance_type="cosine"))
            self._ann = self._has_index("IVF")
            self._table.optimize(cleanup_older_than=self._keep_versions)
            self._rows_since_optimize = 0

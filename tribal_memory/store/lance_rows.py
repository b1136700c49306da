"""Rows of the LanceDB ``memories`` table: schema, conversions, SQL filters.

A memory is one row: a column per :class:`~tribal_memory.base.models.Memory`
field (:data:`COLUMNS`; ``metadata`` as JSON text) and the vector. The Arrow
types are written out in :func:`table_schema`: they are how the store keeps
each field, and a test checks they cover :data:`COLUMNS` in order.
:func:`filter_sql` turns :class:`~tribal_memory.base.models.SearchFilters` into a
DataFusion ``WHERE`` clause.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pyarrow as pa

from tribal_memory.base.errors import InvalidInput
from tribal_memory.base.models import MEMORY_FIELDS, SHARED_OWNER, Memory, SearchFilters
from tribal_memory.embeddings.base import Vector

TABLE = "memories"
"""Name of the memory table in the LanceDB database."""
MODEL_KEY = b"tribal.embedding_model"
DIM_KEY = b"tribal.embedding_dim"
FILE_FORMAT = "2.1"
"""Lance file format of a new table's data files (LanceDB's default is 2.2).

In 2.2 a column whose values are all the same within a file (``kind`` when
every memory is a fact, ``metadata`` when it is always ``{}``) is written as a
constant page, and a take of a few rows from it decodes the whole page: at a
million rows per file, 10 hits cost 9.6 ms for all columns against 4.8 ms in
2.1, for the same data size (docs/benchmarks.md, "Large stores: the file
format"). A table keeps the format it was created with; a backup writes
its copy in this one.
"""

COLUMNS = MEMORY_FIELDS
"""The memory's columns: one per :class:`Memory` field, same name (the table has
also ``anchor_text``, unused, and ``vector``)."""
_CONVERTED = ("tags", "created_at", "updated_at", "event_time", "metadata")
"""Columns stored differently from the field: tags a list, times in UTC, metadata JSON text."""
_AS_STORED = tuple(name for name in COLUMNS if name not in _CONVERTED)


def table_schema(model_id: str, dim: int) -> pa.Schema:
    """The table's Arrow schema; ``model_id`` and ``dim`` are recorded in its metadata."""
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
            # Unused since anchors moved to SQL (migration 0006); kept, always empty,
            # so that stores built before still take new rows.
            pa.field("anchor_text", pa.string()),
            pa.field("metadata", pa.string()),
            pa.field("vector", pa.list_(pa.float32(), dim)),
        ],
        metadata={MODEL_KEY: model_id.encode(), DIM_KEY: str(dim).encode()},
    )


def new_table_options(file_format: str = FILE_FORMAT) -> dict[str, str]:
    """LanceDB storage options of a table this store creates (the memory table, a copy)."""
    return {"new_table_data_storage_version": file_format}


def quote(value: str) -> str:
    """``value`` as a SQL string literal (single quotes doubled)."""
    return "'" + value.replace("'", "''") + "'"


def in_list(values: Sequence[str]) -> str:
    """``values`` as the inside of a SQL ``IN (...)`` list of string literals."""
    return ", ".join(quote(v) for v in values)


def timestamp_sql(value: datetime) -> str:
    """``value`` as a SQL UTC timestamp literal.

    Raises:
        InvalidInput: ``value`` has no time zone or is out of range in UTC.
    """
    if value.tzinfo is None:
        raise InvalidInput("time filters need a timezone (e.g. 2024-01-01T00:00:00Z)")
    try:
        utc = value.astimezone(UTC)
    except OverflowError as exc:  # e.g. 0001-01-01T00:00:00+01:00 is before year 1 in UTC
        raise InvalidInput(f"time filter {value.isoformat()} is out of range") from exc
    # The year zero-padded: strftime("%Y") writes year 999 as "999", which LanceDB rejects.
    return "TIMESTAMP " + quote(f"{utc.year:04d}-{utc:%m-%dT%H:%M:%S.%f}Z")


def owner_and_kind_only(filters: SearchFilters) -> bool:
    """Whether ``filters`` sets owner (with shared or not) and kinds at most.

    Such a filter reads two small columns, answered by bitmap indexes; any
    other field set (tags, sources, time, ids, doc ids, paths, and any field
    added later) does not pass.
    """
    rest = dataclasses.replace(filters, owner=None, include_shared=True, kinds=(), exclude_kinds=())
    return rest == _NO_FILTER


def lists_owner_or_kinds(filters: SearchFilters) -> bool:
    """Whether ``filters`` lists the rows it passes by owner or kinds and nothing else.

    :func:`owner_and_kind_only` with an owner or kinds set: such a filter may
    pass few rows of a large table. An exclusion of kinds alone (every search
    leaves summaries out) blocks rows rather than listing those it passes, and
    filters on any other field do not count.
    """
    return owner_and_kind_only(filters) and (filters.owner is not None or bool(filters.kinds))


_NO_FILTER = SearchFilters()


def filter_sql(filters: SearchFilters) -> str | None:
    """The SQL ``WHERE`` clause (DataFusion dialect) for ``filters``, or None for no filter."""
    clauses: list[str] = []
    if filters.owner is not None:
        owners = [filters.owner]
        if filters.include_shared and filters.owner != SHARED_OWNER:
            owners.append(SHARED_OWNER)
        clauses.append(f"owner IN ({in_list(owners)})")
    if filters.tags:
        clauses.append(f"array_has_any(tags, [{in_list(filters.tags)}])")
    if filters.kinds:
        clauses.append(f"kind IN ({in_list(filters.kinds)})")
    if filters.exclude_kinds:
        clauses.append(f"kind NOT IN ({in_list(filters.exclude_kinds)})")
    if filters.sources:
        clauses.append(f"source IN ({in_list(filters.sources)})")
    if filters.since is not None:
        clauses.append(f"coalesce(event_time, created_at) >= {timestamp_sql(filters.since)}")
    if filters.until is not None:
        clauses.append(f"coalesce(event_time, created_at) <= {timestamp_sql(filters.until)}")
    if filters.doc_ids:
        clauses.append(f"doc_id IN ({in_list(filters.doc_ids)})")
    if filters.exclude_doc_ids:
        clauses.append(f"(doc_id IS NULL OR doc_id NOT IN ({in_list(filters.exclude_doc_ids)}))")
    if filters.paths:
        clauses.append(paths_sql(filters.paths))
    if filters.memory_ids is not None:
        ids = filters.memory_ids
        # The scalar index on memory_id answers the IN list; no id at all passes nothing.
        clauses.append(f"memory_id IN ({in_list(ids)})" if ids else "FALSE")
    return " AND ".join(clauses) if clauses else None


def like_pattern(pattern: str) -> str:
    """A ``SearchFilters.paths`` pattern as a SQL ``LIKE`` pattern (backslash escapes)."""
    escaped = pattern.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped.replace("*", "%")


def paths_sql(patterns: Sequence[str]) -> str:
    """The clause admitting memories whose virtual path matches one of ``patterns``.

    A document chunk's path is its ``source``; any other memory's is
    ``memory/<memory_id>.md`` (as the agent tools name them).
    """

    def matching(column: str) -> str:
        return " OR ".join(f"{column} LIKE {quote(like_pattern(p))} ESCAPE '\\'" for p in patterns)

    chunk = f"(kind = 'chunk' AND source IS NOT NULL AND ({matching('source')}))"
    virtual = "('memory/' || memory_id || '.md')"
    other = f"((kind <> 'chunk' OR source IS NULL) AND ({matching(virtual)}))"
    return f"({chunk} OR {other})"


def to_row(memory: Memory, vector: Vector) -> dict[str, Any]:
    """The table row of ``memory`` with its vector (``(dim,)``)."""
    row = {name: getattr(memory, name) for name in COLUMNS}
    row["tags"] = list(memory.tags)
    row["metadata"] = json.dumps(memory.metadata, sort_keys=True)
    row["anchor_text"] = ""
    row["vector"] = np.asarray(vector, dtype=np.float32).tolist()
    return row


def as_utc(value: datetime | None) -> datetime | None:
    """``value`` in UTC (None stays None)."""
    return None if value is None else value.astimezone(UTC)


def to_memory(row: dict[str, Any]) -> Memory:
    """The :class:`Memory` of a table row (timestamps in UTC, metadata parsed)."""
    created = as_utc(row["created_at"])
    updated = as_utc(row["updated_at"])
    assert created is not None and updated is not None  # non-nullable columns
    metadata = row["metadata"]
    return Memory(
        **{name: row[name] for name in _AS_STORED},
        tags=tuple(row["tags"] or ()),
        created_at=created,
        updated_at=updated,
        event_time=as_utc(row["event_time"]),
        metadata=json.loads(metadata) if metadata not in (None, "{}") else {},
    )


def memory_rows(table: pa.Table) -> list[dict[str, Any]]:
    """The memory columns of ``table`` as row dicts (converted column by column: faster)."""
    columns = [
        _utc_times(table.column(name)) if name in _TIMES else table.column(name).to_pylist()
        for name in COLUMNS
    ]
    return [dict(zip(COLUMNS, values, strict=True)) for values in zip(*columns, strict=True)]


_TIMES = ("created_at", "updated_at", "event_time")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _utc_times(column: pa.ChunkedArray | pa.Array) -> list[datetime | None]:
    """A ``timestamp("us", tz="UTC")`` column as UTC datetimes (None where null).

    Equal to ``to_pylist()``, and cheaper: pyarrow builds each tz-aware
    datetime through its time zone; this adds microseconds to the epoch.
    """
    micros = column.cast(pa.timestamp("us", tz="UTC")).cast(pa.int64()).to_pylist()
    return [None if us is None else _EPOCH + timedelta(microseconds=us) for us in micros]


def vectors_of(table: pa.Table | pa.RecordBatch) -> np.ndarray:
    """The ``vector`` column as a writable ``(rows, dim)`` float32 array."""
    column = table.column("vector")
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    flat = column.flatten().to_numpy(zero_copy_only=False)
    return np.array(flat, dtype=np.float32).reshape(table.num_rows, -1)


def nearest_rows(table: pa.Table | None, rows: int) -> list[tuple[str, float] | None]:
    """Per query row, (memory_id, cosine similarity) of its nearest in a multi-vector answer.

    Of several rows per query row, the most similar.
    """
    found: list[tuple[str, float] | None] = [None] * rows
    if table is None:
        return found
    positions = (
        table.column("query_index").to_pylist()
        if "query_index" in table.column_names
        else [0] * table.num_rows
    )
    ids = table.column("memory_id").to_pylist()
    distances = table.column("_distance").to_pylist()
    for position, memory_id, distance in zip(positions, ids, distances, strict=True):
        similarity = 1.0 - float(distance)
        best = found[int(position)]
        if best is None or similarity > best[1]:
            found[int(position)] = (str(memory_id), similarity)
    return found

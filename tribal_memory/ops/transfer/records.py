"""The export file format: JSON lines, one record per line, each with a ``type``.

::

    {"type": "header", "format": "tribal-memory-export", "version": 1,
     "embedding_model": ..., "embedding_dim": ..., "exported_at": ..., "owner": ...}
    {"type": "memory", "memory": {...every Memory field...}, "vector": "<base64>"}
    {"type": "relation", "relation": {...a row of the relations table...}}
    {"type": "row", "table": "query_cache", "row": {...}}
    {"type": "end", "counts": {"memory": n, "relation": n, "row": n}}

Records come in that order (header, memories, relations, rows, end). Vectors
are base64 of little-endian float32, so they round-trip bit for bit. Table
rows are encoded column by column from the SQLAlchemy type of the column:
``DateTime`` as ISO 8601 in UTC, ``LargeBinary`` as base64, ``JSON`` as the
JSON value, numbers, booleans and strings as themselves.

Which tables travel is read from :data:`tribal_memory.base.tables.Base.metadata`:
every table except :data:`EXCLUDED_TABLES` (secrets never leave an
instance; derived counters are rebuilt by the importing database), so tables
added later are included without changes here. A table is scoped by the
names of its columns (see :class:`TableRefs`).

This module holds the format (its constants, the record types, which tables
travel) and the encoding an export writes; :mod:`.reading` parses and
checks a file.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np
from sqlalchemy import Column, DateTime, LargeBinary, Table

from tribal_memory.base.errors import TribalError
from tribal_memory.base.models import Memory, memory_to_json
from tribal_memory.base.tables import Base
from tribal_memory.embeddings.base import Vector

FORMAT = "tribal-memory-export"
"""Value of the header's ``format`` field."""
VERSION = 1
"""Value of the header's ``version`` field; import refuses other versions."""
MEDIA_TYPE = "application/x-ndjson"
"""Media type of an export (newline-delimited JSON)."""
EXCLUDED_TABLES = frozenset({"api_keys", "learned_generations", "learned_changes"})
"""Tables never exported nor imported: ``api_keys`` holds secrets, ``learned_generations``
and ``learned_changes`` are kept by the database's own triggers."""
RELATIONS_TABLE = "relations"
"""The table exported as ``relation`` records (the others are ``row`` records)."""
EMBEDDED_COLUMNS: Mapping[tuple[str, str], str] = {("query_cache", "query_vector"): "query_text"}
"""``(table, vector column) -> text column``: float32 query embeddings in SQL rows.

On import from another embedding model they are recomputed from the text
column (as queries) with this instance's model.
"""

RECORD_ORDER = ("memory", "relation", "row")
"""Record types between the header and the end record, in the order they must come."""


@dataclass(frozen=True, slots=True)
class TableRefs:
    """What a table's rows point at, read from column names.

    ``owner``: a column named ``owner`` (the row belongs to that owner).
    ``memory``: columns holding one memory id (``memory_id``; in ``relations``
    also ``source_id`` and ``target_id``). ``memory_lists``: JSON columns
    holding a list of memory ids (``memory_ids``).
    """

    owner: str | None
    memory: tuple[str, ...]
    memory_lists: tuple[str, ...]

    def memory_ids(self, row: Mapping[str, Any]) -> set[str]:
        """Every memory id ``row`` refers to (empty: none)."""
        ids = {str(row[c]) for c in self.memory if row.get(c) is not None}
        for column in self.memory_lists:
            ids.update(str(i) for i in row.get(column) or ())
        return ids


def table_refs(table: Table) -> TableRefs:
    """The references of ``table`` (see :class:`TableRefs`)."""
    names = set(table.columns.keys())
    memory = ["memory_id"]
    if table.name == RELATIONS_TABLE:
        memory += ["source_id", "target_id"]
    return TableRefs(
        owner="owner" if "owner" in names else None,
        memory=tuple(c for c in memory if c in names),
        memory_lists=tuple(c for c in ("memory_ids",) if c in names),
    )


def transfer_tables() -> list[Table]:
    """The SQL tables an export holds, in file order: relations first, then FK order."""
    tables = [t for t in Base.metadata.sorted_tables if t.name not in EXCLUDED_TABLES]
    return sorted(tables, key=lambda t: t.name != RELATIONS_TABLE)  # stable: FK order kept


def key_columns(table: Table) -> list[Column[Any]]:
    """The primary key of ``table`` (every column when it has none): what makes a row "the same"."""
    return list(table.primary_key.columns) or list(table.columns)


def dumps(record: Mapping[str, Any]) -> str:
    """One record as a line of JSON (compact, UTF-8 text, a newline at the end)."""
    return json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"


# -- encoding ----------------------------------------------------------------------


def encode_vector(vector: Vector) -> str:
    """Base64 of the vector as little-endian float32 (shape ``(dim,)``)."""
    return base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode("ascii")


def _utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def encode_value(column: Column[Any], value: Any) -> Any:
    """A JSON value for ``value`` of ``column`` (see the module docstring).

    SQLite hands back naive datetimes; they are stored as UTC and exported so.

    Raises:
        TribalError: a value of a type the format cannot carry (a new column
            type this module does not know yet).
    """
    if value is None:
        return None
    if isinstance(column.type, DateTime) and isinstance(value, datetime):
        return _utc(value).isoformat()
    if isinstance(column.type, LargeBinary) and isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, str | int | float | bool | list | dict):
        return value
    raise TribalError(
        f"cannot export column {column.table.name}.{column.name}: "
        f"{type(value).__name__} values have no encoding in the export format"
    )


def encode_row(table: Table, row: Mapping[str, Any]) -> dict[str, Any]:
    """The ``row`` of ``table`` as a JSON object, column by column."""
    return {c.name: encode_value(c, row[c.name]) for c in table.columns}


def memory_record(memory: Memory, vector: Vector) -> dict[str, Any]:
    """The ``memory`` record of one memory with its stored vector."""
    return {"type": "memory", "memory": memory_to_json(memory), "vector": encode_vector(vector)}


# -- record types ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Header:
    """The first record: which model made the vectors, when, for which owner."""

    embedding_model: str
    embedding_dim: int
    exported_at: str
    owner: str | None


@dataclass(frozen=True, slots=True)
class MemoryRecord:
    """A memory and its vector (float32, shape ``(dim,)`` of the header's model)."""

    memory: Memory
    vector: Vector


@dataclass(frozen=True, slots=True)
class RowRecord:
    """A relation or learned-table row; ``values`` are ready to insert (decoded)."""

    table: Table
    values: dict[str, Any]


Record = MemoryRecord | RowRecord
"""A record between the header and the end record, decoded."""


@dataclass(frozen=True, slots=True)
class RecordLimits:
    """Bounds on each imported memory (the capture limits of the settings)."""

    max_content_chars: int
    max_tags: int
    max_metadata_bytes: int

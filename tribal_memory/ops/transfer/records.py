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
"""

from __future__ import annotations

import base64
import binascii
import json
import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import msgspec
import numpy as np
from sqlalchemy import JSON, Boolean, Column, DateTime, Float, Integer, LargeBinary, String, Table

from tribal_memory.base.errors import InvalidInput, TooLarge, TribalError
from tribal_memory.base.models import MEMORY_KINDS, SHARED_OWNER, Memory, memory_to_json
from tribal_memory.base.tables import Base
from tribal_memory.base.validation import check_metadata
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
ANCHORS_TABLE = "fact_anchors"
_MAX_OWNER_CHARS = 128


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


# -- decoding ----------------------------------------------------------------------


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


class _Problem(Exception):
    """A defect of one line, turned into ``InvalidInput("line N: ...")``."""


def _get(
    data: Mapping[str, Any], name: str, kind: type | tuple[type, ...], *, null: bool = False
) -> Any:
    if name not in data:
        raise _Problem(f"missing field {name!r}")
    value = data[name]
    if value is None and null:
        return None
    if not isinstance(value, kind) or (isinstance(value, bool) and bool not in _types(kind)):
        names = "/".join(t.__name__ for t in _types(kind))
        raise _Problem(f"field {name!r} must be {names}{' or null' if null else ''}")
    return value


def _types(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


def _time(value: str, name: str) -> datetime:
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError as exc:
        raise _Problem(f"field {name!r} is not an ISO 8601 time: {value!r}") from exc
    if parsed.tzinfo is None:
        raise _Problem(f"field {name!r} has no time zone: {value!r}")
    try:
        return parsed.astimezone(UTC)
    except OverflowError as exc:
        raise _Problem(f"field {name!r} is out of range once in UTC: {value!r}") from exc


def _text(data: Mapping[str, Any], name: str, limit: int) -> str:
    value: str = _get(data, name, str)
    if not value.strip() or len(value) > limit:
        raise _Problem(f"field {name!r} must be 1 to {limit} characters")
    return value


def _decode_vector(text: str, dim: int) -> Vector:
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise _Problem("field 'vector' is not base64") from exc
    if len(raw) != 4 * dim:
        raise _Problem(f"vector has {len(raw) // 4} values; the header says {dim}")
    vector: Vector = np.frombuffer(raw, dtype="<f4").astype(np.float32)
    if not np.isfinite(vector).all():
        raise _Problem("vector holds NaN or infinite values")
    return vector


def _memory_id(fields: Mapping[str, Any]) -> str:
    value: str = _get(fields, "memory_id", str)
    try:
        canonical = str(uuid.UUID(value))
    except ValueError as exc:
        raise _Problem(f"field 'memory_id' is not a UUID: {value[:64]!r}") from exc
    if canonical != value:
        raise _Problem(f"field 'memory_id' is not a UUID in canonical form: {value[:64]!r}")
    return value


def _json_field(info: msgspec.inspect.Type) -> tuple[type, bool]:
    """The JSON type an exported :class:`Memory` field has, and whether it may be null."""
    null = isinstance(info, msgspec.inspect.UnionType) and info.includes_none
    if isinstance(info, msgspec.inspect.UnionType):
        (info,) = (t for t in info.types if not isinstance(t, msgspec.inspect.NoneType))
    kinds: dict[type[msgspec.inspect.Type], type] = {
        msgspec.inspect.StrType: str,
        msgspec.inspect.LiteralType: str,
        msgspec.inspect.DateTimeType: str,
        msgspec.inspect.IntType: int,
        msgspec.inspect.VarTupleType: list,
        msgspec.inspect.DictType: dict,
    }
    return kinds[type(info)], null


_MEMORY_INFO = msgspec.inspect.type_info(Memory)
assert isinstance(_MEMORY_INFO, msgspec.inspect.DataclassType)
_MEMORY_JSON = {f.name: _json_field(f.type) for f in _MEMORY_INFO.fields}
"""Per :class:`Memory` field, as :func:`memory_to_json` writes it: (JSON type, nullable)."""
_MEMORY_TIMES = tuple(
    f.name
    for f in _MEMORY_INFO.fields
    if isinstance(f.type, msgspec.inspect.DateTimeType)
    or (
        isinstance(f.type, msgspec.inspect.UnionType)
        and any(isinstance(t, msgspec.inspect.DateTimeType) for t in f.type.types)
    )
)


def _decode_memory(data: Mapping[str, Any], dim: int, limits: RecordLimits) -> MemoryRecord:
    fields = _get(data, "memory", dict)
    values = {
        name: _get(fields, name, kind, null=null) for name, (kind, null) in _MEMORY_JSON.items()
    }
    content: str = values["content"]
    if not content.strip():
        raise _Problem("field 'content' is empty")
    if len(content) > limits.max_content_chars:
        raise TooLarge(
            f"a memory has {len(content)} characters; the limit is {limits.max_content_chars} "
            "(TRIBAL_MAX_CONTENT_CHARS)"
        )
    if values["kind"] not in MEMORY_KINDS:
        kinds = ", ".join(MEMORY_KINDS)
        raise _Problem(f"field 'kind' must be one of {kinds}, not {values['kind']!r}")
    tags = values["tags"]
    if not all(isinstance(t, str) for t in tags):
        raise _Problem("field 'tags' must be a list of strings")
    if len(tags) > limits.max_tags:
        raise TooLarge(f"a memory has {len(tags)} tags; the limit is {limits.max_tags}")
    metadata = dict(values["metadata"])
    try:
        check_metadata(metadata, limits.max_metadata_bytes)
    except InvalidInput as exc:
        raise _Problem(exc.detail) from exc
    for name in _MEMORY_TIMES:
        if values[name] is not None:
            values[name] = _time(values[name], name)
    values.update(
        memory_id=_memory_id(fields),
        owner=_text(fields, "owner", _MAX_OWNER_CHARS),
        tags=tuple(tags),
        metadata=metadata,
    )
    return MemoryRecord(Memory(**values), _decode_vector(_get(data, "vector", str), dim))


def _decode_value(column: Column[Any], value: Any) -> Any:
    name = column.name
    if value is None:
        if not column.nullable or column.primary_key:
            raise _Problem(f"column {name!r} must not be null")
        return None
    kind = column.type
    if isinstance(kind, DateTime):
        if not isinstance(value, str):
            raise _Problem(f"column {name!r} must be an ISO 8601 time")
        return _time(value, name)
    if isinstance(kind, LargeBinary):
        if not isinstance(value, str):
            raise _Problem(f"column {name!r} must be base64 text")
        try:
            return base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise _Problem(f"column {name!r} is not base64") from exc
    if isinstance(kind, JSON):
        return value
    if isinstance(kind, Float):  # an integer is a valid number here
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise _Problem(f"column {name!r} must be a number")
        return float(value)
    checks: tuple[tuple[type[Any], type, str], ...] = (
        (Boolean, bool, "a boolean"),
        (Integer, int, "an integer"),
        (String, str, "a string"),
    )
    for sql_type, python_type, label in checks:
        if isinstance(kind, sql_type):
            if not isinstance(value, python_type) or (
                isinstance(value, bool) and python_type is not bool
            ):
                raise _Problem(f"column {name!r} must be {label}")
            return value
    return value


def _decode_row(table: Table, data: Any) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise _Problem("the row must be a JSON object")
    if table.name == ANCHORS_TABLE and "owner" not in data:
        # Exported before anchors had owners (migration 0006's rule): manual and LLM
        # anchors were everyone's; a learned one's learner is unknown: all-owners scope.
        data = {**data, "owner": SHARED_OWNER if data.get("source") != "learned" else "*"}
    unknown = sorted(set(data) - set(table.columns.keys()))
    if unknown:
        raise _Problem(
            f"table {table.name!r} has no column {unknown[0]!r} here "
            "(exported by a newer version of tribal-memory?)"
        )
    values: dict[str, Any] = {}
    for column in table.columns:
        if column.name in data:
            values[column.name] = _decode_value(column, data[column.name])
        elif column.primary_key or not (
            column.nullable or column.default is not None or column.server_default is not None
        ):
            raise _Problem(f"missing column {column.name!r} of table {table.name!r}")
    return values


def _decode_header(data: Mapping[str, Any]) -> Header:
    if data.get("type") != "header" or data.get("format") != FORMAT:
        raise _Problem(f"not a {FORMAT} file (the first line must be its header)")
    version = data.get("version")
    if version != VERSION:
        raise _Problem(f"unsupported export version {version!r}; this version reads {VERSION}")
    dim = _get(data, "embedding_dim", int)
    if dim < 1:
        raise _Problem("field 'embedding_dim' must be at least 1")
    return Header(
        embedding_model=_text(data, "embedding_model", 1024),
        embedding_dim=dim,
        exported_at=_get(data, "exported_at", str),
        owner=_get(data, "owner", str, null=True),
    )


@dataclass(frozen=True, slots=True)
class RecordLimits:
    """Bounds on each imported memory (the capture limits of the settings)."""

    max_content_chars: int
    max_tags: int
    max_metadata_bytes: int


def read_records(lines: Iterable[bytes], *, limits: RecordLimits) -> Iterator[Header | Record]:
    """Parse and check an export line by line; yields the header, then each record.

    Blank lines are ignored. The footer is checked against what was read and
    is not yielded; nothing may follow it.

    Args:
        lines: The file's lines (bytes, UTF-8).
        limits: Bounds on each memory's content, tags and metadata.

    Raises:
        InvalidInput: naming the line: not JSON, not an object, an unknown
            ``type`` or table, a missing or ill-typed field, records out of
            order, a vector of the wrong size, no header, or no footer (a
            truncated file) or counts that disagree with it.
        TooLarge: a memory over one of ``limits``.
    """
    tables = {t.name: t for t in transfer_tables()}
    header: Header | None = None
    counts = dict.fromkeys(RECORD_ORDER, 0)
    stage = 0
    ended = False
    number = 0
    for number, raw in enumerate(lines, 1):  # noqa: B007 - number is used after the loop
        if not raw.strip():
            continue
        try:
            if ended:
                raise _Problem("content after the end record")
            try:
                data = json.loads(raw)
            except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError
                raise _Problem(f"not JSON ({exc})") from exc
            except RecursionError as exc:
                raise _Problem("JSON nested too deeply") from exc
            if not isinstance(data, dict):
                raise _Problem("not a JSON object")
            if header is None:
                header = _decode_header(data)
                yield header
                continue
            kind = data.get("type")
            if kind == "end":
                found = _get(data, "counts", dict)
                if {k: found.get(k) for k in RECORD_ORDER} != counts:
                    raise _Problem(f"the end record counts {found} but the file holds {counts}")
                ended = True
                continue
            if kind not in RECORD_ORDER:
                raise _Problem(f"unknown record type {kind!r}")
            position = RECORD_ORDER.index(kind)
            if position < stage:
                raise _Problem(
                    f"a {kind} record after {RECORD_ORDER[stage]} records "
                    "(the order is header, memories, relations, rows, end)"
                )
            stage = position
            record: Record
            if kind == "memory":
                record = _decode_memory(data, header.embedding_dim, limits)
            elif kind == "relation":
                relations = tables[RELATIONS_TABLE]
                record = RowRecord(relations, _decode_row(relations, _get(data, "relation", dict)))
            else:
                name = _get(data, "table", str)
                if name == RELATIONS_TABLE:
                    raise _Problem("relations travel as relation records, not rows")
                if name not in tables:
                    reason = "is never imported" if name in EXCLUDED_TABLES else "is not known here"
                    raise _Problem(f"table {name!r} {reason}")
                record = RowRecord(tables[name], _decode_row(tables[name], _get(data, "row", dict)))
            counts[kind] += 1
        except _Problem as exc:
            raise InvalidInput(f"line {number}: {exc}") from exc
        except TooLarge as exc:
            raise TooLarge(f"line {number}: {exc.detail}") from exc
        yield record
    if header is None:
        raise InvalidInput("the file is empty (no header line)")
    if not ended:
        raise InvalidInput(f"the file ends at line {number} without its end record (truncated?)")

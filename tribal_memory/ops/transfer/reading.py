"""Reading an export: parse and check each line of the format :mod:`.records` describes.

:func:`read_records` turns the file's lines into a :class:`~.records.Header`
and decoded records, or stops at the first defect with an error naming the
line; nothing here writes.
"""

from __future__ import annotations

import base64
import binascii
import json
import uuid
from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC, datetime
from typing import Any

import msgspec
import numpy as np
from sqlalchemy import JSON, Boolean, Column, DateTime, Float, Integer, LargeBinary, String, Table

from tribal_memory.base.errors import InvalidInput, TooLarge
from tribal_memory.base.models import MEMORY_KINDS, SHARED_OWNER, Memory, memory_id_for
from tribal_memory.base.validation import (
    check_metadata,
    check_owner,
    check_ref,
    check_source,
    check_tags,
)
from tribal_memory.embeddings.base import Vector
from tribal_memory.ops.transfer.records import (
    EXCLUDED_TABLES,
    FORMAT,
    RECORD_ORDER,
    RELATIONS_TABLE,
    VERSION,
    Header,
    MemoryRecord,
    Record,
    RecordLimits,
    RowRecord,
    transfer_tables,
)

ANCHORS_TABLE = "fact_anchors"
"""The anchors table: rows exported before anchors had owners get one on import."""


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
    if not np.linalg.norm(vector.astype(np.float64)) > 0:
        raise _Problem("vector is all zeros (it would match nothing)")
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
    try:
        owner = check_owner(_get(fields, "owner", str))
        values.update(
            tags=check_tags(tags, limits.max_tags),
            source=check_source(values["source"]),
            doc_id=check_ref(values["doc_id"], "doc_id"),
            parent_id=check_ref(values["parent_id"], "parent_id"),
        )
    except InvalidInput as exc:
        raise _Problem(exc.detail) from exc
    memory_id = _memory_id(fields)
    expected = memory_id_for(owner, content)
    if memory_id != expected or content != content.strip():
        # Capture finds a memory by this id: one that does not stand for its owner and
        # content would answer another owner's (or another text's) capture as "exists".
        raise _Problem(
            f"field 'memory_id' {memory_id} is not the id capture gives this owner and "
            f"content ({expected})"
        )
    values.update(memory_id=memory_id, owner=owner, metadata=metadata)
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
    lines_of: dict[str, int] = {}  # memory id -> the line that holds it
    for number, raw in enumerate(lines, 1):  # noqa: B007 - number is used after the loop
        if not raw.strip():
            continue
        try:
            if ended:
                raise _Problem("content after the end record")
            data = _json_object(raw)
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
            kind, stage = _ordered(kind, stage)
            record = _decode_record(data, kind, header.embedding_dim, tables, limits)
            if isinstance(record, MemoryRecord):
                first = lines_of.setdefault(record.memory.memory_id, number)
                if first != number:
                    raise _Problem(f"memory {record.memory.memory_id} is also on line {first}")
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


def _json_object(raw: bytes) -> dict[str, Any]:
    """One line parsed as a JSON object."""
    try:
        data = json.loads(raw)
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError
        raise _Problem(f"not JSON ({exc})") from exc
    except RecursionError as exc:
        raise _Problem("JSON nested too deeply") from exc
    if not isinstance(data, dict):
        raise _Problem("not a JSON object")
    return data


def _ordered(kind: Any, stage: int) -> tuple[str, int]:
    """``kind`` checked as a record type and its position in :data:`RECORD_ORDER`.

    The position must not be before ``stage`` (the last record's).
    """
    if kind not in RECORD_ORDER:
        raise _Problem(f"unknown record type {kind!r}")
    position = RECORD_ORDER.index(kind)
    if position < stage:
        raise _Problem(
            f"a {kind} record after {RECORD_ORDER[stage]} records "
            "(the order is header, memories, relations, rows, end)"
        )
    return kind, position


def _decode_record(
    data: Mapping[str, Any],
    kind: str,
    dim: int,
    tables: Mapping[str, Table],
    limits: RecordLimits,
) -> Record:
    """The ``memory``, ``relation`` or ``row`` record ``data`` (``kind`` is its checked type)."""
    if kind == "memory":
        return _decode_memory(data, dim, limits)
    if kind == "relation":
        relations = tables[RELATIONS_TABLE]
        return RowRecord(relations, _decode_row(relations, _get(data, "relation", dict)))
    name = _get(data, "table", str)
    if name == RELATIONS_TABLE:
        raise _Problem("relations travel as relation records, not rows")
    if name not in tables:
        reason = "is never imported" if name in EXCLUDED_TABLES else "is not known here"
        raise _Problem(f"table {name!r} {reason}")
    return RowRecord(tables[name], _decode_row(tables[name], _get(data, "row", dict)))

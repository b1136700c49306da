"""Export: stream memories, relations and learned rows as JSON lines (see :mod:`.records`)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from sqlalchemy import Table, select, tuple_

from tribal_memory.base.db import Database
from tribal_memory.base.errors import InvalidInput
from tribal_memory.base.models import SearchFilters
from tribal_memory.ops.transfer.records import (
    FORMAT,
    RELATIONS_TABLE,
    VERSION,
    dumps,
    encode_row,
    key_columns,
    memory_record,
    table_refs,
    transfer_tables,
)

if TYPE_CHECKING:
    from tribal_memory.core import Core

Progress = Callable[[int], None]
"""Called with the number of records just written (a progress bar's advance)."""


def export_lines(
    core: Core,
    *,
    owner: str | None = None,
    batch_rows: int = 500,
    progress: Progress | None = None,
) -> Iterator[str]:
    """The export of ``core``'s data as JSON lines (each ends with a newline).

    Streams: memories are read from the store ``batch_rows`` at a time and SQL
    rows page by primary key, so memory use does not grow with the data,
    except for the set of exported memory ids (a few dozen bytes per memory)
    that decides which rows refer only to exported memories.

    What goes in: with ``owner`` None, every memory, and every relation and
    learned row whose memories are all exported. With ``owner``, the memories
    that owner sees (its own and ``shared`` ones), the relations between them,
    and the learned rows that belong to that owner or to shared (their
    ``owner`` column) and refer only to exported memories; tables with neither
    an owner nor a memory column are left out (they are not any one owner's).

    Reads are not one snapshot: a memory written while the export runs may be
    missing, and then so are the rows that refer to it. A failure mid-way
    ends the stream without its end record, which import detects.

    Args:
        core: The open store to export.
        owner: Scope the export to what this owner sees (None: everything).
        batch_rows: Memories or rows read per batch.
        progress: Called after each batch with the records written.

    Yields:
        The header line, memory lines, relation lines, row lines, the end line.

    Raises:
        StoreUnavailable: LanceDB or SQLite cannot be read (mid-stream too).
    """
    yield dumps(
        {
            "type": "header",
            "format": FORMAT,
            "version": VERSION,
            "embedding_model": core.embedder.model_id,
            "embedding_dim": core.embedder.dim,
            "exported_at": datetime.now(UTC).isoformat(),
            "owner": owner,
        }
    )
    counts = {"memory": 0, "relation": 0, "row": 0}
    advance = progress or (lambda _n: None)
    exported: set[str] = set()
    filters = SearchFilters(owner=owner) if owner is not None else None
    for memories, vectors in core.store.scan(filters, batch_size=batch_rows):
        for memory, vector in zip(memories, vectors, strict=True):
            exported.add(memory.memory_id)
            yield dumps(memory_record(memory, vector))
        counts["memory"] += len(memories)
        advance(len(memories))
    visible = SearchFilters(owner=owner)
    for table in transfer_tables():
        refs = table_refs(table)
        if owner is not None and refs.owner is None and not (refs.memory or refs.memory_lists):
            continue
        kind = "relation" if table.name == RELATIONS_TABLE else "row"
        for rows in _pages(core.db, table, batch_rows):
            written = 0
            for row in rows:
                if refs.owner is not None and not visible.admits_owner(str(row[refs.owner])):
                    continue
                if not refs.memory_ids(row) <= exported:
                    continue
                values = encode_row(table, row)
                record = (
                    {"type": kind, "relation": values}
                    if kind == "relation"
                    else {"type": kind, "table": table.name, "row": values}
                )
                yield dumps(record)
                written += 1
            counts[kind] += written
            advance(written)
    yield dumps({"type": "end", "counts": counts})


def write_export(lines: Iterable[str], out: IO[str]) -> dict[str, int]:
    """Write every line of an export to ``out`` and flush.

    Returns:
        The end record's counts: ``{"memory", "relation", "row"}``.
    """
    last = ""
    for last in lines:
        out.write(last)
    out.flush()
    counts: dict[str, int] = json.loads(last)["counts"]
    return counts


def write_export_file(lines: Iterable[str], path: Path) -> dict[str, int]:
    """Write an export to ``path``, never leaving it half written.

    The lines go to ``<path>.partial``, renamed to ``path`` once complete;
    on any failure the partial file is removed.

    Returns:
        As :func:`write_export`.

    Raises:
        InvalidInput: the file cannot be written.
    """
    partial = path.with_name(path.name + ".partial")
    try:
        with partial.open("w", encoding="utf-8") as out:
            counts = write_export(lines, out)
        partial.replace(path)
    except OSError as exc:
        partial.unlink(missing_ok=True)
        raise InvalidInput(f"cannot write {path}: {exc.strerror or exc}") from exc
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return counts


def _pages(db: Database, table: Table, size: int) -> Iterator[list[dict[str, Any]]]:
    """Rows of ``table`` in key order, ``size`` at a time, each page read in its own session.

    Pages follow the key (keyset pagination), so rows written meanwhile do
    not shift or repeat the pages; a table without a primary key is paged by
    offset over all its columns.
    """
    key = key_columns(table)
    keyset = bool(table.primary_key.columns)
    last: tuple[Any, ...] | None = None
    offset = 0
    while True:
        query = select(table).order_by(*key).limit(size)
        if keyset and last is not None:
            query = query.where(tuple_(*key) > tuple_(*last))
        elif not keyset:
            query = query.offset(offset)
        with db.session() as session:
            rows = [dict(r._mapping) for r in session.execute(query)]
        if not rows:
            return
        yield rows
        if len(rows) < size:
            return
        last = tuple(rows[-1][c.name] for c in key)
        offset += len(rows)

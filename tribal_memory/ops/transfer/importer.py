"""Import: check a whole export first, then write it (see :mod:`.records` for the format).

Two passes over the file. The first parses and checks every line (and that
the end record is there and agrees), writing nothing, so a bad line or a
truncated file leaves the instance as it was. The second writes: memories in
batches, then all relations and learned rows in one SQL transaction. Should a
write fail in the second pass (disk full, locked database), the transaction
rolls back and the memories this import created are deleted again, so an
import is all or nothing in both passes.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from itertools import chain, groupby, islice
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import numpy as np
from sqlalchemy import Table, insert, select, tuple_
from sqlalchemy.orm import Session

from tribal_memory.base.errors import InvalidInput, TribalError
from tribal_memory.base.models import Memory
from tribal_memory.base.transfer import ImportResult, OnConflict, Source, TransferCounts
from tribal_memory.ops.transfer.reading import read_records
from tribal_memory.ops.transfer.records import (
    EMBEDDED_COLUMNS,
    RELATIONS_TABLE,
    Header,
    MemoryRecord,
    Record,
    RecordLimits,
    RowRecord,
    key_columns,
    table_refs,
    transfer_tables,
)

if TYPE_CHECKING:
    from tribal_memory.core import Core

Progress = Callable[[int, int], None]
"""Called while writing with (records written so far, records in the file)."""
MAX_CONFLICTS_LISTED = 100
ADAPTERS_TABLE = "query_adapters"


@contextmanager
def _opened(source: Source) -> Iterator[Callable[[], Iterable[bytes]]]:
    """A function that gives the source's lines from the start, each time it is called."""
    if isinstance(source, bytes):
        yield lambda: io.BytesIO(source)
        return
    if isinstance(source, Path):
        try:
            handle: IO[bytes] = source.open("rb")
        except OSError as exc:
            raise InvalidInput(f"cannot read {source}: {exc.strerror or exc}") from exc
        with handle:
            yield _rewinding(handle, 0)
        return
    yield _rewinding(source, source.tell())


def _rewinding(handle: IO[bytes], start: int) -> Callable[[], Iterable[bytes]]:
    def lines() -> Iterable[bytes]:
        handle.seek(start)
        return handle

    return lines


def import_source(
    core: Core,
    source: Source,
    *,
    batch_rows: int = 500,
    progress: Progress | None = None,
    on_conflict: OnConflict = "keep",
) -> ImportResult:
    """Import an export into ``core`` (see the module docstring for atomicity).

    Memories keep their ids, timestamps and metadata. With the
    same embedding model id and dimension as this instance, the stored vectors
    are written as they are; otherwise every new memory's content (and every
    cached query) is embedded again with this instance's model. Memories whose
    id exists, and relations and learned rows whose primary key exists, are
    skipped, so importing a file twice changes nothing the second time. Rows
    that refer to a memory neither in the file nor here are not written.

    Args:
        core: The open store to import into.
        source: A path, the file's bytes, or a seekable binary file.
        batch_rows: Memories or rows embedded and written per batch.
        progress: Called after each written batch.
        on_conflict: For a memory stored here with other fields than the
            file's: ``keep`` the stored one (reported in ``conflicts``) or
            ``replace`` it with the file's (its learned data is dropped, as
            for an update).

    Returns:
        Counts per kind of record.

    Raises:
        InvalidInput: the file cannot be read, is not an export of a known
            version, or has a bad line (named; see
            :func:`~tribal_memory.ops.transfer.reading.read_records`); nothing written.
        TooLarge: a memory over ``max_content_chars``; nothing written.
        StoreUnavailable / EmbeddingError: a write or re-embedding failed;
            what this import wrote is undone.
    """
    with _opened(source) as lines:
        total, header = _check(core, lines())
        writer = _Writer(core, header, batch_rows, total, progress, on_conflict)
        return writer.run(lines())


def _limits(core: Core) -> RecordLimits:
    settings = core.settings
    return RecordLimits(settings.max_content_chars, settings.max_tags, settings.max_metadata_bytes)


def _check(core: Core, lines: Iterable[bytes]) -> tuple[int, Header]:
    """First pass: parse every line; returns the record count and the header."""
    header: Header | None = None
    total = 0
    try:
        for record in read_records(lines, limits=_limits(core)):
            if isinstance(record, Header):
                header = record
            else:
                total += 1
    except TribalError as exc:
        raise type(exc)(f"{exc.detail}; nothing was imported") from exc
    assert header is not None  # read_records raises on a file without one
    return total, header


class _Writer:
    """Second pass: writes the checked records, undoing its memories on failure."""

    def __init__(
        self,
        core: Core,
        header: Header,
        batch_rows: int,
        total: int,
        progress: Progress | None,
        on_conflict: OnConflict = "keep",
    ) -> None:
        self.core = core
        self.on_conflict = on_conflict
        self.conflicts = 0
        self.conflict_ids: list[str] = []
        self.replaced = 0
        self.header = header
        self.batch_rows = batch_rows
        self.total = total
        self.progress = progress
        self.done = 0
        self.reembed = (header.embedding_model, header.embedding_dim) != (
            core.embedder.model_id,
            core.embedder.dim,
        )
        self.created_ids: list[str] = []
        self.in_file: set[str] = set()  # memory ids of the file: all exist once written
        self.elsewhere: dict[str, bool] = {}  # other referenced ids: stored here or not
        self.memories = TransferCounts()
        self.reembedded = 0
        self.tables = {t.name: TransferCounts() for t in transfer_tables()}

    def run(self, lines: Iterable[bytes]) -> ImportResult:
        records = (
            r for r in read_records(lines, limits=_limits(self.core)) if not isinstance(r, Header)
        )
        try:
            self._write(records)
        except BaseException:
            if self.created_ids:
                self.core.store.delete(self.created_ids)
            raise
        if self.created_ids and self._grew_the_table():
            self.core.optimize()  # fold the new rows into the indexes before the next search
        return ImportResult(
            embedding_model=self.header.embedding_model,
            embedding_dim=self.header.embedding_dim,
            reembedded=self.reembedded,
            memories=self.memories,
            relations=self.tables.pop(RELATIONS_TABLE, TransferCounts()),
            rows=self.tables,
            conflicts=self.conflicts,
            conflict_ids=self.conflict_ids,
            replaced=self.replaced,
        )

    def _grew_the_table(self) -> bool:
        """True when this import's memories are ``optimize_growth`` of the table or more.

        Then the import ends in an ``optimize()``, as the automatic one would
        run. A smaller import into a large store leaves its rows to the
        automatic ``optimize()``: each one rewrites the table's files, and a
        bulk load in many small imports forcing one per import kept several
        rewrites on disk at once (at 100k memories, 5.4x the final size).
        """
        table_rows = self.core.store.start_count().result()
        return len(self.created_ids) >= self.core.settings.optimize_growth * table_rows

    def _write(self, records: Iterator[Record]) -> None:
        """Memories batch by batch, then every row in one transaction (the file's order)."""
        batch: list[MemoryRecord] = []
        first_row: RowRecord | None = None
        for record in records:
            if isinstance(record, RowRecord):
                first_row = record
                break
            batch.append(record)
            if len(batch) >= self.batch_rows:
                self._memories(batch)
                batch = []
        if batch:
            self._memories(batch)
        if first_row is None:
            return
        rows = chain([first_row], (r for r in records if isinstance(r, RowRecord)))
        with self.core.db.session() as session:
            for table, same_table in groupby(rows, key=lambda r: r.table):
                for chunk in _batched(same_table, self.batch_rows):
                    self._rows(session, table, [r.values for r in chunk])

    def _advance(self, n: int) -> None:
        self.done += n
        if self.progress is not None:
            self.progress(self.done, self.total)

    def _memories(self, batch: Sequence[MemoryRecord]) -> None:
        ids = [r.memory.memory_id for r in batch]
        self.in_file.update(ids)
        stored = self.core.store.get(ids)
        self._conflicts([r.memory for r in batch if r.memory.memory_id in stored], stored)
        fresh = [r for r in batch if r.memory.memory_id not in stored]
        written: list[Memory] = []
        if fresh:
            vectors = (
                self.core.embedder.embed_batch([r.memory.content for r in fresh])
                if self.reembed
                else np.stack([r.vector for r in fresh]).astype(np.float32)
            )
            written = self.core.write_memories([r.memory for r in fresh], vectors)
        self.created_ids += [m.memory_id for m in written]
        if self.reembed:
            self.reembedded += len(written)
        self.memories = TransferCounts(
            self.memories.created + len(written),
            self.memories.skipped + len(batch) - len(written),
        )
        self._advance(len(batch))

    def _conflicts(self, memories: Sequence[Memory], stored: dict[str, Memory]) -> None:
        """Count (and with ``replace``, overwrite) the stored memories the file changes."""
        for memory in memories:
            if _fields(memory) == _fields(stored[memory.memory_id]):
                continue
            self.conflicts += 1
            if len(self.conflict_ids) < MAX_CONFLICTS_LISTED:
                self.conflict_ids.append(memory.memory_id)
            if self.on_conflict == "replace":
                self.core.overwrite(memory)
                self.replaced += 1

    def _exists(self, memory_ids: set[str]) -> set[str]:
        """Of ``memory_ids``, those stored here once this import's memories are written."""
        unknown = [i for i in memory_ids if i not in self.in_file and i not in self.elsewhere]
        if unknown:
            stored = self.core.store.get(unknown)
            self.elsewhere.update((i, i in stored) for i in unknown)
        return {i for i in memory_ids if i in self.in_file or self.elsewhere[i]}

    def _rows(self, session: Session, table: Table, batch: list[dict[str, Any]]) -> None:
        refs = table_refs(table)
        key = key_columns(table)
        counts = self.tables.get(table.name, TransferCounts())
        if self.reembed and table.name == ADAPTERS_TABLE:
            # A query adapter maps one model's vectors; the owner's next feedback
            # fits a new one for this instance's model.
            self.tables[table.name] = TransferCounts(
                counts.created, counts.skipped + len(batch), counts.orphaned
            )
            self._advance(len(batch))
            return
        referenced = set().union(*(refs.memory_ids(row) for row in batch))
        present = self._exists(referenced)
        wanted = [row for row in batch if refs.memory_ids(row) <= present]
        orphaned = len(batch) - len(wanted)
        keys = [tuple(row.get(c.name) for c in key) for row in wanted]
        found = session.execute(select(*key).where(tuple_(*key).in_(keys))) if keys else ()
        taken = {_key(k) for k in found}
        new: list[dict[str, Any]] = []
        for row, row_key in zip(wanted, map(_key, keys), strict=True):
            if row_key not in taken:
                taken.add(row_key)
                new.append(row)
        if self.reembed:
            self._reembed_columns(table, new)
        # One INSERT per set of columns present (rows may leave defaulted columns out).
        for _columns, same in groupby(
            sorted(new, key=lambda r: tuple(sorted(r))), key=lambda r: tuple(sorted(r))
        ):
            session.execute(insert(table), list(same))
        self.tables[table.name] = TransferCounts(
            counts.created + len(new),
            counts.skipped + len(wanted) - len(new),
            counts.orphaned + orphaned,
        )
        self._advance(len(batch))

    def _reembed_columns(self, table: Table, rows: list[dict[str, Any]]) -> None:
        """Recompute query embeddings in ``rows`` with this instance's model (in place)."""
        for (name, vector_column), text_column in EMBEDDED_COLUMNS.items():
            if name != table.name:
                continue
            todo = [r for r in rows if r.get(vector_column) is not None and r.get(text_column)]
            if not todo:
                continue
            vectors = self.core.embedder.embed_batch([r[text_column] for r in todo], query=True)
            for row, vector in zip(todo, vectors, strict=True):
                row[vector_column] = np.asarray(vector, dtype=np.float32).tobytes()


def _fields(memory: Memory) -> tuple[Any, ...]:
    """What an import compares of two versions of one memory: all but the write times."""
    return (
        memory.kind,
        memory.tags,
        memory.source,
        memory.doc_id,
        memory.chunk_index,
        memory.parent_id,
        _utc(memory.event_time) if memory.event_time is not None else None,
        json.dumps(memory.metadata, sort_keys=True, default=str),
    )


def _batched(items: Iterable[RowRecord], size: int) -> Iterator[list[RowRecord]]:
    """Lists of up to ``size`` items (``itertools.batched`` arrives in Python 3.12)."""
    iterator = iter(items)
    while chunk := list(islice(iterator, size)):
        yield chunk


def _key(values: Iterable[Any]) -> tuple[Any, ...]:
    """A row's key as a hashable tuple comparable with what SQLite returns."""
    return tuple(
        _utc(v)
        if isinstance(v, datetime)
        else json.dumps(v, sort_keys=True)
        if isinstance(v, list | dict)
        else v
        for v in values
    )


def _utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)

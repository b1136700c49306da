"""Learned rows per past query, kept in memory while their owner's counter is unchanged.

Every learned search reads the feedback weights and the expansion words of
the past queries similar to it. Those rows change only with feedback (or a
deletion), and every such change bumps the owner's ``query_cache:<owner>``
counter (database triggers, migrations 0005 and 0008). So rows read once
under a counter value answer again until it moves. A memo starts with all of
an owner's rows in one read while they are few enough; past that bound a key
not yet read is read from SQL and added. Rows read after the counter was read
can only be newer than it, never older, so a memo never serves rows older
than its counter. When the counter moves, the keys the change log names
(migration 0009) are read again and the others kept; when the log cannot
say, the memo starts over.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from sqlalchemy import Row, bindparam, select
from sqlalchemy.orm import InstrumentedAttribute

from tribal_memory.base.db import Database
from tribal_memory.base.sql import query_cache_counter

_Row = TypeVar("_Row")

MAX_KEYS = 20_000
"""Most query keys kept per owner; past that the owner's memo starts over."""

PRELOAD_ROWS = 200_000
"""Most rows an owner may have for its memo to start with all of them (else: lazily)."""


@dataclass(slots=True)
class _Memo(Generic[_Row]):
    """An owner's rows as of ``generation``; ``complete``: every key with rows is in ``rows``."""

    generation: int
    rows: dict[str, list[_Row]]
    complete: bool


class RowsByKey(Generic[_Row]):
    """Rows per (owner, query key), reused while the owner's generation is unchanged.

    A memo starts with all of an owner's rows in one read (``read_all``) when
    it has at most ``preload_rows``, so a search never waits for SQL for a
    past query it has not met yet; after a change only the changed keys are
    read again. With more rows, or no ``read_all``, keys are read when first
    asked for.

    Args:
        read: ``read(owner, keys) -> {key: rows}``; keys without rows may be absent.
        read_all: ``read_all(owner, limit) -> {key: rows}`` of every key of
            ``owner`` with rows, or None when it has more than ``limit`` rows.
        changed: ``changed(owner, since, until)``: the keys whose rows changed
            between two counter values, None when unknown (see
            :func:`tribal_memory.base.sql.read_changes`); None: forget every key.
        max_keys: Most keys kept per owner (a lazy memo past it starts over).
        preload_rows: Most rows an owner may have to be read whole (0: always lazily).
    """

    def __init__(
        self,
        read: Callable[[str, Sequence[str]], dict[str, list[_Row]]],
        *,
        read_all: Callable[[str, int], dict[str, list[_Row]] | None] | None = None,
        changed: Callable[[str, int, int], set[str] | None] | None = None,
        max_keys: int = MAX_KEYS,
        preload_rows: int = PRELOAD_ROWS,
    ) -> None:
        self._read = read
        self._read_all = read_all
        self._changed = changed
        self._max_keys = max_keys
        self._preload_rows = preload_rows
        self._memo: dict[str, _Memo[_Row]] = {}
        self._lock = threading.Lock()

    def get(self, owner: str, keys: Sequence[str], generation: int | None) -> dict[str, list[_Row]]:
        """``{key: rows}`` for each of ``keys`` (``[]`` for a key without rows).

        ``generation``: the owner's counter as just read; None reads SQL and keeps nothing.
        """
        if generation is None:
            found = self._read(owner, keys)
            return {key: found.get(key, []) for key in keys}
        known = self._brought(owner, generation)
        with self._lock:
            rows = known.rows
            missing = [] if known.complete else [key for key in keys if key not in rows]
            answer = {key: rows[key] for key in keys if key in rows}
        if missing:
            found = self._read(owner, missing)
            with self._lock:
                if len(rows) + len(missing) > self._max_keys:
                    # A lazy memo past its bound starts over (unless it moved on meanwhile).
                    rows = {}
                    if self._memo.get(owner) is known:
                        self._memo[owner] = _Memo(known.generation, rows, complete=False)
                for key in missing:
                    rows[key] = answer[key] = found.get(key, [])
        return {key: answer.get(key, []) for key in keys}

    def snapshot(self, owner: str, generation: int) -> tuple[Mapping[str, list[_Row]], bool]:
        """The owner's memo brought to ``generation``: ``(rows per key, complete)``.

        A complete memo's rows are every key's rows and are never changed in
        place (a change makes a new mapping), so a caller may keep them and
        compare them by identity; an incomplete one holds only keys read so far.
        """
        known = self._brought(owner, generation)
        return known.rows, known.complete

    def _brought(self, owner: str, generation: int) -> _Memo[_Row]:
        """The owner's memo at ``generation``: kept, advanced through the change log, or new."""
        with self._lock:
            known = self._memo.get(owner)
        if known is not None and known.generation != generation:
            known = self._advanced(owner, known, generation)
        if known is None:
            known = self._started(owner, generation)
        with self._lock:
            self._memo[owner] = known
        return known

    def _started(self, owner: str, generation: int) -> _Memo[_Row]:
        """A new memo: all the owner's rows when they are few enough, else an empty lazy one."""
        if self._read_all is not None and self._preload_rows > 0:
            found = self._read_all(owner, self._preload_rows)
            if found is not None and len(found) <= self._max_keys:
                return _Memo(generation, found, complete=True)
        return _Memo(generation, {}, complete=False)

    def _advanced(self, owner: str, known: _Memo[_Row], generation: int) -> _Memo[_Row] | None:
        """``known`` brought to ``generation`` through the change log (None: start over)."""
        if len(known.rows) > self._max_keys or self._changed is None:
            return None
        changed = self._changed(owner, known.generation, generation)
        if changed is None:
            return None
        # A new dict: another thread may be reading the old one.
        kept = dict(known.rows)
        for key in changed:
            kept.pop(key, None)
        if known.complete and changed:
            kept.update(self._read(owner, sorted(changed)))
        return _Memo(generation, kept, known.complete)


def changed_keys(db: Database) -> Callable[[str, int, int], set[str] | None]:
    """``changed(owner, since, until)`` for :class:`RowsByKey`.

    It returns the query keys of ``owner`` whose learned rows changed between
    two values of its counter (None: unknown).
    """

    def changed(owner: str, since: int, until: int) -> set[str] | None:
        with db.reading() as connection:
            return db.changes(connection, query_cache_counter(owner), since, until)

    return changed


def sql_rows(
    db: Database,
    table: Any,
    columns: Sequence[InstrumentedAttribute[Any]],
    convert: Callable[[Sequence[Any]], _Row],
    *,
    max_keys: int = MAX_KEYS,
    preload_rows: int = PRELOAD_ROWS,
) -> RowsByKey[_Row]:
    """A :class:`RowsByKey` over a learned table keyed by ``(owner, query_key)``.

    Each row is ``convert(values of columns)``; the memo reads one owner's
    rows for some keys or, at start, all of them (one statement each, on a
    plain connection: these reads are on a search's path), and follows the
    owner's change log (:func:`changed_keys`).

    Args:
        db: The SQL database.
        table: A mapped class with ``owner`` and ``query_key`` columns.
        columns: The columns a row is made of (plain columns, not ORM rows:
            searches read these).
        convert: Makes a row from their values.
        max_keys: Most keys kept per owner.
        preload_rows: Most rows an owner may have to be read whole (0: read by key only).
    """
    statement = select(table.query_key, *columns)
    of_keys = statement.where(
        table.owner == bindparam("owner"), table.query_key.in_(bindparam("keys", expanding=True))
    )

    def grouped(found: Sequence[Row[Any]]) -> dict[str, list[_Row]]:
        rows: dict[str, list[_Row]] = {}
        for row in found:
            rows.setdefault(str(row[0]), []).append(convert(tuple(row)[1:]))
        return rows

    def read(owner: str, keys: Sequence[str]) -> dict[str, list[_Row]]:
        with db.reading() as connection:
            return grouped(connection.execute(of_keys, {"owner": owner, "keys": list(keys)}).all())

    def read_all(owner: str, limit: int) -> dict[str, list[_Row]] | None:
        query = statement.where(table.owner == owner).limit(limit + 1)
        with db.reading() as connection:
            found = connection.execute(query).all()
        return grouped(found) if len(found) <= limit else None

    return RowsByKey(
        read,
        read_all=read_all,
        changed=changed_keys(db),
        max_keys=max_keys,
        preload_rows=preload_rows,
    )

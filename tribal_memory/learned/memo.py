"""Learned rows per past query, kept in memory while their owner's counter is unchanged.

Every learned search reads the feedback weights and the expansion words of
the past queries similar to it. Those rows change only with feedback (or a
deletion), and every such change bumps the owner's ``query_cache:<owner>``
counter (database triggers, migrations 0005 and 0008). So rows read once
under a counter value answer again until it moves; a key not yet read is read
from SQL and added. Rows read after the counter was read can only be newer
than it, never older, so a memo never serves rows older than its counter.
When the counter moves, the keys the change log names (migration 0009) are
forgotten and the others kept; when the log cannot say, all are forgotten.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

from tribal_memory.base.db import Database
from tribal_memory.base.sql import read_changes
from tribal_memory.learned.query_cache import QueryCache

_Row = TypeVar("_Row")

MAX_KEYS = 20_000
"""Most query keys kept per owner; past that the owner's memo starts over."""


class RowsByKey(Generic[_Row]):
    """Rows per (owner, query key), reused while the owner's generation is unchanged.

    Args:
        read: ``read(owner, keys) -> {key: rows}``; keys without rows may be absent.
        changed: ``changed(owner, since, until)``: the keys whose rows changed
            between two counter values, None when unknown (see
            :func:`tribal_memory.base.sql.read_changes`); None: forget every key.
        max_keys: Most keys kept per owner.
    """

    def __init__(
        self,
        read: Callable[[str, Sequence[str]], dict[str, list[_Row]]],
        *,
        changed: Callable[[str, int, int], set[str] | None] | None = None,
        max_keys: int = MAX_KEYS,
    ) -> None:
        self._read = read
        self._changed = changed
        self._max_keys = max_keys
        self._memo: dict[str, tuple[int, dict[str, list[_Row]]]] = {}
        self._lock = threading.Lock()

    def get(self, owner: str, keys: Sequence[str], generation: int | None) -> dict[str, list[_Row]]:
        """``{key: rows}`` for each of ``keys`` (``[]`` for a key without rows).

        ``generation``: the owner's counter as just read; None reads SQL and keeps nothing.
        """
        if generation is None:
            found = self._read(owner, keys)
            return {key: found.get(key, []) for key in keys}
        with self._lock:
            known = self._memo.get(owner)
        if known is not None and known[0] != generation and len(known[1]) <= self._max_keys:
            changed = self._changed(owner, known[0], generation) if self._changed else None
            if changed is not None:  # a new dict: another thread may be reading the old one
                kept = {key: rows for key, rows in known[1].items() if key not in changed}
                known = (generation, kept)
        with self._lock:
            if known is None or known[0] != generation or len(known[1]) > self._max_keys:
                known = (generation, {})
            self._memo[owner] = known
            rows = known[1]
            missing = [key for key in keys if key not in rows]
        if missing:
            found = self._read(owner, missing)
            with self._lock:
                for key in missing:
                    rows[key] = found.get(key, [])
        return {key: rows[key] for key in keys}


def changed_keys(db: Database) -> Callable[[str, int, int], set[str] | None]:
    """``changed(owner, since, until)`` for :class:`RowsByKey`.

    It returns the query keys of ``owner`` whose learned rows changed between
    two values of its counter (None: unknown).
    """

    def changed(owner: str, since: int, until: int) -> set[str] | None:
        with db.session() as session:
            return read_changes(session, QueryCache.generation_name(owner), since, until)

    return changed

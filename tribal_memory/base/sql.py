"""SQL helpers of the learned tables: change counters, upserts and ages in days.

Each works on SQLite and PostgreSQL alike (the dialect is read from the
session's bind). The counters are kept by the triggers of
:mod:`tribal_memory.base.generation_triggers`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Connection, bindparam, case, extract, func, literal, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import InstrumentedAttribute, Session

from tribal_memory.base.generation_triggers import KEEP_CHANGES
from tribal_memory.base.tables import LearnedChangeRow, LearnedGenerationRow

_UNIX_EPOCH_JULIAN_DAY = 2440587.5


def query_cache_counter(owner: str) -> str:
    """The change counter of ``owner``'s query-cache, feedback-weight and expansion rows."""
    return f"query_cache:{owner}"


def read_generation(session: Session | Connection, name: str) -> int:
    """The change counter ``name`` of the ``learned_generations`` table (0 when never bumped).

    Database triggers (migrations 0005 and 0008) add one to
    ``query_cache:<owner>`` on every insert, update or delete of that owner's
    query-cache, query-weight and expansion rows, and to
    ``fact_anchors`` on every change of an anchor, in the writing transaction.
    A process that cached something derived from those rows keeps using it
    while the counter is unchanged: a change made by any process, through
    any code path, is seen at the next read of the counter.
    """
    value = session.scalar(
        select(LearnedGenerationRow.generation).where(LearnedGenerationRow.name == name)
    )
    return int(value or 0)


_GENERATIONS = select(LearnedGenerationRow.name, LearnedGenerationRow.generation).where(
    LearnedGenerationRow.name.in_(bindparam("names", expanding=True))
)
"""Built once: :func:`read_generations` runs on a search's path."""


def read_generations(session: Session | Connection, names: Sequence[str]) -> dict[str, int]:
    """Several change counters (see :func:`read_generation`) in one statement.

    ``session``: an ORM session or a plain connection (cheaper on a search's path).

    Returns:
        ``{name: counter}`` for every name asked, 0 for one never bumped.
    """
    rows = session.execute(_GENERATIONS, {"names": list(names)}).all()
    found = {str(name): int(generation) for name, generation in rows}
    return {name: found.get(name, 0) for name in names}


_CHANGES = select(LearnedChangeRow.item).where(
    LearnedChangeRow.name == bindparam("name"),
    LearnedChangeRow.generation > bindparam("since"),
    LearnedChangeRow.generation <= bindparam("until"),
)


def read_changes(
    session: Session | Connection, name: str, since: int, until: int
) -> set[str] | None:
    """What the changes counted in ``name`` after ``since`` up to ``until`` touched.

    The triggers of migration 0009 log each counted change's query key
    (``query_cache:<owner>``) or memory id (``fact_anchors``) under the
    counter's new value, so a process holding something built at ``since``
    can re-read only those items to be current at ``until``.

    Returns:
        The items (a set, empty when ``until == since``); None when the log
        no longer holds every change in between (pruned, written before
        migration 0009, or the counter went back): rebuild from scratch.
    """
    if until == since:
        return set()
    if until < since or until - since > KEEP_CHANGES:
        return None
    items = session.scalars(_CHANGES, {"name": name, "since": since, "until": until}).all()
    if len(items) != until - since:
        return None
    return set(items)


def upsert(
    session: Session, table: type[Any], values: dict[str, Any], *, update: Sequence[str]
) -> None:
    """Insert a row, or update the columns ``update`` of the row with the same primary key.

    One statement (``INSERT ... ON CONFLICT DO UPDATE`` in SQLite's or
    PostgreSQL's dialect), so two processes writing the same key both succeed
    (the later write wins) instead of one failing on the primary key.

    Args:
        session: An open session (the caller commits).
        table: A mapped class of :mod:`tribal_memory.base.tables`.
        values: Every column of the new row.
        update: Columns to overwrite when the row exists.
    """
    name = session.get_bind().dialect.name
    insert = postgresql.insert if name == "postgresql" else sqlite.insert
    statement = insert(table).values(**values)
    keys = [column.name for column in table.__table__.primary_key.columns]
    session.execute(
        statement.on_conflict_do_update(
            index_elements=keys, set_={c: statement.excluded[c] for c in update}
        )
    )


def days_since(
    session: Session, column: ColumnElement[Any] | InstrumentedAttribute[Any], now: datetime
) -> ColumnElement[float]:
    """SQL for the age of the timestamps in ``column`` at ``now``, in days (0 for a later one).

    In the session's dialect: SQLite stores UTC timestamps as text
    (``julianday``), PostgreSQL as ``timestamptz`` (``extract(epoch ...)``).
    """
    epoch_s = now.timestamp()
    if session.get_bind().dialect.name == "postgresql":
        age = (literal(epoch_s) - extract("epoch", column)) / 86400.0
    else:
        age = literal(epoch_s / 86400.0 + _UNIX_EPOCH_JULIAN_DAY) - func.julianday(column)
    return case((age < 0, 0.0), else_=age)

"""Triggers that keep the ``learned_generations`` change counters (used by migrations).

A trigger on a learned table adds one to a named counter on every insert,
update or delete of a row, in the writing transaction, so a process that
caches something derived from the table sees every change, whichever process
or code path made it, at its next read of one row
(:func:`tribal_memory.base.sql.read_generation`). Given an item expression, the
trigger also logs which key each change touched, under the counter's new
value, in ``learned_changes`` (the last :data:`KEEP_CHANGES` per counter), so
such a process can re-read only what changed (:func:`tribal_memory.base.sql.read_changes`).
"""

from __future__ import annotations

from alembic import op

KEEP_CHANGES = 10_000
"""Entries of ``learned_changes`` kept per counter (older ones are deleted as new ones come)."""


def _sqlite_bump(expression: str, item: str | None) -> str:
    bump = (
        f"INSERT OR IGNORE INTO learned_generations (name, generation) VALUES ({expression}, 0); "
        f"UPDATE learned_generations SET generation = generation + 1 WHERE name = {expression};"
    )
    if item is None:
        return bump
    return bump + (
        "INSERT INTO learned_changes (name, generation, item) "
        f"SELECT name, generation, {item} FROM learned_generations WHERE name = {expression}; "
        f"DELETE FROM learned_changes WHERE name = {expression} AND generation <= "
        f"(SELECT generation FROM learned_generations WHERE name = {expression}) - {KEEP_CHANGES};"
    )


def _postgres_bump(expression: str, item: str | None) -> str:
    if item is None:
        return (
            f"INSERT INTO learned_generations (name, generation) VALUES ({expression}, 1) "
            "ON CONFLICT (name) DO UPDATE SET generation = learned_generations.generation + 1;"
        )
    return (
        f"INSERT INTO learned_generations (name, generation) VALUES ({expression}, 1) "
        "ON CONFLICT (name) DO UPDATE SET generation = learned_generations.generation + 1 "
        "RETURNING generation INTO bumped; "
        "INSERT INTO learned_changes (name, generation, item) "
        f"VALUES ({expression}, bumped, {item}); "
        f"DELETE FROM learned_changes WHERE name = {expression} "
        f"AND generation <= bumped - {KEEP_CHANGES};"
    )


def create_triggers(table: str, counter: str, item: str | None = None) -> None:
    """Count every row change of ``table`` in the counter named by ``counter``.

    ``counter``: an SQL expression over ``ROW`` (replaced by NEW or OLD), e.g.
    ``"'query_cache:' || ROW.owner"``; an update of a row counts for its old
    and its new name. ``item``: an SQL expression over ``ROW`` naming what
    changed (e.g. ``"ROW.query_key"``), logged in ``learned_changes`` with the
    counter's new value; None logs nothing.

    Raises:
        NotImplementedError: a database other than SQLite or PostgreSQL.
    """
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        for event, rows in (("INSERT", ("NEW",)), ("UPDATE", ("OLD", "NEW")), ("DELETE", ("OLD",))):
            body = " ".join(
                _sqlite_bump(counter.replace("ROW", row), _on(item, row)) for row in rows
            )
            op.execute(
                f"CREATE TRIGGER {table}_{event.lower()}_generation AFTER {event} ON {table} "
                f"FOR EACH ROW BEGIN {body} END"
            )
    elif dialect == "postgresql":
        op.execute(
            f"""
            CREATE FUNCTION {table}_generation() RETURNS trigger LANGUAGE plpgsql AS $$
            DECLARE
                bumped BIGINT;
            BEGIN
                IF TG_OP IN ('UPDATE', 'DELETE') THEN
                    {_postgres_bump(counter.replace("ROW", "OLD"), _on(item, "OLD"))}
                END IF;
                IF TG_OP IN ('INSERT', 'UPDATE') THEN
                    {_postgres_bump(counter.replace("ROW", "NEW"), _on(item, "NEW"))}
                END IF;
                RETURN NULL;
            END
            $$
            """
        )
        op.execute(
            f"CREATE TRIGGER {table}_generation AFTER INSERT OR UPDATE OR DELETE ON {table} "
            f"FOR EACH ROW EXECUTE FUNCTION {table}_generation()"
        )
    else:
        raise NotImplementedError(f"no generation triggers for {dialect}")


def _on(item: str | None, row: str) -> str | None:
    return item.replace("ROW", row) if item is not None else None


def drop_triggers(table: str) -> None:
    """Drop what :func:`create_triggers` made for ``table`` (missing ones are ignored)."""
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"DROP TRIGGER IF EXISTS {table}_generation ON {table}")
        op.execute(f"DROP FUNCTION IF EXISTS {table}_generation()")
    else:
        for event in ("insert", "update", "delete"):
            op.execute(f"DROP TRIGGER IF EXISTS {table}_{event}_generation")

"""Triggers that keep the ``learned_generations`` change counters (used by migrations).

A trigger on a learned table adds one to a named counter on every insert,
update or delete of a row, in the writing transaction, so a process that
caches something derived from the table sees every change, whichever process
or code path made it, at its next read of one row
(:func:`tribal_memory.db.read_generation`).
"""

from __future__ import annotations

from alembic import op


def _sqlite_bump(expression: str) -> str:
    return (
        f"INSERT OR IGNORE INTO learned_generations (name, generation) VALUES ({expression}, 0); "
        f"UPDATE learned_generations SET generation = generation + 1 WHERE name = {expression};"
    )


def _postgres_bump(expression: str) -> str:
    return (
        f"INSERT INTO learned_generations (name, generation) VALUES ({expression}, 1) "
        "ON CONFLICT (name) DO UPDATE SET generation = learned_generations.generation + 1;"
    )


def create_triggers(table: str, counter: str) -> None:
    """Count every row change of ``table`` in the counter named by ``counter``.

    ``counter``: an SQL expression over ``ROW`` (replaced by NEW or OLD), e.g.
    ``"'query_cache:' || ROW.owner"``; an update of a row counts for its old
    and its new name.

    Raises:
        NotImplementedError: a database other than SQLite or PostgreSQL.
    """
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        for event, rows in (("INSERT", ("NEW",)), ("UPDATE", ("OLD", "NEW")), ("DELETE", ("OLD",))):
            body = " ".join(_sqlite_bump(counter.replace("ROW", row)) for row in rows)
            op.execute(
                f"CREATE TRIGGER {table}_{event.lower()}_generation AFTER {event} ON {table} "
                f"FOR EACH ROW BEGIN {body} END"
            )
    elif dialect == "postgresql":
        op.execute(
            f"""
            CREATE FUNCTION {table}_generation() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                IF TG_OP IN ('UPDATE', 'DELETE') THEN
                    {_postgres_bump(counter.replace("ROW", "OLD"))}
                END IF;
                IF TG_OP IN ('INSERT', 'UPDATE') THEN
                    {_postgres_bump(counter.replace("ROW", "NEW"))}
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


def drop_triggers(table: str) -> None:
    """Drop what :func:`create_triggers` made for ``table`` (missing ones are ignored)."""
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"DROP TRIGGER IF EXISTS {table}_generation ON {table}")
        op.execute(f"DROP FUNCTION IF EXISTS {table}_generation()")
    else:
        for event in ("insert", "update", "delete"):
            op.execute(f"DROP TRIGGER IF EXISTS {table}_{event}_generation")

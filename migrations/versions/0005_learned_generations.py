"""learned generations: change counters of the query cache (per owner) and the anchors

Kept by triggers in the writing transaction, so a process that caches
something derived from those tables sees every change, whichever process or
code path made it, at its next read of one row (see tribal_memory.db.read_generation).

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-22
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# (table, SQL expression naming the counter for a row; ROW is NEW or OLD)
_COUNTERS = (
    ("query_cache", "'query_cache:' || ROW.owner"),
    ("fact_anchors", "'fact_anchors'"),
)


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


def _sqlite_upgrade() -> None:
    for table, name in _COUNTERS:
        for event, rows in (("INSERT", ("NEW",)), ("UPDATE", ("OLD", "NEW")), ("DELETE", ("OLD",))):
            body = " ".join(_sqlite_bump(name.replace("ROW", row)) for row in rows)
            op.execute(
                f"CREATE TRIGGER {table}_{event.lower()}_generation AFTER {event} ON {table} "
                f"FOR EACH ROW BEGIN {body} END"
            )


def _postgres_upgrade() -> None:
    for table, name in _COUNTERS:
        op.execute(
            f"""
            CREATE FUNCTION {table}_generation() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                IF TG_OP IN ('UPDATE', 'DELETE') THEN
                    {_postgres_bump(name.replace("ROW", "OLD"))}
                END IF;
                IF TG_OP IN ('INSERT', 'UPDATE') THEN
                    {_postgres_bump(name.replace("ROW", "NEW"))}
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


def upgrade() -> None:
    op.create_table(
        "learned_generations",
        sa.Column("name", sa.String(length=160), nullable=False),
        sa.Column("generation", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("name"),
    )
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        _sqlite_upgrade()
    elif dialect == "postgresql":
        _postgres_upgrade()
    else:
        raise NotImplementedError(f"no generation triggers for {dialect}")


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    for table, _ in _COUNTERS:
        if dialect == "postgresql":
            op.execute(f"DROP TRIGGER IF EXISTS {table}_generation ON {table}")
            op.execute(f"DROP FUNCTION IF EXISTS {table}_generation()")
        else:
            for event in ("insert", "update", "delete"):
                op.execute(f"DROP TRIGGER IF EXISTS {table}_{event}_generation")
    op.drop_table("learned_generations")

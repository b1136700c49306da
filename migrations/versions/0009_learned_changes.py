"""learned changes: the counted changes log which query key or memory they touched

The triggers of migrations 0005 and 0008 count every change of the learned
tables; they now also write the changed row's query key (query cache,
weights, expansions) or memory id (anchors) to ``learned_changes`` under the
counter's new value, keeping the last ``KEEP_CHANGES`` per counter. A process
holding an index built at one counter value re-reads only those keys instead
of every row (see tribal_memory.base.sql.read_changes).

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-25
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from tribal_memory.base.generation_triggers import create_triggers, drop_triggers

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# (table, counter expression, item expression; ROW is NEW or OLD)
_LOGGED = (
    ("query_cache", "'query_cache:' || ROW.owner", "ROW.query_key"),
    ("query_fact_weights", "'query_cache:' || ROW.owner", "ROW.query_key"),
    ("query_expansions", "'query_cache:' || ROW.owner", "ROW.query_key"),
    ("fact_anchors", "'fact_anchors'", "ROW.memory_id"),
)


def upgrade() -> None:
    op.create_table(
        "learned_changes",
        sa.Column("name", sa.String(length=160), nullable=False),
        sa.Column("generation", sa.BigInteger(), nullable=False),
        sa.Column("item", sa.String(length=512), nullable=False),
        sa.PrimaryKeyConstraint("name", "generation"),
    )
    for table, counter, item in _LOGGED:
        drop_triggers(table)
        create_triggers(table, counter, item)


def downgrade() -> None:
    for table, counter, _ in _LOGGED:
        drop_triggers(table)
        create_triggers(table, counter)
    op.drop_table("learned_changes")

"""learned generations: change counters of the query cache (per owner) and the anchors

Kept by triggers in the writing transaction, so a process that caches
something derived from those tables sees every change, whichever process or
code path made it, at its next read of one row (see tribal_memory.base.sql.read_generation).

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-22
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from tribal_memory.base.generation_triggers import create_triggers, drop_triggers

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# (table, SQL expression naming the counter for a row; ROW is NEW or OLD)
_COUNTERS = (
    ("query_cache", "'query_cache:' || ROW.owner"),
    ("fact_anchors", "'fact_anchors'"),
)


def upgrade() -> None:
    op.create_table(
        "learned_generations",
        sa.Column("name", sa.String(length=160), nullable=False),
        sa.Column("generation", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("name"),
    )
    for table, counter in _COUNTERS:
        create_triggers(table, counter)


def downgrade() -> None:
    for table, _ in _COUNTERS:
        drop_triggers(table)
    op.drop_table("learned_generations")

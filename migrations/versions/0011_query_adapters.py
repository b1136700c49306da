"""query adapters: one fitted linear map of the query embedding per owner

``query_adapters`` holds each owner's adapter (tribal_memory.learned.adapter):
the ``dim x dim`` float32 weights and what they were fitted on. Every change
bumps the counter ``query_adapter:<owner>``, so searches in every process
re-read an owner's adapter once after it is refitted.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-26
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from tribal_memory.base.generation_triggers import create_triggers, drop_triggers

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "query_adapters",
        sa.Column("owner", sa.String(128), primary_key=True),
        sa.Column("dim", sa.Integer(), nullable=False),
        sa.Column("weights", sa.LargeBinary(), nullable=False),
        sa.Column("questions", sa.Integer(), nullable=False),
        sa.Column("events", sa.Integer(), nullable=False),
        sa.Column("trained_at", sa.DateTime(timezone=True), nullable=False),
    )
    create_triggers("query_adapters", "'query_adapter:' || ROW.owner")


def downgrade() -> None:
    drop_triggers("query_adapters")
    op.drop_table("query_adapters")

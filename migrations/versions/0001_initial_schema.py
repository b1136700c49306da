"""initial schema: relations and learned tables

Revision ID: 0001
Revises:
Create Date: 2026-11-21
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "fact_anchors",
        sa.Column("memory_id", sa.String(length=64), nullable=False),
        sa.Column("anchor_text", sa.String(length=1024), nullable=False),
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.Column("confidence", sa.Float(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("memory_id", "anchor_text"),
    )
    op.create_table(
        "query_cache",
        sa.Column("owner", sa.String(length=128), nullable=False),
        sa.Column("query_key", sa.String(length=512), nullable=False),
        sa.Column("query_text", sa.Text(), nullable=False),
        sa.Column("memory_ids", sa.JSON(), nullable=False),
        sa.Column("success_count", sa.Integer(), nullable=False),
        sa.Column("failure_count", sa.Integer(), nullable=False),
        sa.Column("last_success", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("owner", "query_key"),
    )
    op.create_table(
        "query_expansions",
        sa.Column("owner", sa.String(length=128), nullable=False),
        sa.Column("query_key", sa.String(length=512), nullable=False),
        sa.Column("expansion", sa.String(length=1024), nullable=False),
        sa.Column("weight", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("owner", "query_key", "expansion"),
    )
    op.create_table(
        "query_fact_weights",
        sa.Column("owner", sa.String(length=128), nullable=False),
        sa.Column("query_key", sa.String(length=512), nullable=False),
        sa.Column("memory_id", sa.String(length=64), nullable=False),
        sa.Column("weight", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("owner", "query_key", "memory_id"),
    )
    with op.batch_alter_table("query_fact_weights", schema=None) as batch_op:
        batch_op.create_index("ix_query_fact_weights_memory", ["memory_id"], unique=False)

    op.create_table(
        "relations",
        sa.Column("source_id", sa.String(length=64), nullable=False),
        sa.Column("target_id", sa.String(length=64), nullable=False),
        sa.Column("type", sa.String(length=64), nullable=False),
        sa.Column("weight", sa.Float(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("source_id", "target_id", "type"),
    )
    with op.batch_alter_table("relations", schema=None) as batch_op:
        batch_op.create_index("ix_relations_target", ["target_id"], unique=False)

    op.create_table(
        "retrieval_events",
        sa.Column("retrieval_id", sa.String(length=64), nullable=False),
        sa.Column("owner", sa.String(length=128), nullable=False),
        sa.Column("query", sa.Text(), nullable=False),
        sa.Column("variant", sa.String(length=32), nullable=False),
        sa.Column("results", sa.JSON(), nullable=False),
        sa.Column("used_ids", sa.JSON(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("feedback_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("retrieval_id"),
    )
    with op.batch_alter_table("retrieval_events", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_retrieval_events_owner"), ["owner"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("retrieval_events", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_retrieval_events_owner"))

    op.drop_table("retrieval_events")
    with op.batch_alter_table("relations", schema=None) as batch_op:
        batch_op.drop_index("ix_relations_target")

    op.drop_table("relations")
    with op.batch_alter_table("query_fact_weights", schema=None) as batch_op:
        batch_op.drop_index("ix_query_fact_weights_memory")

    op.drop_table("query_fact_weights")
    op.drop_table("query_expansions")
    op.drop_table("query_cache")
    op.drop_table("fact_anchors")

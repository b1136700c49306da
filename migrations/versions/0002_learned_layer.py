"""learned layer: query vectors and hit snapshots, event parts, anchor uses, variants

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-21
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("query_cache") as batch:
        batch.add_column(sa.Column("query_vector", sa.LargeBinary(), nullable=True))
        batch.add_column(sa.Column("hits", sa.JSON(), nullable=False, server_default="[]"))
        batch.add_column(
            sa.Column(
                "updated_at",
                sa.DateTime(timezone=True),
                nullable=False,
                server_default=sa.text("CURRENT_TIMESTAMP"),
            )
        )
    with op.batch_alter_table("retrieval_events") as batch:
        batch.add_column(
            sa.Column("cache_hit", sa.Boolean(), nullable=False, server_default=sa.false())
        )
        batch.add_column(sa.Column("parts", sa.JSON(), nullable=False, server_default="[]"))
    with op.batch_alter_table("fact_anchors") as batch:
        batch.add_column(sa.Column("uses", sa.Integer(), nullable=False, server_default="0"))
    op.create_index("ix_retrieval_events_created_at", "retrieval_events", ["created_at"])
    op.create_table(
        "owner_variants",
        sa.Column("owner", sa.String(length=128), nullable=False),
        sa.Column("variant", sa.String(length=16), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("owner"),
    )


def downgrade() -> None:
    op.drop_table("owner_variants")
    op.drop_index("ix_retrieval_events_created_at", table_name="retrieval_events")
    with op.batch_alter_table("fact_anchors") as batch:
        batch.drop_column("uses")
    with op.batch_alter_table("retrieval_events") as batch:
        batch.drop_column("parts")
        batch.drop_column("cache_hit")
    with op.batch_alter_table("query_cache") as batch:
        batch.drop_column("updated_at")
        batch.drop_column("hits")
        batch.drop_column("query_vector")

"""document summaries: each document row records its summary memories

``summaries`` lists ``{"memory_id", "section", "source_hash"}`` per summary
memory of the document (``section`` null: the document's own summary), so that
re-ingesting keeps unchanged sections' summaries and deleting the document
deletes them (tribal_memory.documents.summary_sync).

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-25
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("documents") as batch:
        batch.add_column(sa.Column("summaries", sa.JSON(), nullable=False, server_default="[]"))


def downgrade() -> None:
    with op.batch_alter_table("documents") as batch:
        batch.drop_column("summaries")

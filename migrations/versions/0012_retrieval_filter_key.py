"""retrieval filters: retrieval_events gains filter_key

Feedback on a search filtered beyond owner and shared (tags, kinds, sources,
times, a near neighbourhood) teaches the query cache under the filters'
fingerprint, so that its answer never serves the same query unfiltered.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-26
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("retrieval_events") as batch:
        batch.add_column(sa.Column("filter_key", sa.String(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("retrieval_events") as batch:
        batch.drop_column("filter_key")

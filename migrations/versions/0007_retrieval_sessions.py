"""retrieval sessions: retrieval_events gains session_id

Feedback on a retrieval may name memories that another retrieval of the same
agent session returned (the agent searched again and used what it found).

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-24
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("retrieval_events") as batch:
        batch.add_column(sa.Column("session_id", sa.String(length=128), nullable=True))
    op.create_index("ix_retrieval_events_session", "retrieval_events", ["owner", "session_id"])


def downgrade() -> None:
    op.drop_index("ix_retrieval_events_session", table_name="retrieval_events")
    with op.batch_alter_table("retrieval_events") as batch:
        batch.drop_column("session_id")

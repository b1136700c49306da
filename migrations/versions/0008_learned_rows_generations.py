"""learned rows generations: query weights and expansions count in their owner's counter

The counter ``query_cache:<owner>`` (migration 0005) now also counts every
change of that owner's ``query_fact_weights`` and ``query_expansions`` rows,
so a search may keep the weights and expansion words it read for a past query
while the counter is unchanged (see tribal_memory.learned.feedback).

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-25
"""

from __future__ import annotations

from collections.abc import Sequence

from tribal_memory.base.generation_triggers import create_triggers, drop_triggers

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_TABLES = ("query_fact_weights", "query_expansions")


def upgrade() -> None:
    for table in _TABLES:
        create_triggers(table, "'query_cache:' || ROW.owner")


def downgrade() -> None:
    for table in _TABLES:
        drop_triggers(table)

"""anchors per owner: fact_anchors gains owner (part of the key)

An anchor was global per memory: one owner's question became an anchor every
owner's search used. Now it belongs to an owner: a learned anchor to the
owner whose feedback made it, a manual one to its memory's owner (``shared``
for everyone). Existing learned anchors get the owners of the retrievals
whose feedback used the memory for that question (one row per owner, with
that owner's count of uses); learned anchors no logged retrieval explains
go to ``*`` (searches over all owners); manual and LLM anchors to ``shared``.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-24
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_MAX_ANCHOR_CHARS = 1024
_BUMP_SQLITE = (
    "INSERT OR IGNORE INTO learned_generations (name, generation) VALUES ('fact_anchors', 0); "
    "UPDATE learned_generations SET generation = generation + 1 WHERE name = 'fact_anchors';"
)


def _columns(with_owner: bool) -> list[sa.Column[Any]]:
    key = ["memory_id", "owner", "anchor_text"] if with_owner else ["memory_id", "anchor_text"]
    columns: list[sa.Column[Any]] = [
        sa.Column("memory_id", sa.String(length=64), nullable=False),
        sa.Column("anchor_text", sa.String(length=1024), nullable=False),
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.Column("confidence", sa.Float(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("uses", sa.Integer(), nullable=False, server_default="0"),
    ]
    if with_owner:
        columns.insert(1, sa.Column("owner", sa.String(length=128), nullable=False))
    return [*columns, sa.PrimaryKeyConstraint(*key)]  # type: ignore[list-item]


def _triggers() -> None:
    """The change counter of anchors, as migration 0005 made it (dropping the table drops it)."""
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            "CREATE TRIGGER fact_anchors_generation AFTER INSERT OR UPDATE OR DELETE ON "
            "fact_anchors FOR EACH ROW EXECUTE FUNCTION fact_anchors_generation()"
        )
        return
    for event, rows in (("INSERT", 1), ("UPDATE", 2), ("DELETE", 1)):
        op.execute(
            f"CREATE TRIGGER fact_anchors_{event.lower()}_generation AFTER {event} ON "
            f"fact_anchors FOR EACH ROW BEGIN {' '.join([_BUMP_SQLITE] * rows)} END"
        )


def _learners() -> dict[tuple[str, str], Counter[str]]:
    """``(memory_id, anchor text) -> Counter(owner)`` from the retrievals with feedback."""
    found: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    events = op.get_bind().execute(
        sa.text("SELECT owner, query, used_ids FROM retrieval_events WHERE used_ids IS NOT NULL")
    )
    for owner, query, used in events:
        ids = json.loads(used) if isinstance(used, str) else used
        text = " ".join(str(query).split())[:_MAX_ANCHOR_CHARS]
        for memory_id in ids or ():
            found[(str(memory_id), text)][str(owner)] += 1
    return found


def upgrade() -> None:
    bind = op.get_bind()
    old_table = sa.Table("fact_anchors", sa.MetaData(), *_columns(with_owner=False))
    old = bind.execute(
        sa.select(
            old_table.c.memory_id,
            old_table.c.anchor_text,
            old_table.c.source,
            old_table.c.confidence,
            old_table.c.created_at,
            old_table.c.uses,
        )
    ).all()
    learners = _learners()
    new_table = op.create_table("fact_anchors_owned", *_columns(with_owner=True))
    rows: list[dict[str, Any]] = []
    for memory_id, text, source, confidence, created_at, uses in old:
        base = {
            "memory_id": memory_id,
            "anchor_text": text,
            "source": source,
            "confidence": confidence,
            "created_at": created_at,
        }
        owners = learners.get((memory_id, text)) if source == "learned" else None
        if not owners:
            owner = "shared" if source != "learned" else "*"
            rows.append({**base, "owner": owner, "uses": uses})
            continue
        for owner, count in owners.items():
            rows.append({**base, "owner": owner, "uses": min(uses, count)})
    if rows:
        op.bulk_insert(new_table, rows)
    op.drop_table("fact_anchors")
    op.rename_table("fact_anchors_owned", "fact_anchors")
    if bind.dialect.name == "postgresql":
        op.execute(
            "ALTER TABLE fact_anchors "
            "RENAME CONSTRAINT fact_anchors_owned_pkey TO fact_anchors_pkey"
        )
    op.create_index("ix_fact_anchors_owner", "fact_anchors", ["owner"])
    _triggers()


def downgrade() -> None:
    bind = op.get_bind()
    owned = sa.Table("fact_anchors", sa.MetaData(), *_columns(with_owner=True))
    rows = bind.execute(
        sa.select(
            owned.c.memory_id,
            owned.c.anchor_text,
            owned.c.source,
            owned.c.confidence,
            owned.c.created_at,
            owned.c.uses,
        ).order_by(owned.c.uses.desc())
    ).all()
    op.drop_index("ix_fact_anchors_owner", table_name="fact_anchors")
    op.drop_table("fact_anchors")
    table = op.create_table("fact_anchors", *_columns(with_owner=False))
    merged: dict[tuple[str, str], dict[str, Any]] = {}
    for memory_id, text, source, confidence, created_at, uses in rows:
        merged.setdefault(
            (memory_id, text),
            {
                "memory_id": memory_id,
                "anchor_text": text,
                "source": source,
                "confidence": confidence,
                "created_at": created_at,
                "uses": int(uses or 0),
            },
        )
    if merged:
        op.bulk_insert(table, list(merged.values()))
    _triggers()

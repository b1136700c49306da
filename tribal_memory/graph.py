"""Relations between memories: typed, weighted edges in SQL (table ``relations``)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC

from sqlalchemy import delete, func, or_, select

from tribal_memory.db import Database
from tribal_memory.errors import InvalidInput
from tribal_memory.models import Relation
from tribal_memory.tables import RelationRow, utcnow

MAX_TYPE_CHARS = 64


def _relation(row: RelationRow) -> Relation:
    created = row.created_at
    if created.tzinfo is None:  # SQLite hands back naive datetimes; they are stored as UTC
        created = created.replace(tzinfo=UTC)
    return Relation(row.source_id, row.target_id, row.type, row.weight, created)


class RelationGraph:
    """Edges between memory ids. Memory existence is checked by the service."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def relate(self, source_id: str, target_id: str, type: str, weight: float) -> Relation:
        """Insert the edge, or update its weight if it exists; returns the stored edge.

        Raises:
            InvalidInput: empty or over-long ``type``, negative weight.
        """
        type = type.strip()
        if not type or len(type) > MAX_TYPE_CHARS:
            raise InvalidInput(f"relation type must be 1 to {MAX_TYPE_CHARS} characters")
        if weight < 0:
            raise InvalidInput("relation weight must be >= 0")
        with self._db.session() as session:
            row = session.get(RelationRow, (source_id, target_id, type))
            if row is None:
                row = RelationRow(
                    source_id=source_id,
                    target_id=target_id,
                    type=type,
                    weight=weight,
                    created_at=utcnow(),
                )
                session.add(row)
            else:
                row.weight = weight
            session.flush()
            return _relation(row)

    def unrelate(self, source_id: str, target_id: str, type: str) -> bool:
        """Remove the edge; False when it did not exist."""
        with self._db.session() as session:
            row = session.get(RelationRow, (source_id, target_id, type))
            if row is None:
                return False
            session.delete(row)
            return True

    def edges_of(self, memory_ids: Sequence[str]) -> list[Relation]:
        """Edges with either end in ``memory_ids``, newest first."""
        if not memory_ids:
            return []
        ids = list(memory_ids)
        with self._db.session() as session:
            rows = session.scalars(
                select(RelationRow)
                .where(or_(RelationRow.source_id.in_(ids), RelationRow.target_id.in_(ids)))
                .order_by(RelationRow.created_at.desc())
            ).all()
            return [_relation(r) for r in rows]

    def count(self) -> int:
        """Number of edges."""
        with self._db.session() as session:
            return int(session.scalar(select(func.count()).select_from(RelationRow)) or 0)

    def forget(self, memory_id: str) -> int:
        """Delete every edge touching ``memory_id``; returns how many."""
        with self._db.session() as session:
            result = session.execute(
                delete(RelationRow).where(
                    or_(RelationRow.source_id == memory_id, RelationRow.target_id == memory_id)
                )
            )
            return int(result.rowcount or 0)  # type: ignore[attr-defined]

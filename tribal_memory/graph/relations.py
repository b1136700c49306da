"""Relations between memories: typed, weighted edges in SQL (table ``relations``)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC

from sqlalchemy import delete, func, or_, select

from tribal_memory.base.db import Database
from tribal_memory.base.errors import InvalidInput
from tribal_memory.base.graph import Relation, RelationInput
from tribal_memory.base.tables import RelationRow, utcnow
from tribal_memory.base.validation import has_control

MAX_TYPE_CHARS = 64


def _relation(row: RelationRow) -> Relation:
    created = row.created_at
    if created.tzinfo is None:  # SQLite hands back naive datetimes; they are stored as UTC
        created = created.replace(tzinfo=UTC)
    return Relation(row.source_id, row.target_id, row.type, row.weight, created)


def _item(index: int | None) -> str:
    return "" if index is None else f"relations[{index}]: "


def check_relation_type(type: str, index: int | None = None) -> str:
    """``type`` stripped.

    A type is selected by name in comma-separated lists (``types=``, ``block=``),
    so it may not hold a comma, nor a newline or other control character.

    Raises:
        InvalidInput: empty, over-long, or holding a comma or control character
            (naming the batch position ``index``, if given).
    """
    type = type.strip()
    if not type or len(type) > MAX_TYPE_CHARS:
        raise InvalidInput(f"{_item(index)}relation type must be 1 to {MAX_TYPE_CHARS} characters")
    if "," in type or has_control(type):
        raise InvalidInput(
            f"{_item(index)}relation type must not hold commas, newlines or control characters"
        )
    return type


class RelationGraph:
    """Edges between memory ids. Memory existence is checked by the service."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def relate(self, source_id: str, target_id: str, type: str, weight: float) -> Relation:
        """Insert the edge, or update its weight if it exists; returns the stored edge.

        Raises:
            InvalidInput: empty or over-long ``type``, negative weight.
        """
        type = check_relation_type(type)
        if weight < 0:
            raise InvalidInput("relation weight must be >= 0")
        return self.relate_many([RelationInput(source_id, target_id, type, weight)])[0]

    def relate_many(self, edges: Sequence[RelationInput]) -> list[Relation]:
        """:meth:`relate` for many edges in one transaction (all written or none).

        An edge given twice is written once, with its last weight.

        Returns:
            The stored edges, one per input, in input order.

        Raises:
            InvalidInput: an edge with an empty or over-long ``type`` or a
                negative weight (named by its position); nothing is written.
        """
        checked = [
            RelationInput(e.source_id, e.target_id, check_relation_type(e.type, i), e.weight)
            for i, e in enumerate(edges)
        ]
        for i, edge in enumerate(checked):
            if edge.weight < 0:
                raise InvalidInput(f"{_item(i)}relation weight must be >= 0")
        with self._db.session() as session:
            rows: dict[tuple[str, str, str], RelationRow] = {}
            for edge in checked:
                key = (edge.source_id, edge.target_id, edge.type)
                row = rows.get(key) or session.get(RelationRow, key)
                if row is None:
                    row = RelationRow(
                        source_id=edge.source_id,
                        target_id=edge.target_id,
                        type=edge.type,
                        weight=edge.weight,
                        created_at=utcnow(),
                    )
                    session.add(row)
                else:
                    row.weight = edge.weight
                rows[key] = row
            session.flush()
            return [_relation(rows[(e.source_id, e.target_id, e.type)]) for e in checked]

    def rekey(self, old_id: str, new_id: str) -> int:
        """Point every edge of ``old_id`` at ``new_id`` instead (a memory moved to a new id).

        An edge that already exists at ``new_id`` keeps its weight; the old one goes.

        Returns:
            The edges moved.
        """
        moved = 0
        with self._db.session() as session:
            rows = session.scalars(
                select(RelationRow).where(
                    or_(RelationRow.source_id == old_id, RelationRow.target_id == old_id)
                )
            ).all()
            for row in rows:
                source = new_id if row.source_id == old_id else row.source_id
                target = new_id if row.target_id == old_id else row.target_id
                if (
                    source != target
                    and session.get(RelationRow, (source, target, row.type)) is None
                ):
                    session.add(
                        RelationRow(
                            source_id=source,
                            target_id=target,
                            type=row.type,
                            weight=row.weight,
                            created_at=row.created_at,
                        )
                    )
                    moved += 1
                session.delete(row)
        return moved

    def replace_outgoing(
        self, source_ids: Sequence[str], types: Sequence[str], edges: Sequence[RelationInput]
    ) -> int:
        """Make the edges of ``types`` leaving ``source_ids`` exactly ``edges`` (upserted).

        Edges of other types, or leaving other memories, are not touched.

        Returns:
            Edges deleted.

        Raises:
            InvalidInput: as :meth:`relate_many`; nothing is written.
        """
        wanted = {(e.source_id, e.target_id, e.type) for e in edges}
        deleted = 0
        if source_ids and types:
            with self._db.session() as session:
                rows = session.scalars(
                    select(RelationRow).where(
                        RelationRow.source_id.in_(list(set(source_ids))),
                        RelationRow.type.in_(list(types)),
                    )
                ).all()
                for row in rows:
                    if (row.source_id, row.target_id, row.type) not in wanted:
                        session.delete(row)
                        deleted += 1
        if edges:
            self.relate_many(edges)
        return deleted

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

    def edges_among(self, memory_ids: Sequence[str]) -> list[tuple[str, str]]:
        """``(source, target)`` of every edge with both ends in ``memory_ids`` ([] for none)."""
        if not memory_ids:
            return []
        ids = list(set(memory_ids))
        with self._db.session() as session:
            rows = session.execute(
                select(RelationRow.source_id, RelationRow.target_id).where(
                    RelationRow.source_id.in_(ids), RelationRow.target_id.in_(ids)
                )
            ).all()
        return [(str(source), str(target)) for source, target in rows]

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

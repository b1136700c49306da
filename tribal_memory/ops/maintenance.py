"""Consistency between the two stores: LanceDB memories and the SQL rows that point at them.

Every row of ``relations``, ``query_cache``, ``query_fact_weights`` and
``fact_anchors`` names memories by id; each must name a memory that exists,
each memory id must appear once in LanceDB, and each must be the id capture
gives the memory's owner and content (stores written before edits re-keyed
hold edited memories under their first content's id: ``misfiled``). :func:`check_consistency`
reports what breaks that; :func:`prune_orphans` deletes the SQL rows that
point at missing memories (it never touches LanceDB). ``retrieval_events``
are a log of what was returned and may name memories deleted since: they are
not checked.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING

from sqlalchemy import delete, or_, select

from tribal_memory.base.db import Database
from tribal_memory.base.models import SearchFilters, memory_id_for
from tribal_memory.base.tables import FactAnchorRow, QueryCacheRow, QueryFactWeightRow, RelationRow
from tribal_memory.learned import forget_learned

if TYPE_CHECKING:
    from tribal_memory.core import Core


@dataclasses.dataclass(frozen=True)
class ConsistencyReport:
    """What :func:`check_consistency` found; all counts are rows.

    Attributes:
        memories: Distinct memory ids in LanceDB.
        duplicate_ids: Memory ids stored in more than one LanceDB row (sorted).
        orphans: ``{table: [missing memory id, ...]}`` for SQL rows pointing at
            memories that do not exist; tables without orphans are absent.
        misfiled: Memory ids that are not capture's id of the memory's owner
            and content (sorted); :meth:`.Core.refile` moves each to its own.
    """

    memories: int
    duplicate_ids: tuple[str, ...]
    orphans: dict[str, list[str]]
    misfiled: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """True when there is no duplicate id, no orphaned row and no misfiled memory."""
        return not self.duplicate_ids and not self.orphans and not self.misfiled

    def as_dict(self) -> dict[str, object]:
        """JSON-ready form: ``{"ok", "memories", "duplicate_ids", "orphans", "misfiled"}``."""
        return {
            "ok": self.ok,
            "memories": self.memories,
            "duplicate_ids": list(self.duplicate_ids),
            "orphans": self.orphans,
            "misfiled": list(self.misfiled),
        }


def _missing(ids: Iterable[str], existing: set[str]) -> list[str]:
    return sorted({i for i in ids if i not in existing})


def sql_orphans(db: Database, existing: set[str]) -> dict[str, list[str]]:
    """Memory ids named by SQL rows but absent from ``existing``, per table.

    Returns:
        ``{table name: sorted missing ids}``; only tables with orphans appear.

    Raises:
        StoreUnavailable: the database cannot be read.
    """
    with db.session() as session:
        edges = session.execute(select(RelationRow.source_id, RelationRow.target_id)).all()
        cached = session.scalars(select(QueryCacheRow.memory_ids)).all()
        weighted = session.scalars(select(QueryFactWeightRow.memory_id)).all()
        anchored = session.scalars(select(FactAnchorRow.memory_id)).all()
    found = {
        "relations": _missing((i for edge in edges for i in edge), existing),
        "query_cache": _missing((i for ids in cached for i in ids or ()), existing),
        "query_fact_weights": _missing(weighted, existing),
        "fact_anchors": _missing(anchored, existing),
    }
    return {table: ids for table, ids in found.items() if ids}


def check_consistency(core: Core) -> ConsistencyReport:
    """Check that memory ids are unique and no SQL row points at a missing memory.

    Reads a whole LanceDB id column and every referencing SQL row; run it on
    a quiet store (writes made during the check can show as transient orphans).

    Returns:
        A :class:`ConsistencyReport`; ``report.ok`` is True for a consistent store.

    Raises:
        StoreUnavailable: either store cannot be read.
    """
    counts = Counter(core.store.ids_of(SearchFilters()))  # an id stored twice: listed twice
    duplicates = tuple(sorted(i for i, n in counts.items() if n > 1))
    orphans = sql_orphans(core.db, set(counts))
    return ConsistencyReport(len(counts), duplicates, orphans, tuple(misfiled_ids(core)))


def misfiled_ids(core: Core, *, page_rows: int = 1_000) -> list[str]:
    """Ids of memories stored under another id than capture's of their owner and content.

    Reads every memory once, a page of ``page_rows`` at a time, in id order.

    Raises:
        StoreUnavailable: the store cannot be read.
    """
    found: list[str] = []
    after: str | None = None
    while page := core.store.page(SearchFilters(), page_rows, after=after):
        found += [m.memory_id for m in page if m.memory_id != memory_id_for(m.owner, m.content)]
        after = page[-1].memory_id
    return found


def prune_orphans(db: Database, existing: set[str]) -> int:
    """Delete SQL rows that point at memory ids not in ``existing``.

    Relations touching a missing memory go, and so do cache entries, query
    weights and anchors naming one (as if the memory had just been deleted).

    Returns:
        Rows deleted.

    Raises:
        StoreUnavailable: the database cannot be written.
    """
    orphans = sql_orphans(db, existing)
    missing = sorted({i for ids in orphans.values() for i in ids})
    if not missing:
        return 0
    removed = forget_learned(db, missing)
    with db.session() as session:
        result = session.execute(
            delete(RelationRow).where(
                or_(RelationRow.source_id.in_(missing), RelationRow.target_id.in_(missing))
            )
        )
        removed += int(result.rowcount or 0)  # type: ignore[attr-defined]
    return removed

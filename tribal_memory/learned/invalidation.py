"""Dropping learned data that points at memories which changed or went away."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import String, cast, delete, or_, select

from tribal_memory.base.db import Database
from tribal_memory.base.tables import (
    FactAnchorRow,
    QueryAdapterRow,
    QueryCacheRow,
    QueryExpansionRow,
    QueryFactWeightRow,
    RetrievalEventRow,
)

_LIKE_SLICE = 200


def forget_learned(db: Database, memory_ids: Sequence[str]) -> int:
    """Delete cache entries, query weights and anchors that point at ``memory_ids``.

    A cache entry is dropped whole when any of its memories is listed (its
    answer is no longer the one that earned its success count).

    Returns:
        Rows deleted across the three tables.
    """
    if not memory_ids:
        return 0
    ids = list(memory_ids)
    removed = forget_cached(db, ids)
    with db.session() as session:
        for table in (QueryFactWeightRow, FactAnchorRow):
            result = session.execute(delete(table).where(table.memory_id.in_(ids)))
            removed += int(result.rowcount or 0)  # type: ignore[attr-defined]
    return removed


def forget_cached(db: Database, memory_ids: Sequence[str]) -> int:
    """Delete the query-cache entries whose answer holds any of ``memory_ids``.

    For memories whose fields changed but whose content did not (a document
    chunk that moved): the cache keeps snapshots of the memories it returns,
    while weights and anchors stay valid for unchanged content.

    Returns:
        Cache entries deleted.
    """
    if not memory_ids:
        return 0
    ids = list(dict.fromkeys(memory_ids))
    removed = 0
    with db.session() as session:
        # memory_ids is a JSON list of UUIDs: a LIKE pre-filter (the id escaped, so a
        # "%" or "_" in it matches only itself), confirmed in Python, in slices
        # (SQLite limits the depth of an OR chain).
        for offset in range(0, len(ids), _LIKE_SLICE):
            part = ids[offset : offset + _LIKE_SLICE]
            ids_text = cast(QueryCacheRow.memory_ids, String)
            matches = (ids_text.contains(i, autoescape=True) for i in part)
            candidates = session.scalars(select(QueryCacheRow).where(or_(*matches))).all()
            for entry in candidates:
                if set(entry.memory_ids) & set(part):
                    session.delete(entry)
                    removed += 1
    return removed


def forget_owner(db: Database, owner: str) -> int:
    """Delete everything the learned layer keeps for ``owner``: what its questions taught.

    Its retrieval events (the questions it asked and what they returned),
    query-cache entries, feedback weights, learned expansions, query adapter and the
    anchors its searches use, including those on memories of other owners
    (``shared`` ones). What the memories themselves carry goes with them
    (:func:`forget_learned`).

    Returns:
        Rows deleted across the six tables (0 for an owner with none).
    """
    removed = 0
    with db.session() as session:
        for table in (
            QueryCacheRow,
            RetrievalEventRow,
            QueryFactWeightRow,
            FactAnchorRow,
            QueryExpansionRow,
            QueryAdapterRow,
        ):
            result = session.execute(delete(table).where(table.owner == owner))
            removed += int(result.rowcount or 0)  # type: ignore[attr-defined]
    return removed

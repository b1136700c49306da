"""FactAnchors: past questions attached to the memories that answered them (DESIGN §4.4).

A query whose feedback used a memory ``min_uses`` times becomes an *anchor* of
that memory; anchors may also be added by hand. Active anchors are written to
the memory's ``anchor_text`` (so a stored memory shows what it is known to
answer) and searched as their own path: the match of a query with an anchor is
the IDF-weighted share of the query's Snowball stems that the anchor contains,

    match = sum(idf(t) for t in Q & A) / sum(idf(t) for t in Q),
    idf(t) = log((N + 1) / df(t))    (N anchors, df(t) anchors with t; unseen t: df = 1)

in [0, 1] — the IDF weighting of BM25 (Robertson & Zaragoza, "The
Probabilistic Relevance Framework: BM25 and Beyond", 2009) without its length
and frequency terms, which mean little for one-line questions. A memory's
match is its best anchor's; matches under ``min_match`` are dropped, so a
shared name alone ("Caroline") does not pull every anchored memory up. The
caller caps what a match adds to a hit (setting ``anchor_weight``).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC
from typing import Literal

from sqlalchemy import delete, select

from tribal_memory.db import Database, read_generation
from tribal_memory.errors import InvalidInput
from tribal_memory.learned.text import content_terms, stem
from tribal_memory.models import Anchor
from tribal_memory.store.base import MemoryStore
from tribal_memory.tables import FactAnchorRow

AnchorSource = Literal["manual", "learned", "llm"]
MAX_ANCHOR_CHARS = 1024


GENERATION = "fact_anchors"
"""The change counter of all anchors (:func:`tribal_memory.db.read_generation`)."""


@dataclass(frozen=True, slots=True)
class AnchorMatch:
    """A memory whose anchors match a query; ``score`` in (0, 1], 1 = best match."""

    memory_id: str
    score: float


@dataclass(slots=True)
class _Corpus:
    generation: int
    memory_ids: list[str]  # one per active anchor
    stems: list[frozenset[str]]
    df: dict[str, int]


def _stems(text: str) -> list[str]:
    return [stem(t) for t in content_terms(text, keep_question_words=False)]


class AnchorIndex:
    """The ``fact_anchors`` table, mirrored into ``anchor_text`` and a BM25 corpus.

    Args:
        db: The SQL database.
        store: The memory store whose ``anchor_text`` column is kept in step.
        min_uses: Successful uses before a learned anchor is active (>= 1).
        max_per_memory: Most learned anchors kept per memory (most used win).
        min_match: Least match (in [0, 1]) that counts in :meth:`search`.
    """

    def __init__(
        self,
        db: Database,
        store: MemoryStore,
        *,
        min_uses: int,
        max_per_memory: int,
        min_match: float = 0.5,
    ) -> None:
        self._db = db
        self._store = store
        self.min_uses = min_uses
        self.max_per_memory = max_per_memory
        self.min_match = min_match
        self._corpus: _Corpus | None = None
        self._lock = threading.Lock()

    def _active(self, row: FactAnchorRow) -> bool:
        return row.source != "learned" or row.uses >= self.min_uses

    def _anchor(self, row: FactAnchorRow) -> Anchor:
        confidence = (
            row.confidence if row.source != "learned" else min(1.0, row.uses / self.min_uses)
        )
        created = row.created_at if row.created_at.tzinfo else row.created_at.replace(tzinfo=UTC)
        return Anchor(
            row.memory_id,
            row.anchor_text,
            row.source,  # type: ignore[arg-type]  # checked on write
            confidence,
            row.uses,
            self._active(row),
            created,
        )

    def anchors_of(self, memory_id: str) -> list[Anchor]:
        """Anchors of one memory, active and pending, most used first ([] when none)."""
        with self._db.session() as session:
            rows = session.scalars(
                select(FactAnchorRow)
                .where(FactAnchorRow.memory_id == memory_id)
                .order_by(FactAnchorRow.uses.desc(), FactAnchorRow.anchor_text)
            ).all()
            return [self._anchor(r) for r in rows]

    def reinforce(self, memory_id: str, query: str) -> bool:
        """Count one successful use of ``memory_id`` for ``query``.

        Returns:
            True when this use made the anchor active.
        """
        text = " ".join(query.split())[:MAX_ANCHOR_CHARS]
        if not _stems(text):
            return False
        with self._db.session() as session:
            row = session.get(FactAnchorRow, (memory_id, text))
            if row is None:
                row = FactAnchorRow(
                    memory_id=memory_id, anchor_text=text, source="learned", confidence=0.0, uses=0
                )
                session.add(row)
            was_active = self._active(row) if row.uses or row.source != "learned" else False
            row.uses += 1
            if row.source == "learned":
                row.confidence = min(1.0, row.uses / self.min_uses)
            became_active = self._active(row) and not was_active
        if became_active:
            self._prune(memory_id)
            self._sync(memory_id)
        return became_active

    def add(self, memory_id: str, text: str, source: AnchorSource = "manual") -> Anchor:
        """Attach an anchor by hand (active at once, confidence 1.0); idempotent.

        Raises:
            InvalidInput: empty text, text without words, or over 1024 characters.
        """
        text = " ".join(text.split())
        if not text or not _stems(text):
            raise InvalidInput("anchor text must contain at least one content word")
        if len(text) > MAX_ANCHOR_CHARS:
            raise InvalidInput(f"anchor text is over {MAX_ANCHOR_CHARS} characters")
        with self._db.session() as session:
            row = session.get(FactAnchorRow, (memory_id, text))
            if row is None:
                row = FactAnchorRow(memory_id=memory_id, anchor_text=text, uses=0)
                session.add(row)
            row.source = source
            row.confidence = 1.0
            session.flush()
            anchor = self._anchor(row)
        self._sync(memory_id)
        return anchor

    def remove(self, memory_id: str, text: str) -> bool:
        """Detach an anchor; False when the memory had no such anchor."""
        text = " ".join(text.split())
        with self._db.session() as session:
            result = session.execute(
                delete(FactAnchorRow).where(
                    FactAnchorRow.memory_id == memory_id, FactAnchorRow.anchor_text == text
                )
            )
            removed = bool(result.rowcount)  # type: ignore[attr-defined]
        if removed:
            self._sync(memory_id)
        return removed

    def _prune(self, memory_id: str) -> None:
        with self._db.session() as session:
            learned = session.scalars(
                select(FactAnchorRow)
                .where(FactAnchorRow.memory_id == memory_id, FactAnchorRow.source == "learned")
                .order_by(FactAnchorRow.uses.desc(), FactAnchorRow.created_at.desc())
            ).all()
            for row in learned[self.max_per_memory :]:
                session.delete(row)

    def refresh(self, memory_ids: Iterable[str]) -> None:
        """Rewrite the ``anchor_text`` of these memories from their active anchors.

        For rows written to ``fact_anchors`` in bulk (import); unknown ids are ignored.
        """
        for memory_id in memory_ids:
            self._sync(memory_id)

    def _sync(self, memory_id: str) -> None:
        text = "\n".join(a.text for a in self.anchors_of(memory_id) if a.active)
        self._store.set_anchor_text(memory_id, text)

    def active_count(self) -> int:
        """Number of active anchors over all memories."""
        return len(self._load().memory_ids)

    def _load(self, generation: int | None = None) -> _Corpus:
        with self._lock:
            corpus = self._corpus
        if corpus is not None and generation is not None and corpus.generation == generation:
            return corpus
        with self._db.session() as session:
            if generation is None:
                # Any add, use, promotion or removal, by any process (a database trigger).
                generation = read_generation(session, GENERATION)
                if corpus is not None and corpus.generation == generation:
                    return corpus
            rows = session.scalars(select(FactAnchorRow)).all()
            active = [
                (r.memory_id, frozenset(_stems(r.anchor_text))) for r in rows if self._active(r)
            ]
        df: dict[str, int] = {}
        for _, stems in active:
            for term in stems:
                df[term] = df.get(term, 0) + 1
        corpus = _Corpus(generation, [m for m, _ in active], [s for _, s in active], df)
        with self._lock:
            self._corpus = corpus
        return corpus

    def search(self, query: str, limit: int, *, generation: int | None = None) -> list[AnchorMatch]:
        """Memories whose best active anchor matches ``query`` at least ``min_match``.

        The caller filters the ids by visibility. ``generation``: the anchors'
        change counter (:data:`GENERATION`) when the caller has just read it;
        None reads it here. Returns up to ``limit`` matches, best first; []
        when nothing matches.
        """
        corpus = self._load(generation)
        terms = set(_stems(query))
        if not corpus.memory_ids or not terms:
            return []
        n = len(corpus.memory_ids)
        idf = {t: math.log((n + 1) / corpus.df.get(t, 1)) for t in terms}
        total = sum(idf.values())
        if total <= 0:
            return []
        best: dict[str, float] = {}
        for memory_id, stems in zip(corpus.memory_ids, corpus.stems, strict=True):
            shared = terms & stems
            if not shared:
                continue
            match = sum(idf[t] for t in shared) / total
            if match >= self.min_match and match > best.get(memory_id, 0.0):
                best[memory_id] = match
        ranked = sorted(best.items(), key=lambda p: (-p[1], p[0]))
        return [AnchorMatch(memory_id, score) for memory_id, score in ranked[:limit]]

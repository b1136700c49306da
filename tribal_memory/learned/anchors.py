"""FactAnchors: past questions attached to the memories that answered them (DESIGN §4.4).

A query whose feedback used a memory ``min_uses`` times becomes an *anchor* of
that memory; anchors may also be added by hand. Every anchor belongs to an
owner: a learned one to the owner whose feedback made it, a manual one to
its memory's owner. A search in scope ``S`` uses the anchors of ``S`` and of
``shared`` (all of them for the all-owners scope ``*``), chosen before
ranking, so no other owner's anchors can take its places or read its
questions. Anchors live only in SQL (the ``fact_anchors`` table, mirrored in
memory); changing one never rewrites a memory row. Active anchors are searched
as their own path: the match of a query with an anchor is the IDF-weighted
share of the query's Snowball stems that the anchor contains, computed over
the anchors the scope uses,

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
from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from datetime import UTC
from typing import Literal

from sqlalchemy import Row, bindparam, delete, or_, select

from tribal_memory.base.db import Database
from tribal_memory.base.errors import InvalidInput
from tribal_memory.base.models import SHARED_OWNER
from tribal_memory.base.results import Anchor
from tribal_memory.base.sql import read_generation
from tribal_memory.base.tables import FactAnchorRow
from tribal_memory.learned.text import content_terms, stem

AnchorSource = Literal["manual", "learned", "llm"]
MAX_ANCHOR_CHARS = 1024


MAX_PATCHED = 500
"""Most changed memories a reload patches in; past that it reads every active anchor."""

GENERATION = "fact_anchors"
"""The change counter of all anchors (:func:`tribal_memory.base.sql.read_generation`)."""


@dataclass(frozen=True, slots=True)
class AnchorMatch:
    """A memory whose anchors match a query; ``score`` in (0, 1], 1 = best match."""

    memory_id: str
    score: float


@dataclass(slots=True)
class _OwnerAnchors:
    """One owner's active anchors, changed in place as anchors come and go.

    ``postings``: stem -> positions of the live anchors holding it (a stem's
    document frequency is the size of its set); a removed anchor leaves a
    hole (``memory_ids[p] is None``) until the group is compacted.
    """

    memory_ids: list[str | None] = field(default_factory=list)
    stems: list[frozenset[str]] = field(default_factory=list)
    postings: dict[str, set[int]] = field(default_factory=dict)
    positions: dict[str, list[int]] = field(default_factory=dict)  # memory id -> its anchors
    live: int = 0

    def add(self, memory_id: str, stems: frozenset[str]) -> None:
        position = len(self.memory_ids)
        self.memory_ids.append(memory_id)
        self.stems.append(stems)
        self.positions.setdefault(memory_id, []).append(position)
        for term in stems:
            self.postings.setdefault(term, set()).add(position)
        self.live += 1

    def remove(self, memory_id: str) -> None:
        """Drop every anchor of ``memory_id``."""
        for position in self.positions.pop(memory_id, ()):
            for term in self.stems[position]:
                holders = self.postings[term]
                holders.discard(position)
                if not holders:
                    del self.postings[term]
            self.memory_ids[position] = None
            self.stems[position] = frozenset()
            self.live -= 1

    def compacted(self) -> _OwnerAnchors:
        """The same anchors without holes (positions renumbered)."""
        group = _OwnerAnchors()
        for memory_id, stems in zip(self.memory_ids, self.stems, strict=True):
            if memory_id is not None:
                group.add(memory_id, stems)
        return group


@dataclass(slots=True)
class _Corpus:
    generation: int
    by_owner: dict[str, _OwnerAnchors]


def _stems(text: str) -> list[str]:
    return [stem(t) for t in content_terms(text, keep_question_words=False)]


ALL_OWNERS = "*"
"""Scope of searches over every owner: they use every owner's anchors."""

TEAM = "*team*"
"""Scope of what feedback teaches about ``shared`` memories, pooled across owners: the
query weights and past-query vectors that every owner's search reads besides its own
(DESIGN §4, "tribal"). Only ``shared`` memories are ever learned under it."""


def owners_for(scope: str) -> frozenset[str] | None:
    """The owners whose anchors a search in ``scope`` uses; None: all."""
    return None if scope == ALL_OWNERS else frozenset({scope, SHARED_OWNER})


class AnchorIndex:
    """The ``fact_anchors`` table and, per owner, an in-memory corpus of its active anchors.

    Args:
        db: The SQL database.
        min_uses: Successful uses before a learned anchor is active (>= 1).
        max_per_memory: Most learned anchors kept per memory and owner (most used win).
        min_match: Least match (in [0, 1]) that counts in :meth:`search`.
    """

    def __init__(
        self,
        db: Database,
        *,
        min_uses: int,
        max_per_memory: int,
        min_match: float = 0.5,
    ) -> None:
        self._db = db
        self.min_uses = min_uses
        self.max_per_memory = max_per_memory
        self.min_match = min_match
        self._corpus: _Corpus | None = None
        self._lock = threading.Lock()
        """Guards ``_corpus`` and its contents (patched in place)."""
        self._reload_lock = threading.Lock()
        self._stems_of: dict[str, frozenset[str]] = {}
        """Anchor text -> its stems: of the active anchors as of the last full reload, plus
        those patched in since (reloads stem only new texts)."""
        self._active_rows = select(
            FactAnchorRow.owner, FactAnchorRow.memory_id, FactAnchorRow.anchor_text
        ).where(or_(FactAnchorRow.source != "learned", FactAnchorRow.uses >= min_uses))
        """The (owner, memory id, text) of every active anchor (the rule of ``_active``)."""
        self._active_rows_of = self._active_rows.where(
            FactAnchorRow.memory_id.in_(bindparam("ids", expanding=True))
        )

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
            row.owner,
        )

    def anchors_of(self, memory_id: str, owners: Collection[str] | None = None) -> list[Anchor]:
        """Anchors of one memory belonging to ``owners`` (None: all), most used first.

        Returns:
            Active and pending anchors; [] when none.
        """
        query = select(FactAnchorRow).where(FactAnchorRow.memory_id == memory_id)
        if owners is not None:
            query = query.where(FactAnchorRow.owner.in_(list(owners)))
        with self._db.session() as session:
            rows = session.scalars(
                query.order_by(
                    FactAnchorRow.uses.desc(), FactAnchorRow.anchor_text, FactAnchorRow.owner
                )
            ).all()
            return [self._anchor(r) for r in rows]

    def reinforce(self, memory_id: str, query: str, owner: str) -> bool:
        """Count one successful use of ``memory_id`` for ``query`` by ``owner``'s searches.

        Returns:
            True when this use made the anchor active.
        """
        text = " ".join(query.split())[:MAX_ANCHOR_CHARS]
        if not _stems(text):
            return False
        with self._db.session() as session:
            row = session.get(FactAnchorRow, (memory_id, owner, text))
            if row is None:
                row = FactAnchorRow(
                    memory_id=memory_id,
                    owner=owner,
                    anchor_text=text,
                    source="learned",
                    confidence=0.0,
                    uses=0,
                )
                session.add(row)
            was_active = self._active(row) if row.uses or row.source != "learned" else False
            row.uses += 1
            if row.source == "learned":
                row.confidence = min(1.0, row.uses / self.min_uses)
            became_active = self._active(row) and not was_active
        if became_active:
            self._prune(memory_id, owner)
        return became_active

    def add(self, memory_id: str, text: str, owner: str, source: AnchorSource = "manual") -> Anchor:
        """Attach an anchor by hand (active at once, confidence 1.0) for ``owner``; idempotent.

        Raises:
            InvalidInput: empty text, text without words, or over 1024 characters.
        """
        text = " ".join(text.split())
        if not text or not _stems(text):
            raise InvalidInput("anchor text must contain at least one content word")
        if len(text) > MAX_ANCHOR_CHARS:
            raise InvalidInput(f"anchor text is over {MAX_ANCHOR_CHARS} characters")
        with self._db.session() as session:
            row = session.get(FactAnchorRow, (memory_id, owner, text))
            if row is None:
                row = FactAnchorRow(memory_id=memory_id, owner=owner, anchor_text=text, uses=0)
                session.add(row)
            row.source = source
            row.confidence = 1.0
            session.flush()
            return self._anchor(row)

    def remove(self, memory_id: str, text: str, owners: Collection[str] | None = None) -> bool:
        """Detach the anchors with this text belonging to ``owners`` (None: any owner).

        Returns:
            False when the memory had no such anchor.
        """
        text = " ".join(text.split())
        statement = delete(FactAnchorRow).where(
            FactAnchorRow.memory_id == memory_id, FactAnchorRow.anchor_text == text
        )
        if owners is not None:
            statement = statement.where(FactAnchorRow.owner.in_(list(owners)))
        with self._db.session() as session:
            result = session.execute(statement)
            return bool(result.rowcount)  # type: ignore[attr-defined]

    def _prune(self, memory_id: str, owner: str) -> None:
        with self._db.session() as session:
            learned = session.scalars(
                select(FactAnchorRow)
                .where(
                    FactAnchorRow.memory_id == memory_id,
                    FactAnchorRow.owner == owner,
                    FactAnchorRow.source == "learned",
                )
                .order_by(FactAnchorRow.uses.desc(), FactAnchorRow.created_at.desc())
            ).all()
            for row in learned[self.max_per_memory :]:
                session.delete(row)

    def active_count(self, owners: Collection[str] | None = None) -> int:
        """Number of active anchors belonging to ``owners`` (None: all owners)."""
        corpus = self._load()
        with self._lock:
            return sum(
                anchors.live
                for owner, anchors in corpus.by_owner.items()
                if owners is None or owner in owners
            )

    def _load(self, generation: int | None = None) -> _Corpus:
        """The corpus at ``generation`` (None: read the counter), reloaded only if it moved.

        After a change only the anchors of the memories it touched are read
        again (the change log of migration 0009) and patched in, under
        ``self._lock``; else, or when the log cannot say, all active anchors.
        """
        with self._lock:
            corpus = self._corpus
        if corpus is not None and generation is not None and corpus.generation == generation:
            return corpus
        with self._reload_lock:  # one reload at a time; the others then find it done
            with self._lock:
                corpus = self._corpus
            if corpus is not None and generation is not None and corpus.generation == generation:
                return corpus
            with self._db.reading() as session:  # a plain connection: on a search's path
                if generation is None:
                    # Any add, use, promotion or removal, by any process (a database trigger).
                    generation = read_generation(session, GENERATION)
                    if corpus is not None and corpus.generation == generation:
                        return corpus
                changed = (
                    self._db.changes(session, GENERATION, corpus.generation, generation)
                    if corpus is not None
                    else None
                )
                if changed is not None and len(changed) > MAX_PATCHED:
                    changed = None
                # Plain columns of the active anchors only (the rule of _active, in SQL):
                # this runs after every feedback that touches an anchor.
                if changed is None:
                    rows = session.execute(self._active_rows).all()
                elif changed:
                    found = session.execute(self._active_rows_of, {"ids": list(changed)})
                    rows = found.all()
                else:
                    rows = []
            if corpus is None or changed is None:
                return self._rebuilt(generation, rows)
            self._patch(corpus, generation, changed, rows)
            return corpus

    def _rebuilt(self, generation: int, rows: Sequence[Row[str, str, str]]) -> _Corpus:
        known = self._stems_of
        stems_of: dict[str, frozenset[str]] = {}
        by_owner: dict[str, _OwnerAnchors] = {}
        for owner, memory_id, text in rows:
            stems = stems_of.get(text) or known.get(text) or frozenset(_stems(text))
            stems_of[text] = stems
            by_owner.setdefault(owner, _OwnerAnchors()).add(memory_id, stems)
        self._stems_of = stems_of  # texts of removed anchors drop out
        corpus = _Corpus(generation, by_owner)
        with self._lock:
            self._corpus = corpus
        return corpus

    def _patch(
        self,
        corpus: _Corpus,
        generation: int,
        changed: set[str],
        rows: Sequence[Row[str, str, str]],
    ) -> None:
        """Replace the anchors of the ``changed`` memory ids in ``corpus`` by ``rows`` (theirs now).

        The same anchors, stems and postings as a full reload would give
        (only the positions differ, which no score depends on).
        """
        stems_of = self._stems_of
        fresh = []
        for owner, memory_id, text in rows:
            stems = stems_of.get(text)
            if stems is None:
                stems = stems_of[text] = frozenset(_stems(text))
            fresh.append((owner, memory_id, stems))
        with self._lock:
            for group in corpus.by_owner.values():
                for memory_id in changed:
                    group.remove(memory_id)
            for owner, memory_id, stems in fresh:
                corpus.by_owner.setdefault(owner, _OwnerAnchors()).add(memory_id, stems)
            for owner, group in corpus.by_owner.items():
                if len(group.memory_ids) > 2 * group.live + 64:
                    corpus.by_owner[owner] = group.compacted()
            corpus.generation = generation

    def search(
        self,
        query: str,
        limit: int,
        *,
        owners: Collection[str] | None,
        generation: int | None = None,
    ) -> list[AnchorMatch]:
        """Memories whose best active anchor of ``owners`` matches ``query`` at least ``min_match``.

        Only the anchors of ``owners`` (None: every owner's) are read, counted
        for IDF and ranked, so another owner's anchors neither take places in
        the ``limit`` nor change scores. ``generation``: the anchors' change
        counter (:data:`GENERATION`) when the caller has just read it; None
        reads it here. The caller still filters the ids by the search's
        prefilter (kind, tags, ...).

        Returns:
            Up to ``limit`` matches, best first; [] when nothing matches.
        """
        corpus = self._load(generation)
        terms = set(_stems(query))
        with self._lock:  # a reload may patch the corpus in place
            return self._matches(corpus, terms, limit, owners)

    def _matches(
        self,
        corpus: _Corpus,
        terms: set[str],
        limit: int,
        owners: Collection[str] | None,
    ) -> list[AnchorMatch]:
        groups = [
            anchors
            for owner, anchors in corpus.by_owner.items()
            if owners is None or owner in owners
        ]
        n = sum(anchors.live for anchors in groups)
        if not n or not terms:
            return []
        df: Counter[str] = Counter()
        for anchors in groups:
            df.update({t: len(anchors.postings[t]) for t in terms if t in anchors.postings})
        idf = {t: math.log((n + 1) / max(df.get(t, 0), 1)) for t in terms}
        total = sum(idf.values())
        if total <= 0:
            return []
        best: dict[str, float] = {}
        for anchors in groups:
            # Only anchors that hold a query term can match: visit those (postings).
            positions = {p for t in terms for p in anchors.postings.get(t, ())}
            for position in positions:
                memory_id = anchors.memory_ids[position]
                assert memory_id is not None  # postings hold live anchors only
                shared = terms & anchors.stems[position]
                match = sum(idf[t] for t in shared) / total
                if match >= self.min_match and match > best.get(memory_id, 0.0):
                    best[memory_id] = match
        ranked = sorted(best.items(), key=lambda p: (-p[1], p[0]))
        return [AnchorMatch(memory_id, score) for memory_id, score in ranked[:limit]]

"""The retrieval pipeline with the learned parts on top of plain search (DESIGN §3-4).

:meth:`Retriever.search` runs, in order:

1. **cache** — an eligible entry for the exact query key answers at once (no
   embedding, no store query); else, once the query is embedded, an eligible
   entry whose query is at least ``semantic_cache_threshold`` similar.
2. **plain search** — vector and BM25 candidates (``candidate_pool`` each)
   fused as in :mod:`tribal_memory.retrieval`.
3. **expansion** — each keyword variant is searched on the BM25 path; a
   variant's normalised match ``m`` counts as ``expansion_weight * m`` BM25
   evidence where it beats the query's own (``expanded_from`` on the hit).
4. **anchors** — ``anchor_weight * match`` is added for anchored memories.
5. **feedback** — boosts/penalties from similar past queries are added, and
   the pool's usage priors: a memory used before (any query) gains, one shown
   and skipped before loses, both scaled by its own fused score.

Memories that 3-5 bring in from outside the pool are scored against the query
vector over the same prefilter, those whose gain could lift them into the top
``k`` only (:meth:`Retriever._outside`). The vector search, the count and the
BM25 searches run on the store's event loop while this thread reads the
learned tables (their rows are kept per generation: :mod:`.memo`). Final
scores are clipped to [0, 1]. Parts 1, 3 and 5 stay off until the scope
(owner) has past queries with feedback, and 4 until some anchor exists, so
with no learned data a search is exactly plain search.
"""

from __future__ import annotations

import functools
import heapq
import threading
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, replace
from typing import Any, Literal

from sqlalchemy import delete

from tribal_memory.config import Settings
from tribal_memory.db import Database, read_generations, upsert
from tribal_memory.embeddings.base import Embedder, Vector
from tribal_memory.errors import Conflict, InvalidInput, NotFound
from tribal_memory.learned.anchors import (
    ALL_OWNERS,
    TEAM,
    AnchorIndex,
    AnchorMatch,
    owners_for,
)
from tribal_memory.learned.anchors import GENERATION as ANCHORS_GENERATION
from tribal_memory.learned.expander import (
    ExpansionUnavailable,
    LearnedExpansions,
    LlmVariants,
    rule_variants,
)
from tribal_memory.learned.feedback import FeedbackTracker, UsagePrior
from tribal_memory.learned.query_cache import CacheEntry, PastQuery, QueryCache
from tribal_memory.learned.text import content_terms, query_key, rewording_of, stem
from tribal_memory.models import (
    SHARED_OWNER,
    FeedbackResult,
    Hit,
    LearnedParts,
    SearchFilters,
    SearchResult,
    Variant,
)
from tribal_memory.retrieval import (
    Candidate,
    fused_candidates,
    smooth_neighbours,
    text_scale,
    top_hits,
    vector_scale,
)
from tribal_memory.store.base import MemoryStore, ScoredMemory
from tribal_memory.tables import OwnerVariantRow, utcnow

SearchMode = Literal["hybrid", "vector", "text"]


@dataclass(slots=True)
class _Learned:
    expansion: float = 0.0
    expanded_from: str | None = None
    anchor: float | None = None
    boost: float = 0.0
    prior: UsagePrior | None = None


def scope_of(filters: SearchFilters) -> str:
    """The owner whose learned data a search with ``filters`` uses and feeds."""
    return filters.owner if filters.owner is not None else ALL_OWNERS


def _plain_filters(filters: SearchFilters) -> bool:
    return filters == SearchFilters(owner=filters.owner, include_shared=filters.include_shared)


class Retriever:
    """Plain and learned retrieval over one store.

    Args:
        settings: Fusion and learned-layer settings.
        db: The SQL database (learned tables).
        store: The memory store.
        embedder: The embedding model (queries are embedded with ``query=True``).
    """

    def __init__(
        self, settings: Settings, db: Database, store: MemoryStore, embedder: Embedder
    ) -> None:
        self.settings = settings
        self._db = db
        self._store = store
        self._embedder = embedder
        self.cache = QueryCache(
            db,
            min_successes=settings.cache_min_successes,
            min_success_rate=settings.cache_min_success_rate,
        )
        self.feedback = FeedbackTracker(
            db,
            learning_rate=settings.feedback_learning_rate,
            penalty_rate=settings.feedback_penalty_rate,
            half_life_days=settings.feedback_half_life_days,
            min_similarity=settings.feedback_similarity,
            max_boost=settings.max_boost,
            max_penalty=settings.max_penalty,
        )
        self.anchors = AnchorIndex(
            db,
            min_uses=settings.anchor_min_uses,
            max_per_memory=settings.max_anchors_per_memory,
            min_match=settings.anchor_min_match,
        )
        self.expansions = LearnedExpansions(db)
        self.llm = (
            LlmVariants(
                settings.llm_url,
                settings.llm_model,
                api_key=settings.llm_api_key,
                timeout_s=settings.llm_timeout_s,
            )
            if settings.llm_url and settings.llm_model
            else None
        )
        self.counters: Counter[str] = Counter()
        self._counter_lock = threading.Lock()
        self._pins: dict[str, tuple[Variant, float]] = {}
        """owner -> (variant, time.monotonic() when read): :meth:`variant_for`'s memory."""

    def close(self) -> None:
        """Close the LLM client, if any."""
        if self.llm is not None:
            self.llm.close()

    def count(self, name: str) -> None:
        """Add one to an in-process counter (reported by retrieval stats)."""
        with self._counter_lock:
            self.counters[name] += 1

    # -- feedback ---------------------------------------------------------------------

    def record_usage(
        self, retrieval_id: str, used_ids: Sequence[str], *, owner: str | None = None
    ) -> FeedbackResult:
        """Apply usage feedback to a logged retrieval (see ``MemoryService.record_usage_feedback``).

        A used id may be a result of this retrieval or, when it was logged with
        a ``session_id``, of any retrieval of the same owner and session (the
        agent searched again and used what it found there): the query is then
        linked to what was finally used.

        Raises:
            NotFound: unknown ``retrieval_id`` (or one of another owner).
            InvalidInput: a used id no retrieval of the session returned.
            Conflict: the retrieval already has different feedback.
        """
        event = self.feedback.event(retrieval_id)
        if event is None or (owner is not None and event.owner != owner):
            raise NotFound(f"no retrieval with id {retrieval_id}")
        used = list(dict.fromkeys(used_ids))
        results = event.result_ids
        scores = {str(r["id"]): float(r["score"]) for r in event.results}
        if event.session_id is not None and any(i not in scores for i in used):
            found = self.feedback.session_results(event.owner, event.session_id)
            scores = {**found, **scores}
        strangers = [i for i in used if i not in scores]
        if strangers:
            where = (
                f"any retrieval of session {event.session_id!r}"
                if event.session_id is not None
                else f"retrieval {retrieval_id}"
            )
            raise InvalidInput(f"memories {strangers} were not among the results of {where}")
        unused = tuple(i for i in results if i not in set(used))
        outcome = FeedbackResult(retrieval_id, tuple(used), unused)
        now = utcnow()
        if not self.feedback.mark_used(retrieval_id, used, now):
            recorded = self.feedback.event(retrieval_id)
            if recorded is not None and set(recorded.used_ids or ()) == set(used):
                return replace(outcome, duplicate=True)
            raise Conflict(
                f"retrieval {retrieval_id} already has feedback with other memories; "
                "feedback is recorded once per retrieval"
            )
        key = query_key(event.query)
        penalised = [i for i in results[: self.settings.feedback_penalty_depth] if i in unused]
        # Memories deleted since the retrieval are neither reinforced nor penalised:
        # a weight row for them would point at nothing.
        memories = self._store.get([*used, *penalised])
        used_memories = [(memories[i], scores[i]) for i in used if i in memories]
        embed = functools.cache(lambda: self._embedder.embed(event.query, query=True))
        self.cache.record(event.owner, key, event.query, embed, used_memories, now=now)
        self.feedback.reinforce(
            event.owner,
            key,
            [i for i in used if i in memories],
            [i for i in penalised if i in memories],
            now,
        )
        if self.settings.team_learning and event.owner not in (SHARED_OWNER, ALL_OWNERS, TEAM):
            # What this feedback says about shared memories, every owner's search may use.
            team_used = [(m, score) for m, score in used_memories if m.owner == SHARED_OWNER]
            team_penalised = [
                i for i in penalised if i in memories and memories[i].owner == SHARED_OWNER
            ]
            if team_used or team_penalised:
                self.cache.record(TEAM, key, event.query, embed, team_used, now=now)
                self.feedback.reinforce(
                    TEAM, key, [m.memory_id for m, _ in team_used], team_penalised, now
                )
        self.expansions.learn(event.owner, key, event.query, [m.content for m, _ in used_memories])
        created = sum(
            self.anchors.reinforce(m.memory_id, event.query, event.owner) for m, _ in used_memories
        )
        return replace(outcome, anchors_created=created)

    # -- A/B variants ---------------------------------------------------------------

    def variant_for(self, owner: str) -> Variant:
        """The variant ``owner`` is pinned to, else the ``default_variant`` setting.

        Read on every search, so the answer is kept for ``read_consistency_s``
        (the bound within which other processes' writes are seen anyway); this
        process's own :meth:`pin_variant` takes effect at once.
        """
        now = time.monotonic()
        with self._counter_lock:
            known = self._pins.get(owner)
        if known is not None and now - known[1] < self.settings.read_consistency_s:
            return known[0]
        variant = self.settings.default_variant
        with self._db.session() as session:
            row = session.get(OwnerVariantRow, owner)
            if row is not None and row.variant in ("learned", "baseline"):
                variant = row.variant  # type: ignore[assignment]  # checked above
        with self._counter_lock:
            self._pins[owner] = (variant, now)
        return variant

    def pin_variant(self, owner: str, variant: Variant | None) -> None:
        """Pin ``owner`` to ``variant``; None removes the pin."""
        with self._db.session() as session:
            if variant is None:
                session.execute(delete(OwnerVariantRow).where(OwnerVariantRow.owner == owner))
            else:
                values = {"owner": owner, "variant": variant, "updated_at": utcnow()}
                upsert(session, OwnerVariantRow, values, update=["variant", "updated_at"])
        with self._counter_lock:  # after the commit: a read racing it cannot keep the old pin
            self._pins.pop(owner, None)

    # -- search -----------------------------------------------------------------------

    def search(
        self,
        query: str,
        *,
        k: int,
        filters: SearchFilters,
        mode: SearchMode,
        min_score: float,
        parts: LearnedParts,
        learner: str | None = None,
    ) -> SearchResult:
        """Search with the given learned parts (all off: plain search).

        ``learner``: the owner whose learned data the search uses (None: the
        scope of ``filters``, see :func:`scope_of`).

        Returns:
            A :class:`SearchResult`; see :class:`tribal_memory.models.Hit` for
            what the learned fields mean. ``took_ms`` is wall time in ms.
        """
        started = time.perf_counter()
        scope = learner if learner is not None else scope_of(filters)
        variant: Variant = "learned" if parts.any else "baseline"
        key = query_key(query)
        pool = max(k, self.settings.candidate_pool)
        past, team_past, anchors_generation = None, None, None
        cache_generation = team_generation = None
        pooled = self._pools_team(scope, filters) and parts.feedback
        if parts.any:
            # One SQL statement says whether the in-memory learned indexes are current.
            cache_generation, anchors_generation, team_generation = self._generations(scope)
            past = self.cache.past_queries(scope, generation=cache_generation)
            if pooled:
                team_past = self.cache.past_queries(TEAM, generation=team_generation)
        # The index knows the eligible keys, so a miss costs no SQL.
        exact_hit = past is not None and key in past.eligible_keys
        if parts.cache and _plain_filters(filters) and exact_hit:
            entry = self.cache.lookup(scope, key)
            if entry is not None:
                return self._cached(entry, filters, k, min_score, mode, variant, started)
        has_past = past is not None and bool(past.keys)
        anchored = (
            self.anchors.search(
                query, pool, owners=owners_for(scope), generation=anchors_generation
            )
            if parts.anchors
            else []
        )
        use_anchors = bool(anchored)
        fallback: Literal["vector"] | None = None
        need_vector = mode != "text" or has_past or use_anchors
        # The count (for the BM25 fallback and the store's exact-or-index choice)
        # and BM25 run on the store's event loop while the query is embedded.
        counting = self._store.start_count(filters) if mode != "text" else None
        text_part = (
            self._store.start_text_search(query, filters, pool) if mode != "vector" else None
        )
        vector = self._embedder.embed(query, query=True) if need_vector else None
        passing = counting.result() if counting is not None else None
        if mode == "hybrid" and passing is not None and passing < self.settings.fts_min_rows:
            mode, fallback, text_part = "vector", "vector", None
        s = self.settings
        similar = (
            past.similar(
                vector, min_similarity=min(s.semantic_cache_threshold, s.feedback_similarity)
            )
            if past is not None and vector is not None
            else []
        )
        team_similar = (
            team_past.similar(vector, min_similarity=s.feedback_similarity)
            if team_past is not None and vector is not None
            else []
        )
        closest = similar[0] if similar else None
        if (
            parts.cache
            and closest is not None
            and closest.eligible
            and closest.similarity >= s.semantic_cache_threshold
            and _plain_filters(filters)
            and rewording_of(query, closest.text)
        ):
            entry = self.cache.get(scope, closest.key)
            if entry is not None:
                return self._cached(entry, filters, k, min_score, mode, variant, started)
        # The store's loop runs the vector search and the variants' BM25 while
        # this thread reads the learned tables.
        searching = (
            self._store.start_vector_search(vector, filters, pool, passing=passing)
            if mode != "text" and vector is not None
            else None
        )
        expanding = (
            self._start_expansion(query, filters, pool, scope, similar, cache_generation)
            if parts.expansion and has_past and mode != "vector"
            else []
        )
        learned: dict[str, _Learned] = {}
        priors: list[tuple[str, int | None]] = []
        if has_past or use_anchors or team_past is not None:
            learned = self._feedback_parts(
                parts, scope, has_past, similar, anchored, priors, cache_generation
            )
            if team_past is not None:
                self._add_team(learned, priors, team_similar, team_generation)
        candidates = self._plain(searching, text_part, mode)
        self._add_expansion(learned, expanding, mode)
        self._add_priors(learned, priors, candidates)
        hits = self._rank(candidates, learned, vector, filters, mode, k, min_score)
        took_ms = (time.perf_counter() - started) * 1000
        return SearchResult(tuple(hits), mode, fallback, took_ms, variant=variant)

    def _generations(self, scope: str) -> tuple[int, int, int]:
        """Change counters of ``scope``'s cache entries, the anchors and the team's entries.

        One SQL statement.
        """
        names = [
            self.cache.generation_name(scope),
            ANCHORS_GENERATION,
            self.cache.generation_name(TEAM),
        ]
        with self._db.session() as session:
            found = read_generations(session, names)
        return found[names[0]], found[names[1]], found[names[2]]

    def _pools_team(self, scope: str, filters: SearchFilters) -> bool:
        """Whether a search in ``scope`` reads the team's signals (on shared memories)."""
        return (
            self.settings.team_learning
            and scope not in (ALL_OWNERS, SHARED_OWNER, TEAM)
            and filters.include_shared
        )

    def _add_team(
        self,
        learned: dict[str, _Learned],
        priors: list[tuple[str, int | None]],
        similar: Sequence[PastQuery],
        generation: int | None,
    ) -> None:
        """Add the team's boosts to ``learned`` and its usage priors' source to ``priors``.

        Both hold signals on shared memories only. Where the owner has a
        signal of its own on the memory, the larger of the two counts: the
        team's signal holds the owner's own feedback on shared memories too,
        which must not count twice.
        """
        now = utcnow()
        for memory_id, boost in self.feedback.boosts(
            TEAM, similar, now, generation=generation
        ).items():
            entry = learned.setdefault(memory_id, _Learned())
            entry.boost = boost if entry.boost == 0.0 else max(entry.boost, boost)
        if self.settings.usage_prior_weight > 0:
            priors.append((TEAM, generation))

    def _cached(
        self,
        entry: CacheEntry,
        filters: SearchFilters,
        k: int,
        min_score: float,
        mode: SearchMode,
        variant: Variant,
        started: float,
    ) -> SearchResult:
        kept = [
            h for h in entry.hits if h.score >= min_score and filters.admits_owner(h.memory.owner)
        ]
        hits = [Hit(h.memory, h.score, rank, cached=True) for rank, h in enumerate(kept[:k], 1)]
        took_ms = (time.perf_counter() - started) * 1000
        return SearchResult(tuple(hits), mode, None, took_ms, variant=variant, cached=True)

    def _plain(
        self,
        vector_search: Future[list[ScoredMemory]] | None,
        text_search: Future[list[ScoredMemory]] | None,
        mode: SearchMode,
    ) -> list[Candidate]:
        """Fused candidates of the already started vector and BM25 searches."""
        s = self.settings
        vector_part = vector_search.result() if vector_search is not None else []
        text_part = text_search.result() if text_search is not None else []
        if mode == "hybrid":
            fused = fused_candidates(
                vector_part,
                text_part,
                method=s.fusion,
                vector_weight=s.vector_weight,
                rrf_k=s.rrf_k,
                normalisation=s.fusion_normalisation,
            )
            return smooth_neighbours(fused, s.neighbour_weight)
        weight = 1.0 if mode == "vector" else 0.0
        return fused_candidates(vector_part, text_part, vector_weight=weight)

    def _variants(
        self, query: str, scope: str, similar: Sequence[PastQuery], generation: int | None
    ) -> list[str]:
        """Variants that add words to the query (others match the same BM25 terms).

        ``generation``: the change counter of ``scope``'s learned rows (None: unknown).
        """
        variants = rule_variants(query) if self.settings.expansion_rules else []
        if self.settings.expansion_learned:
            learned = self.expansions.variant(
                scope,
                similar,
                min_similarity=self.settings.feedback_similarity,
                limit=8,
                generation=generation,
            )
            if learned:
                variants.append(learned)
        if self.llm is not None:
            self.count("llm_calls")
            try:
                variants.extend(self.llm(query))
            except ExpansionUnavailable:
                self.count("llm_failures")
        asked = {stem(t) for t in content_terms(query)}
        return [v for v in variants if not {stem(t) for t in content_terms(v)} <= asked]

    def _start_expansion(
        self,
        query: str,
        filters: SearchFilters,
        pool: int,
        scope: str,
        similar: Sequence[PastQuery],
        generation: int | None,
    ) -> list[tuple[str, Future[list[tuple[str, float]]]]]:
        """Start the BM25 search of each keyword variant of ``query``: ``[(variant, future)]``."""
        variants = self._variants(query, scope, similar, generation)
        return [(v, self._store.start_text_scores(v, filters, pool)) for v in variants]

    def _feedback_parts(
        self,
        parts: LearnedParts,
        scope: str,
        has_past: bool,
        similar: Sequence[PastQuery],
        anchored: list[AnchorMatch],
        priors: list[tuple[str, int | None]],
        generation: int | None,
    ) -> dict[str, _Learned]:
        """What anchors and feedback add per memory id; the usage priors' source to ``priors``.

        ``priors`` receives ``(owner, cache generation)``: :meth:`_add_priors`
        reads those priors once the pool is known.

        ``similar``: past queries of ``scope`` at least as similar as the
        lower of the semantic-cache and feedback thresholds, best first.
        ``anchored``: the query's anchor matches (already capped to the pool).
        ``generation``: the change counter of ``scope``'s cache entries (None: unknown).
        """
        learned: dict[str, _Learned] = {}
        for match in anchored:
            learned.setdefault(match.memory_id, _Learned()).anchor = match.score
        if parts.feedback and has_past:
            now = utcnow()
            for memory_id, boost in self.feedback.boosts(
                scope, similar, now, generation=generation
            ).items():
                learned.setdefault(memory_id, _Learned()).boost = boost
            if self.settings.usage_prior_weight > 0:
                priors.append((scope, generation))
        return learned

    def _add_expansion(
        self,
        learned: dict[str, _Learned],
        expanding: Sequence[tuple[str, Future[list[tuple[str, float]]]]],
        mode: SearchMode,
    ) -> None:
        """Add each variant's BM25 evidence to ``learned`` (the best variant per memory).

        ``expanding``: the started BM25 searches of the keyword variants.
        """
        # A variant's BM25 goes on the scale the query's own went on in fusion,
        # so that "beats the query's own match" compares like with like.
        normalisation = self.settings.fusion_normalisation if mode == "hybrid" else "max"
        for variant, search in expanding:
            found = search.result()
            if max((score for _, score in found), default=0.0) <= 0:
                continue
            to_text = text_scale([score for _, score in found], normalisation)
            for memory_id, score in found:
                value = self.settings.expansion_weight * to_text(score)
                entry = learned.setdefault(memory_id, _Learned())
                if value > entry.expansion:
                    entry.expansion, entry.expanded_from = value, variant

    def _add_priors(
        self,
        learned: dict[str, _Learned],
        priors: Sequence[tuple[str, int | None]],
        candidates: Sequence[Candidate],
    ) -> None:
        """Set each candidate's usage prior in ``learned``: the larger parts of the owners' priors.

        ``priors``: ``(owner, cache generation)`` whose priors count. Only the
        pool's memories get one (a prior reorders what the query retrieved
        itself), so only theirs are read.
        """
        if not priors:
            return
        ids = [c.memory.memory_id for c in candidates]
        now = utcnow()
        found = [self.feedback.priors(o, now, ids, generation=g) for o, g in priors]
        for memory_id in ids:
            known = [p[memory_id] for p in found if memory_id in p]
            if known:
                learned.setdefault(memory_id, _Learned()).prior = UsagePrior(
                    max(p.used for p in known), max(p.skipped for p in known)
                )

    def _rank(
        self,
        candidates: list[Candidate],
        learned: dict[str, _Learned],
        vector: Vector | None,
        filters: SearchFilters,
        mode: SearchMode,
        k: int,
        min_score: float,
    ) -> list[Hit]:
        if not learned:
            return _hits(candidates, {}, k, min_score)
        s = self.settings
        by_id = {c.memory.memory_id: c for c in candidates}
        gate = s.boost_relevance_gate
        for memory_id, info in learned.items():
            own = by_id[memory_id].score if memory_id in by_id else 0.0
            relevance = (1.0 - gate) + gate * own
            prior = info.prior  # only the pool's memories have one (_add_priors)
            if prior is not None:
                info.boost = min(s.max_boost, info.boost + s.usage_prior_weight * prior.used)
            if info.boost > 0:
                info.boost *= relevance
            if prior is not None:
                info.boost -= s.skip_prior_weight * prior.skipped * relevance
        text_weight = 1.0 - self._vector_weight(mode)
        rescored = [_gained(c, learned.get(c.memory.memory_id), text_weight, s) for c in candidates]
        outside = self._outside(learned, candidates, rescored, mode, k, min_score)
        if outside and vector is not None:
            weight = self._vector_weight(mode)
            normalisation = s.fusion_normalisation if mode == "hybrid" else "max"
            to_vector = vector_scale(candidates, normalisation)
            for scored in self._store.score_ids(vector, outside, filters):
                part = to_vector(scored.score)
                found = Candidate(scored.memory, weight * part, vector=part, cosine=scored.score)
                rescored.append(_gained(found, learned[scored.memory.memory_id], text_weight, s))
        rescored.sort(key=lambda c: (-c.score, c.memory.memory_id))
        return _hits(rescored, learned, k, min_score)

    def _outside(
        self,
        learned: dict[str, _Learned],
        candidates: Sequence[Candidate],
        rescored: Sequence[Candidate],
        mode: SearchMode,
        k: int,
        min_score: float,
    ) -> list[str]:
        """Ids from outside the pool that their learned gain could lift into the top ``k``.

        A memory the vector search did not return has a cosine no higher than
        the pool's lowest (exactly so for an exact search; under an ANN index
        as the index itself judged), so its score is at most the vector part of
        that edge plus its gain. One whose bound is below the k-th score of the
        (already rescored) pool, or below ``min_score``, cannot become a hit
        and is not scored: each id scored costs the store a vector query.
        """
        s = self.settings
        pooled = {c.memory.memory_id for c in candidates}
        floor = min_score
        if len(rescored) >= k:
            floor = max(floor, heapq.nlargest(k, (c.score for c in rescored))[-1])
        cosines = [c.cosine for c in candidates if c.cosine is not None]
        normalisation = s.fusion_normalisation if mode == "hybrid" else "max"
        edge = vector_scale(candidates, normalisation)(min(cosines)) if cosines else 0.0
        vector_weight = self._vector_weight(mode)
        text_weight = 1.0 - vector_weight
        outside: list[str] = []
        for memory_id, extra in learned.items():
            if memory_id in pooled:
                continue
            gain = extra.expansion * text_weight + s.anchor_weight * (extra.anchor or 0.0)
            gain += extra.boost
            if gain > 0 and vector_weight * edge + gain >= floor:
                outside.append(memory_id)
        return outside

    def _vector_weight(self, mode: SearchMode) -> float:
        if mode == "vector":
            return 1.0
        if mode == "text":
            return 0.0
        return self.settings.vector_weight if self.settings.fusion == "weighted" else 0.5


def _gained(
    candidate: Candidate, extra: _Learned | None, text_weight: float, settings: Settings
) -> Candidate:
    """``candidate`` with its learned gain added, the score clipped to [0, 1].

    Expansion counts only where the variant's BM25 beats the query's own
    (``expanded_from`` is cleared on ``extra`` where it does not).
    """
    if extra is None:
        return candidate
    gain = max(0.0, extra.expansion - (candidate.text or 0.0)) * text_weight
    if gain <= 0:
        extra.expanded_from = None
    gain += settings.anchor_weight * (extra.anchor or 0.0) + extra.boost
    return replace(candidate, score=min(1.0, max(0.0, candidate.score + gain)))


def _hits(
    candidates: Sequence[Candidate], learned: dict[str, _Learned], k: int, min_score: float
) -> list[Hit]:
    hits = top_hits(candidates, k, min_score)
    return [
        replace(
            hit, expanded_from=extra.expanded_from, boost=extra.boost, anchor_match=extra.anchor
        )
        if (extra := learned.get(hit.memory.memory_id)) is not None
        else hit
        for hit in hits
    ]


def event_results(hits: Sequence[Hit]) -> list[dict[str, Any]]:
    """The JSON form of hits stored with a retrieval event."""
    return [
        {
            "id": h.memory.memory_id,
            "rank": h.rank,
            "score": round(h.score, 6),
            "cached": h.cached,
            "expanded_from": h.expanded_from,
            "boost": round(h.boost, 6),
            "anchor_match": h.anchor_match,
        }
        for h in hits
    ]

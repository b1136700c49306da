"""The retrieval pipeline: plain hybrid search with the learned signals on top (DESIGN §3-4).

:meth:`Retriever.search` runs these stages, each a method of its own:

1. **state** — the scope's change counters and past queries (one SQL
   statement while they hold: the in-memory indexes are kept per generation).
2. **exact cache** — an eligible cache entry for the exact query key answers
   at once (no embedding, no store query).
3. **start** — the count and the BM25 search started on the store's event
   loop while the query is embedded; BM25 falls back to vector only when too
   few memories pass the filters.
4. **semantic cache** — an eligible entry whose query is at least
   ``semantic_cache_threshold`` similar and a rewording of this one answers.
5. **signals** — the vector search and the keyword variants' BM25 searches
   start; meanwhile this thread matches anchors (in memory), reads feedback
   boosts (the owner's and, on shared memories, the team's) into
   :class:`.signals.Signals` and, once the variants' searches are done,
   gathers their evidence per row.
6. **fusion** — vector and BM25 candidates (``candidate_pool`` each) fused
   and smoothed over adjacent memories (:mod:`.fusion`); in
   ``hybrid_expanded`` mode each is then lifted by its best related candidate
   (:mod:`.graph_expansion`).
7. **pool signals** — the variants' evidence and the usage priors of the
   pool's memories (a variant's hits outside the pool are dropped).
8. **ranking** — gains added and the top ``k`` chosen (:mod:`.ranking`).
9. **calibration** — each hit's ``score`` becomes its calibrated relevance
   (:mod:`.calibration`) and hits under ``min_score`` are dropped.

Stages 2, 4 and the feedback part of 5 stay off until the scope (owner) has
past queries with feedback, and anchors until some exist, so with no learned
data a search is exactly plain search.

Summary memories take part only in mode ``summary`` (hybrid over them alone)
and ``title``, or when the ``kinds`` filter names them; ``title``
(:mod:`.title`) and ``automatic`` (:mod:`.automatic`) are built on these stages.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence

from tribal_memory.base.config import Settings
from tribal_memory.base.models import SHARED_OWNER, SUMMARY_KIND, SearchFilters
from tribal_memory.base.results import Hit, LearnedParts, SearchMode, SearchResult, Variant
from tribal_memory.base.tables import utcnow
from tribal_memory.embeddings.base import Embedder
from tribal_memory.graph.relations import RelationGraph
from tribal_memory.learned.anchors import ALL_OWNERS, TEAM, owners_for
from tribal_memory.learned.learner import Learner, scope_of
from tribal_memory.learned.query_cache import (
    CacheEntry,
    filter_key,
)
from tribal_memory.learned.text import query_key, rewording_of
from tribal_memory.retrieval import signals as sig
from tribal_memory.retrieval.automatic import choose_mode
from tribal_memory.retrieval.calibration import calibrated
from tribal_memory.retrieval.fusion import (
    Candidate,
    Normalisation,
    fused_candidates,
    smooth_neighbours,
)
from tribal_memory.retrieval.graph_expansion import graph_expanded
from tribal_memory.retrieval.ranking import rank
from tribal_memory.retrieval.search_state import SearchState
from tribal_memory.retrieval.title import TitleIndex, title_search
from tribal_memory.store.base import MemoryStore


class Retriever:
    """Plain and learned retrieval over one store.

    Args:
        settings: Fusion and learned-layer settings.
        store: The memory store.
        embedder: The embedding model (queries are embedded with ``query=True``).
        learner: The learned parts whose signals the search reads.
        graph: The relations ``hybrid_expanded`` searches follow (None: none).
    """

    def __init__(
        self,
        settings: Settings,
        store: MemoryStore,
        embedder: Embedder,
        learner: Learner,
        graph: RelationGraph | None = None,
    ) -> None:
        self.settings = settings
        self._store = store
        self._embedder = embedder
        self._learner = learner
        self._graph = graph
        self._titles = TitleIndex(store, graph)

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

        Args:
            query: The question, as asked.
            k: Hits to return.
            filters: Prefilter of both paths (owner/shared, tags, kind, time...).
            mode: ``hybrid``, ``vector``, ``text`` (BM25), ``hybrid_expanded``
                (hybrid with graph-expanded scores), ``summary`` (hybrid over
                summaries), ``title`` (section titles, :mod:`.title`) or
                ``automatic`` (chosen by :func:`.automatic.choose_mode`).
            min_score: Hits scoring below this are dropped, in [0, 1].
            parts: The learned parts to use.
            learner: The owner whose learned data the search uses (None: the
                scope of ``filters``, see :func:`scope_of`).

        Returns:
            A :class:`SearchResult`, hits best first with scores in [0, 1];
            see :class:`tribal_memory.base.results.Hit` for what the learned fields
            mean. ``took_ms`` is wall time in ms. No match: no hits.
        """
        started = time.perf_counter()
        reason: str | None = None
        if mode == "automatic":
            mode, reason = choose_mode(query)
            reason = f"automatic: {reason}"
        if mode == "title":
            result = title_search(
                query,
                k=k,
                filters=filters,
                titles=self._titles,
                search=lambda f, n: self._search(query, n, f, "hybrid", min_score, parts, learner),
                min_score=min_score,
            )
            # Its hits are sections: feedback on them answers title searches only.
            result = dataclasses.replace(result, filter_key=filter_key(filters, "title"))
        else:
            result = self._search(query, k, filters, mode, min_score, parts, learner)
        took_ms = (time.perf_counter() - started) * 1000
        return dataclasses.replace(
            result,
            took_ms=took_ms,
            mode_reason=_joined(reason, result.mode_reason),
        )

    def _search(
        self,
        query: str,
        k: int,
        filters: SearchFilters,
        mode: SearchMode,
        min_score: float,
        parts: LearnedParts,
        learner: str | None,
    ) -> SearchResult:
        """One search in a mode other than ``title`` and ``automatic``."""
        if mode == "summary":
            filters = dataclasses.replace(filters, kinds=(SUMMARY_KIND,), exclude_kinds=())
        elif SUMMARY_KIND not in filters.kinds and SUMMARY_KIND not in filters.exclude_kinds:
            filters = dataclasses.replace(
                filters, exclude_kinds=(*filters.exclude_kinds, SUMMARY_KIND)
            )
        q = SearchState(
            query,
            k,
            filters,
            "hybrid" if mode in ("hybrid_expanded", "summary") else mode,
            min_score,
            parts,
            scope=learner if learner is not None else scope_of(filters),
            started=time.perf_counter(),
            expand_graph=mode == "hybrid_expanded",
            key=query_key(query),
            filter_key=filter_key(filters),
            pool=max(k, self.settings.candidate_pool),
        )
        self._read_state(q)
        answer = self._exact_cache(q)
        if answer is not None:
            return answer
        self._start(q)
        answer = self._semantic_cache(q)
        if answer is not None:
            return answer
        signals = self._signals(q)
        candidates = self._fuse(q)
        self._pool_signals(q, signals, candidates)
        hits = self._rank(q, candidates, signals)
        hits, cosine_range = self._calibrate(q, candidates, hits)
        took_ms = (time.perf_counter() - q.started) * 1000
        ran: SearchMode = "hybrid_expanded" if q.expand_graph and q.mode == "hybrid" else q.mode
        if mode == "summary":
            ran = "summary"
        return SearchResult(
            tuple(hits),
            ran,
            q.fallback,
            took_ms,
            variant=_variant(q),
            filter_key=q.filter_key,
            cosine_range=cosine_range,
        )

    # -- stages -------------------------------------------------------------------------

    def _read_state(self, q: SearchState) -> None:
        """Stage 1: change counters (one SQL statement) and past queries of the scope."""
        if not q.parts.any:
            return
        generations = self._learner.generations(q.scope)
        (
            q.cache_generation,
            q.anchors_generation,
            q.team_generation,
            q.adapter_generation,
        ) = generations
        q.past = self._learner.cache.past_queries(q.scope, generation=q.cache_generation)
        if self._pools_team(q) and q.parts.feedback:
            q.team_past = self._learner.cache.past_queries(TEAM, generation=q.team_generation)

    def _exact_cache(self, q: SearchState) -> SearchResult | None:
        """Stage 2: the cached answer of the exact query key, if eligible (no SQL on a miss).

        The entry of the query under the same filters (a filtered search's
        feedback never answers another filter, or none).
        """
        if not (q.parts.cache and q.past is not None):
            return None
        if q.cache_key not in q.past.eligible_keys:
            return None
        entry = self._learner.cache.lookup(q.scope, q.cache_key, generation=q.cache_generation)
        return self._cached(q, entry) if entry is not None else None

    def _start(self, q: SearchState) -> None:
        """Stage 3: start the count and BM25, embed the query (BM25 alone: match anchors first)."""
        if q.mode == "text":  # whether anchored memories need the query vector to be scored
            self._match_anchors(q)
        # Calibrated scores need the query vector in every mode (cosine is a feature).
        # The count (for the BM25 fallback and the store's exact-or-index choice)
        # and BM25 run on the store's event loop while the query is embedded.
        counting = self._store.start_count(q.filters) if q.mode != "text" else None
        if q.mode != "vector":
            q.text_search = self._store.start_text_search(q.query, q.filters, q.pool)
        q.vector = self._embedder.embed(q.query, query=True)
        q.passing = counting.result() if counting is not None else None
        if q.mode == "hybrid" and q.passing is not None and q.passing < self.settings.fts_min_rows:
            q.mode, q.fallback, q.text_search = "vector", "vector", None

    def _semantic_cache(self, q: SearchState) -> SearchResult | None:
        """Stage 4: find similar past queries; a cached rewording of this query answers."""
        s = self.settings
        if q.vector is None:
            return None
        if q.past is not None:
            threshold = min(s.semantic_cache_threshold, s.feedback_similarity)
            q.similar = q.past.similar(q.vector, min_similarity=threshold)
        if q.team_past is not None:
            q.team_similar = q.team_past.similar(q.vector, min_similarity=s.feedback_similarity)
        closest = q.similar[0] if q.similar else None
        if (
            q.parts.cache
            and closest is not None
            and closest.eligible
            and closest.similarity >= s.semantic_cache_threshold
            and q.plain_filters
            and rewording_of(q.query, closest.text)
        ):
            entry = self._learner.cache.get(q.scope, closest.key, generation=q.cache_generation)
            if entry is not None:
                return self._cached(q, entry)
        return None

    def _signals(self, q: SearchState) -> sig.SignalMap:
        """Stage 5: start the vector and variant searches; anchors, feedback and variants' evidence.

        The store's event loop runs the searches while this thread reads the
        learned tables and, once the variants' BM25 searches are done, adds
        their evidence.
        """
        if q.mode != "text" and q.vector is not None:
            q.search_vector = q.vector
            if q.parts.adapter:
                adapters = self._learner.adapters
                q.search_vector = adapters.apply(q.scope, q.adapter_generation, q.vector)
            q.vector_search = self._store.start_vector_search(
                q.search_vector, q.filters, q.pool, passing=q.passing
            )
        if q.parts.expansion and q.has_past and q.mode != "vector":
            variants = self._learner.keyword_variants(
                q.query, q.scope, q.similar, q.cache_generation
            )
            q.expanding = [
                (v, self._store.start_text_scores(v, q.filters, q.pool)) for v in variants
            ]
        if q.mode != "text":
            self._match_anchors(q)
        signals: sig.SignalMap = {}
        sig.add_anchors(signals, q.anchored)
        feedback = self._learner.feedback
        # Priors are read when either of them counts (the skip prior alone too).
        prior_weight = max(self.settings.usage_prior_weight, self.settings.skip_prior_weight)
        if q.parts.feedback and q.has_past:
            boosts = feedback.boosts(q.scope, q.similar, utcnow(), generation=q.cache_generation)
            sig.add_boosts(signals, boosts)
            if prior_weight > 0:
                q.priors.append((q.scope, q.cache_generation))
        if q.team_past is not None:
            # The team's signals are on shared memories only.
            boosts = feedback.boosts(TEAM, q.team_similar, utcnow(), generation=q.team_generation)
            sig.add_boosts(signals, boosts, merge=True)
            if prior_weight > 0:
                q.priors.append((TEAM, q.team_generation))
        # The variants' BM25 searches end well before the vector search: their
        # evidence is gathered while it runs.
        q.expansion = sig.expansion_of(
            q.expanding,
            weight=self.settings.expansion_weight,
            normalisation=self._normalisation(q),
        )
        return signals

    def _fuse(self, q: SearchState) -> list[Candidate]:
        """Stage 6: fused candidates of the started vector and BM25 searches, best first."""
        s = self.settings
        vector_part = q.vector_search.result() if q.vector_search is not None else []
        text_part = q.text_search.result() if q.text_search is not None else []
        if q.expansion:
            q.pool_refs = {
                s.ref: s.memory_id for s in (*vector_part, *text_part) if s.ref is not None
            }
        if q.mode == "hybrid":
            fused = fused_candidates(
                vector_part,
                text_part,
                method=s.fusion,
                vector_weight=s.vector_weight,
                rrf_k=s.rrf_k,
                normalisation=s.fusion_normalisation,
            )
            candidates = smooth_neighbours(fused, s.neighbour_weight)
        else:
            weight = 1.0 if q.mode == "vector" else 0.0
            candidates = fused_candidates(vector_part, text_part, vector_weight=weight)
        if not q.expand_graph:
            return candidates
        ids = [c.memory_id for c in candidates]
        edges = self._graph.edges_among(ids) if self._graph is not None else []
        return graph_expanded(candidates, edges, s.graph_expansion_weight)

    def _pool_signals(
        self, q: SearchState, signals: sig.SignalMap, candidates: Sequence[Candidate]
    ) -> None:
        """Stage 7: the variants' evidence and the usage priors of the pool's memories.

        Only the pool's memories get either (both reorder what the query
        retrieved itself), so only theirs are kept or read.
        """
        sig.add_expansion(signals, q.expansion, q.pool_refs)
        if not q.priors:
            return
        ids = [c.memory_id for c in candidates]
        now = utcnow()
        feedback = self._learner.feedback
        found = [feedback.priors(owner, now, ids, generation=g) for owner, g in q.priors]
        sig.add_priors(signals, ids, found)

    def _rank(
        self, q: SearchState, candidates: list[Candidate], signals: sig.SignalMap
    ) -> list[Hit]:
        """Stage 8: gains added, memories from outside the pool scored, the top ``k``."""
        # The adapted vector when the vector search ran; else (BM25-only mode with anchors)
        # the query's own, as before the adapter.
        vector = q.search_vector if q.search_vector is not None else q.vector
        score_ids = (
            (lambda ids: self._store.score_ids(vector, ids, q.filters))
            if vector is not None
            else None
        )
        return rank(
            candidates,
            signals,
            settings=self.settings,
            vector_weight=self._vector_weight(q.mode),
            normalisation=self._normalisation(q),
            k=q.k,
            score_ids=score_ids,
        )

    def _calibrate(
        self, q: SearchState, candidates: Sequence[Candidate], hits: list[Hit]
    ) -> tuple[list[Hit], tuple[float, float] | None]:
        """Stage 9: calibrated scores; hits under ``min_score`` dropped, ranks renumbered.

        BM25 alone ran no vector search: the hits' own cosines stand in for
        the candidates' range.
        """
        cosines = [c.cosine for c in candidates if c.cosine is not None]
        if not cosines and hits and q.vector is not None:
            scored = self._store.score_ids(q.vector, [h.memory.memory_id for h in hits], q.filters)
            by_id = {s.memory_id: s.score for s in scored}
            hits = [dataclasses.replace(h, cosine=by_id.get(h.memory.memory_id)) for h in hits]
            cosines = list(by_id.values())
        if not cosines:  # nothing to calibrate against: the ranking score stands
            kept = [h for h in hits if h.score >= q.min_score]
            return [dataclasses.replace(h, rank=r) for r, h in enumerate(kept, 1)], None
        cosine_range = (min(cosines), max(cosines))
        scored_hits = calibrated(
            hits, q.query, cosine_range, anchor_weight=self.settings.anchor_weight
        )
        kept = [h for h in scored_hits if h.score >= q.min_score]
        if len(kept) == len(scored_hits):
            return kept, cosine_range
        return [dataclasses.replace(h, rank=r) for r, h in enumerate(kept, 1)], cosine_range

    # -- helpers ------------------------------------------------------------------------

    def _match_anchors(self, q: SearchState) -> None:
        """The memories whose anchors match the query (in memory, no SQL while they hold)."""
        if q.parts.anchors:
            q.anchored = self._learner.anchors.search(
                q.query, q.pool, owners=owners_for(q.scope), generation=q.anchors_generation
            )

    def _pools_team(self, q: SearchState) -> bool:
        """Whether this search reads the team's signals (on shared memories)."""
        return (
            self.settings.team_learning
            and q.scope not in (ALL_OWNERS, SHARED_OWNER, TEAM)
            and q.filters.include_shared
        )

    def _cached(self, q: SearchState, entry: CacheEntry) -> SearchResult:
        kinds, excluded = q.filters.kinds, q.filters.exclude_kinds
        left_out = q.filters.exclude_doc_ids
        kept = [
            h
            for h in entry.hits
            if h.score >= q.min_score
            and q.filters.admits_owner(h.memory.owner)
            and (not kinds or h.memory.kind in kinds)
            and h.memory.kind not in excluded
            and (h.memory.doc_id is None or h.memory.doc_id not in left_out)
        ]
        hits = [Hit(h.memory, h.score, rank, cached=True) for rank, h in enumerate(kept[: q.k], 1)]
        took_ms = (time.perf_counter() - q.started) * 1000
        return SearchResult(
            tuple(hits),
            q.mode,
            None,
            took_ms,
            variant=_variant(q),
            cached=True,
            filter_key=q.filter_key,
        )

    def _normalisation(self, q: SearchState) -> Normalisation:
        """How this search's fusion put each part on [0, 1]."""
        return self.settings.fusion_normalisation if q.mode == "hybrid" else "max"

    def _vector_weight(self, mode: SearchMode) -> float:
        if mode == "vector":
            return 1.0
        if mode == "text":
            return 0.0
        return self.settings.vector_weight if self.settings.fusion == "weighted" else 0.5


def _joined(*reasons: str | None) -> str | None:
    """The given reasons joined with ``"; "`` (None: none given)."""
    given = [r for r in reasons if r]
    return "; ".join(given) if given else None


def _variant(q: SearchState) -> Variant:
    return "learned" if q.parts.any else "baseline"

"""The learner: what feedback on a retrieval teaches, and the signals it leaves (DESIGN §4).

A :class:`Learner` owns the learned tables' four parts (query cache, feedback
weights and usage priors, anchors, learned expansions) and the optional LLM
expansion. :meth:`Learner.record_usage` turns one retrieval's usage feedback
into all of them; the retrieval pipeline (:mod:`tribal_memory.retrieval`)
reads them back as per-memory signals. Nothing here ranks memories.
"""

from __future__ import annotations

import functools
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from tribal_memory.base.config import Settings
from tribal_memory.base.db import Database
from tribal_memory.base.errors import Conflict, InvalidInput, NotFound
from tribal_memory.base.models import SHARED_OWNER, Memory, SearchFilters
from tribal_memory.base.results import FeedbackResult, Hit
from tribal_memory.base.tables import utcnow
from tribal_memory.embeddings.base import Embedder, Vector
from tribal_memory.learned.adapter import AdapterFit
from tribal_memory.learned.adapters import QueryAdapters
from tribal_memory.learned.adapters import generation_name as adapter_generation
from tribal_memory.learned.anchors import ALL_OWNERS, TEAM, AnchorIndex
from tribal_memory.learned.anchors import GENERATION as ANCHORS_GENERATION
from tribal_memory.learned.expander import (
    ExpansionUnavailable,
    LearnedExpansions,
    LlmVariants,
    rule_variants,
)
from tribal_memory.learned.feedback import FeedbackTracker, RetrievalEvent
from tribal_memory.learned.query_cache import PastQuery, QueryCache, cache_key
from tribal_memory.learned.text import content_terms, query_key, stem
from tribal_memory.store.base import MemoryStore


def scope_of(filters: SearchFilters) -> str:
    """The owner whose learned data a search with ``filters`` uses and feeds."""
    return filters.owner if filters.owner is not None else ALL_OWNERS


class Learner:
    """The learned parts of one store and how feedback updates them.

    Args:
        settings: Learned-layer settings.
        db: The SQL database (learned tables).
        store: The memory store.
        embedder: The embedding model (a fed-back query is embedded with ``query=True``).
        background: Fit query adapters on a background thread after feedback
            (False: only when :meth:`QueryAdapters.train` is called).
    """

    def __init__(
        self,
        settings: Settings,
        db: Database,
        store: MemoryStore,
        embedder: Embedder,
        *,
        background: bool = True,
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
        self.feedback = FeedbackTracker.from_settings(db, settings)
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
        self.adapters = QueryAdapters(
            db,
            store,
            embedder,
            fit=AdapterFit(
                temperature=settings.adapter_temperature,
                penalty=settings.adapter_penalty,
                steps=settings.adapter_steps,
                learning_rate=settings.adapter_learning_rate,
                negatives=settings.adapter_negatives,
            ),
            min_questions=settings.adapter_min_questions,
            retrain_every=settings.adapter_retrain_every,
            background=background,
        )

    def generations(self, scope: str) -> tuple[int, int, int, int]:
        """Change counters: ``scope``'s cache entries, anchors, the team's entries, the adapter.

        At most one SQL statement (none on SQLite while no connection has
        committed since the last read: :meth:`Database.generations`); the
        in-memory learned indexes are rebuilt only when their counter moved.
        """
        names = [
            self.cache.generation_name(scope),
            ANCHORS_GENERATION,
            self.cache.generation_name(TEAM),
            adapter_generation(scope),
        ]
        found = self._db.generations(names)
        return found[names[0]], found[names[1]], found[names[2]], found[names[3]]

    def close(self) -> None:
        """Let a running adapter fit end; close the LLM client, if any."""
        self.adapters.close()
        if self.llm is not None:
            self.llm.close()

    def count(self, name: str) -> None:
        """Add one to an in-process counter (reported by retrieval stats, e.g. ``llm_calls``)."""
        with self._counter_lock:
            self.counters[name] += 1

    # -- feedback ---------------------------------------------------------------------

    def _record_cached(
        self,
        owner: str,
        event: RetrievalEvent,
        embed: Callable[[], Vector],
        used: Sequence[tuple[Memory, float]],
        now: datetime,
    ) -> None:
        """Count the feedback in ``owner``'s cache entry for the event's query and filters.

        A filtered search's feedback goes to the entry of its filters
        (:func:`~tribal_memory.learned.query_cache.cache_key`), which keeps no
        embedding; the plain entry only gains the query's embedding, so the
        query stays a past query for boosts and expansions.
        """
        key = query_key(event.query)
        entry = cache_key(key, event.filter_key)
        if entry == key:
            self.cache.record(owner, key, event.query, embed, used, now=now)
            return
        self.cache.record(owner, entry, event.query, None, used, now=now)
        self.cache.remember(owner, key, event.query, embed)

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
        self._record_cached(event.owner, event, embed, used_memories, now)
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
                self._record_cached(TEAM, event, embed, team_used, now)
                self.feedback.reinforce(
                    TEAM, key, [m.memory_id for m, _ in team_used], team_penalised, now
                )
        self.expansions.learn(event.owner, key, event.query, [m.content for m, _ in used_memories])
        created = sum(
            self.anchors.reinforce(m.memory_id, event.query, event.owner) for m, _ in used_memories
        )
        self.adapters.note_feedback(event.owner)
        return replace(outcome, anchors_created=created)

    def keyword_variants(
        self, query: str, scope: str, similar: Sequence[PastQuery], generation: int | None
    ) -> list[str]:
        """Rewordings of ``query`` that add words to it, for its BM25 search.

        From the rules (``expansion_rules``), the words learned from similar
        past queries' used memories (``expansion_learned``) and the LLM, if
        one is configured (an unavailable LLM is counted, not raised).
        Variants whose content words the query already has are dropped: they
        would match the same BM25 terms.

        Args:
            query: The query as asked.
            scope: The owner whose learned expansions count.
            similar: ``scope``'s past queries similar to ``query``, best first.
            generation: The change counter of ``scope``'s learned rows (None: unknown).

        Returns:
            The variants, possibly [].
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

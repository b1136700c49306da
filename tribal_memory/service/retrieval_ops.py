"""The service's retrieval operations: search, recall, feedback, anchors and A/B variants.

A mixin of :class:`~tribal_memory.service.memory_service.MemoryService`: the
parts it uses are set up there. Ranking itself is
:class:`~tribal_memory.retrieval.pipeline.Retriever`'s; learning is
:class:`~tribal_memory.learned.learner.Learner`'s. These methods check input,
pick the caller's variant and scope, and log retrieval events.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import datetime
from typing import get_args

from tribal_memory.base.config import Settings
from tribal_memory.base.db import Database
from tribal_memory.base.errors import InvalidInput, NotFound, TooLarge
from tribal_memory.base.graph import Near
from tribal_memory.base.models import SHARED_OWNER, SearchFilters
from tribal_memory.base.results import (
    Anchor,
    FeedbackResult,
    LearnedParts,
    SearchMode,
    SearchResult,
    Variant,
)
from tribal_memory.base.validation import check_k, check_owner, check_session_id, check_time
from tribal_memory.core import Core
from tribal_memory.documents.chunk_context import chunk_context
from tribal_memory.documents.index import DocumentIndex
from tribal_memory.embeddings.base import Embedder, Vector
from tribal_memory.graph.queries import GraphQueries, check_traversal
from tribal_memory.learned.anchors import owners_for
from tribal_memory.learned.feedback import RetrievalEvent
from tribal_memory.learned.history import MemoryHistory, memory_history
from tribal_memory.learned.learner import Learner, event_results, scope_of
from tribal_memory.learned.stats import Bucket, RetrievalStats, retrieval_stats
from tribal_memory.retrieval import Retriever, VariantPins
from tribal_memory.retrieval.vector import check_vector, search_by_vector
from tribal_memory.store.base import MemoryStore


class RetrievalOperations:
    """Search, recall with feedback, anchors, variants and retrieval stats (a mixin)."""

    core: Core
    settings: Settings
    db: Database
    store: MemoryStore
    embedder: Embedder
    graph_queries: GraphQueries
    learner: Learner
    retriever: Retriever
    variants: VariantPins
    document_index: DocumentIndex

    def recall(
        self,
        query: str,
        *,
        k: int = 10,
        filters: SearchFilters | None = None,
        min_score: float = 0.0,
        learned: LearnedParts | None = None,
        context: bool = False,
        learner: str | None = None,
        near: Near | None = None,
    ) -> SearchResult:
        """Embedding-similarity recall (:meth:`search` with ``mode="vector"``).

        Returns:
            Up to ``k`` hits; ``score`` = cosine similarity clipped to [0, 1]
            (higher is closer), plus any learned boost or anchor match once the
            learned layer has data (see :meth:`search`). Hits under
            ``min_score`` are dropped; no match gives an empty result.

        Raises:
            InvalidInput: empty query or k < 1, a bad ``near`` traversal.
            TooLarge: k over ``max_k``.
            NotFound: the ``near`` memory does not exist or is not visible.
        """
        return self.search(
            query,
            k=k,
            filters=filters,
            mode="vector",
            min_score=min_score,
            learned=learned,
            context=context,
            learner=learner,
            near=near,
        )

    def search(
        self,
        query: str,
        *,
        k: int = 10,
        filters: SearchFilters | None = None,
        mode: SearchMode = "hybrid",
        min_score: float = 0.0,
        learned: LearnedParts | None = None,
        context: bool = False,
        learner: str | None = None,
        near: Near | None = None,
    ) -> SearchResult:
        """Hybrid (vector + BM25) search over memories passing ``filters``.

        Both paths fetch ``max(k, candidate_pool)`` candidates over the same
        prefilter; :func:`tribal_memory.retrieval.fusion.fused_candidates` combines
        them. With fewer than ``fts_min_rows`` visible memories, hybrid search
        runs on vectors alone and reports ``fallback="vector"``. The retrieval
        pipeline (:mod:`tribal_memory.retrieval.pipeline`) then applies the parts in
        ``learned``; None means the owner's A/B variant: the parts switched on
        in settings for ``learned``, none for ``baseline``. With no learned data
        yet, results equal plain search exactly. With ``context``, the result
        also carries each document chunk hit's parent and neighbouring chunks
        (:func:`tribal_memory.documents.chunk_context.chunk_context`), apart from the hits.

        ``learner`` is the owner whose learned data (and A/B variant) the
        search uses: the caller's own owner when it searches another scope
        (e.g. only ``shared`` memories); None: the scope of ``filters``
        (``filters.owner``, or all owners).

        ``near`` restricts the search to a memory's graph neighbourhood: that
        memory and those its traversal reaches (:meth:`neighbors`, seen as
        ``filters.owner`` sees them) become a prefilter on memory ids of both
        paths, so the ranking is otherwise the same search.

        Returns:
            A :class:`SearchResult`; every hit has its fused ``score`` and its
            ``vector_score``/``text_score`` parts, all in [0, 1], higher better.

        Raises:
            InvalidInput: empty query, k < 1, unknown mode, bad filter, a bad
                ``near`` traversal (steps outside 1..5, a bad type or blocked name).
            TooLarge: k over ``max_k``.
            NotFound: the ``near`` memory does not exist or is not visible.
        """
        query = query.strip()
        if not query:
            raise InvalidInput("query must not be empty")
        if len(query) > self.settings.max_content_chars:
            raise TooLarge(f"query is over {self.settings.max_content_chars} characters")
        check_k(k, self.settings.max_k)
        if mode not in get_args(SearchMode):
            modes = ", ".join(get_args(SearchMode))
            raise InvalidInput(f"mode must be one of {modes}, not {mode!r}")
        filters = filters or SearchFilters()
        learner = learner if learner is not None else scope_of(filters)
        if learned is None:
            variant = self.variants.variant_for(learner)
            learned = self.settings.learned_parts if variant == "learned" else LearnedParts.none()
        result = self.retriever.search(
            query,
            k=k,
            filters=self._near(filters, near) if near is not None else filters,
            mode=mode,
            min_score=min_score,
            parts=learned,
            learner=learner,
        )
        if not context:
            return result
        found = chunk_context(
            result.hits, store=self.store, documents=self.document_index, filters=filters
        )
        return dataclasses.replace(result, context=found)

    def search_vector(
        self,
        vector: Sequence[float] | Vector,
        *,
        k: int = 10,
        filters: SearchFilters | None = None,
        min_score: float = 0.0,
        near: Near | None = None,
    ) -> SearchResult:
        """Memories nearest to a raw embedding vector (cosine), best first.

        For vectors made by this instance's model elsewhere (its id and
        dimension are in :meth:`stats`). No text is embedded and the learned
        layer takes no part (it learns from queries).

        Args:
            vector: ``embedding_dim`` floats; need not be unit length.
            k: Most hits, 1 to ``max_k``.
            filters: Prefilter, as for :meth:`search`.
            min_score: Hits under it are dropped, in [0, 1].
            near: Only this memory's graph neighbourhood, as for :meth:`search`.

        Returns:
            Mode ``vector``; ``score`` = ``vector_score`` = cosine similarity
            clipped to [0, 1], higher is closer. No match: no hits.

        Raises:
            InvalidInput: a vector of another dimension, a value not finite,
                all zeros; k < 1; a bad filter or ``near`` traversal.
            TooLarge: k over ``max_k``.
            NotFound: the ``near`` memory does not exist or is not visible.
        """
        checked = check_vector(vector, self.embedder.dim)
        check_k(k, self.settings.max_k)
        filters = filters or SearchFilters()
        if near is not None:
            filters = self._near(filters, near)
        return search_by_vector(self.store, checked, k=k, filters=filters, min_score=min_score)

    def _near(self, filters: SearchFilters, near: Near) -> SearchFilters:
        """``filters`` narrowed to the neighbourhood ``near`` names, as ``filters.owner`` sees it.

        Raises:
            NotFound: the memory does not exist or is not visible.
            InvalidInput: a bad traversal.
        """
        traversal = check_traversal(near.traversal)
        ids = self.graph_queries.neighbourhood(near.memory_id, traversal, filters.owner)
        if filters.memory_ids is not None:
            allowed = set(filters.memory_ids)
            ids = [i for i in ids if i in allowed]
        return dataclasses.replace(filters, memory_ids=tuple(ids))

    def recall_with_feedback(
        self,
        query: str,
        *,
        k: int = 10,
        filters: SearchFilters | None = None,
        mode: SearchMode = "hybrid",
        min_score: float = 0.0,
        learned: LearnedParts | None = None,
        context: bool = False,
        learner: str | None = None,
        session_id: str | None = None,
        near: Near | None = None,
    ) -> SearchResult:
        """:meth:`search`, logged as a retrieval event that usage feedback can refer to.

        The event belongs to ``learner`` (None: the scope of ``filters``): only
        that owner may send its feedback, and what it teaches is that owner's.
        ``session_id`` (1 to 128 characters) ties retrievals of one agent task
        together: feedback on any of them may name memories another returned.

        Returns:
            The search result with ``retrieval_id`` set; pass it with the ids
            of the hits the caller used to :meth:`record_usage_feedback`.

        Raises:
            As :meth:`search`; InvalidInput also for an empty or over-long ``session_id``.
        """
        session_id = check_session_id(session_id)
        filters = filters or SearchFilters()
        learner = learner if learner is not None else scope_of(filters)
        result = self.search(
            query,
            k=k,
            filters=filters,
            mode=mode,
            min_score=min_score,
            learned=learned,
            context=context,
            learner=learner,
            near=near,
        )
        parts = (
            learned
            if learned is not None
            else (
                self.settings.learned_parts if result.variant == "learned" else LearnedParts.none()
            )
        )
        retrieval_id = self.learner.feedback.log(
            owner=learner,
            query=query.strip(),
            variant=result.variant,
            results=event_results(result.hits),
            parts=parts.names,
            cache_hit=result.cached,
            session_id=session_id,
            filter_key=result.filter_key,
        )
        return dataclasses.replace(result, retrieval_id=retrieval_id)

    def record_usage_feedback(
        self, retrieval_id: str, used_ids: Sequence[str], *, owner: str | None = None
    ) -> FeedbackResult:
        """Report which memories of a logged retrieval the caller used.

        Used (query, memory) pairs are reinforced, retrieved-but-unused ones
        penalised; the query's cache entry counts a success (some used) or a
        failure (none used); used memories gain the query as an anchor once
        used ``anchor_min_uses`` times. Sending the same feedback again
        changes nothing (``duplicate=True``).

        Args:
            retrieval_id: From :meth:`recall_with_feedback`.
            used_ids: Memory ids among that retrieval's hits (may be empty:
                nothing was useful).
            owner: When given, only that owner's retrievals are visible.

        Raises:
            NotFound: unknown retrieval id (or another owner's).
            InvalidInput: a used id that was not among that retrieval's hits.
            Conflict: the retrieval already has feedback with other ids.
        """
        with self.core.references_lock:
            return self.learner.record_usage(retrieval_id, used_ids, owner=owner)

    def retrieval(self, retrieval_id: str, *, owner: str | None = None) -> RetrievalEvent:
        """The logged retrieval ``retrieval_id`` (its query, hits and any feedback).

        Raises:
            NotFound: unknown retrieval id, or one logged for another ``owner``.
        """
        event = self.learner.feedback.event(retrieval_id)
        if event is None or (owner is not None and event.owner != owner):
            raise NotFound(f"no retrieval with id {retrieval_id}")
        return event

    def memory_history(
        self, memory_id: str, *, owner: str | None = None, limit: int = 50
    ) -> MemoryHistory:
        """The questions feedback tied to a memory and the recent retrievals that returned it.

        Args:
            memory_id: The memory.
            owner: Whose view: the memory must be visible to it, and only its
                feedback and retrievals are listed (None: every owner's).
            limit: Most entries of each list, 1 to ``max_k``.

        Returns:
            See :class:`~tribal_memory.learned.history.MemoryHistory`; empty
            lists when nothing was learned about the memory.

        Raises:
            NotFound: no such memory visible to ``owner``.
            InvalidInput: limit < 1. TooLarge: limit over ``max_k``.
        """
        check_k(limit, self.settings.max_k)
        self.core.get(memory_id, owner=owner)
        return memory_history(self.db, memory_id, owner=owner, limit=limit)

    def session_memory_ids(self, event: RetrievalEvent) -> tuple[str, ...]:
        """Memories feedback on ``event`` may name; never raises.

        Its results, then (with a session) those of every other retrieval of
        its owner and session.
        """
        ids = list(event.result_ids)
        if event.session_id is not None:
            found = self.learner.feedback.session_results(event.owner, event.session_id)
            ids += [i for i in found if i not in set(ids)]
        return tuple(ids)

    def add_anchor(
        self,
        memory_id: str,
        text: str,
        *,
        owner: str | None = None,
        for_owner: str | None = None,
    ) -> Anchor:
        """Attach a manual anchor (a question the memory answers); active at once.

        The anchor belongs to the memory's owner, so every search that can see
        the memory uses it, except on a ``shared`` memory with ``for_owner``
        given: then it belongs to ``for_owner`` and steers only that owner's
        searches (one key alone must not steer every owner's ranking).

        Args:
            memory_id: The memory the anchor finds.
            text: The question.
            owner: When given, only that owner's and shared memories are visible.
            for_owner: The owner a non-admin caller acts for (None: an admin).

        Raises:
            NotFound: no such memory visible to ``owner``.
            InvalidInput: empty or over-long anchor text.
        """
        with self.core.references_lock:
            memory = self.core.get(memory_id, owner=owner)
            anchor_owner = memory.owner
            if memory.owner == SHARED_OWNER and for_owner is not None:
                anchor_owner = for_owner
            return self.learner.anchors.add(memory_id, text, anchor_owner)

    def anchors(self, memory_id: str, *, owner: str | None = None) -> list[Anchor]:
        """Anchors of a memory that ``owner``'s searches use (None: every owner's), most used first.

        Another owner's learned anchors (its questions) are not listed.

        Raises:
            NotFound: no such memory visible to ``owner``.
        """
        self.core.get(memory_id, owner=owner)
        owners = owners_for(owner) if owner is not None else None
        return self.learner.anchors.anchors_of(memory_id, owners)

    def remove_anchor(
        self,
        memory_id: str,
        text: str,
        *,
        owner: str | None = None,
        for_owner: str | None = None,
    ) -> None:
        """Detach an anchor from a memory.

        Only anchors ``owner``'s searches use (its own and ``shared`` ones; None:
        any owner's) are removed; with ``for_owner`` (a non-admin caller) only
        that owner's own: the ``shared`` anchors of a shared memory need an admin.

        Raises:
            NotFound: no such memory visible to ``owner``, or no such anchor.
        """
        self.core.get(memory_id, owner=owner)
        owners = owners_for(owner) if owner is not None else None
        if for_owner is not None:
            owners = frozenset((for_owner,))
        if not self.learner.anchors.remove(memory_id, text, owners):
            raise NotFound(f"memory {memory_id} has no anchor {text!r}")

    def pin_variant(self, owner: str, variant: Variant | None) -> None:
        """Pin ``owner`` to the A/B variant ``learned`` or ``baseline`` (None: unpin).

        Raises:
            InvalidInput: an invalid owner or variant.
        """
        owner = check_owner(owner)
        if variant not in (None, "learned", "baseline"):
            raise InvalidInput(f"variant must be learned or baseline, not {variant!r}")
        self.variants.pin(owner, variant)

    def retrieval_stats(
        self,
        *,
        owner: str | None = None,
        bucket: Bucket = "day",
        since: datetime | None = None,
    ) -> RetrievalStats:
        """Cache hit rate, usage rates per variant, expansion lift and a learning curve.

        Args:
            owner: Only this owner's retrievals (None: all).
            bucket: Learning-curve period, ``"day"`` or ``"week"``.
            since: Only retrievals at or after this time.

        Raises:
            InvalidInput: an unknown bucket, or a ``since`` out of range in UTC.
        """
        if bucket not in ("day", "week"):
            raise InvalidInput(f"bucket must be day or week, not {bucket!r}")
        since = check_time(since, "since")
        return retrieval_stats(
            self.db,
            owner=owner,
            bucket=bucket,
            since=since,
            counters=dict(self.learner.counters),
            min_successes=self.settings.cache_min_successes,
            min_success_rate=self.settings.cache_min_success_rate,
        )

    def variant_for(self, owner: str) -> Variant:
        """The A/B variant that serves ``owner``."""
        return self.variants.variant_for(owner)

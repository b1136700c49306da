"""Retrieval: ``POST /v1/recall`` (vector), ``/v1/search`` (hybrid), ``/v1/search/vector``."""

from __future__ import annotations

import dataclasses
import functools

from litestar import Controller, post
from litestar.params import JSONBody
from litestar.status_codes import HTTP_200_OK

from tribal_memory.auth.policy import Caller
from tribal_memory.base.errors import InvalidInput
from tribal_memory.base.results import SearchMode
from tribal_memory.interfaces.api.auth import CallerDep
from tribal_memory.interfaces.api.convert import search_out
from tribal_memory.interfaces.api.deps import Service
from tribal_memory.interfaces.api.errors import error_responses
from tribal_memory.interfaces.api.knowledge_schemas import VectorSearchRequest
from tribal_memory.interfaces.api.schemas import RecallRequest, SearchOut, SearchRequest
from tribal_memory.service.memory_service import MemoryService


def _search(
    service: MemoryService, caller: Caller, data: RecallRequest, mode: SearchMode
) -> SearchOut:
    """Run ``data`` in ``mode`` within the caller's scope, logged for feedback when asked."""
    filters = dataclasses.replace(data.to_filters(), owner=caller.scope(data.owner))
    if data.session_id is not None and not data.feedback:
        raise InvalidInput("session_id needs feedback: true (it ties logged retrievals together)")
    run = (
        functools.partial(service.recall_with_feedback, session_id=data.session_id)
        if data.feedback
        else service.search
    )
    result = run(
        data.query,
        k=data.k,
        filters=filters,
        mode=mode,
        min_score=data.min_score,
        learned=data.learned_parts(),
        context=data.context,
        learner=caller.learner,
        near=data.near_filter(),
    )
    return search_out(result)


class RetrievalController(Controller):
    """Ranked retrieval over the memories passing the request's filters.

    Both routes take ``feedback`` (log the retrieval; the response carries a
    ``retrieval_id`` for ``POST /v1/feedback``) and ``learned`` (the learned
    parts to use; ``[]`` is plain search, null the owner's A/B variant).
    """

    path = "/v1"
    tags = ["retrieval"]

    @post(
        "/recall",
        sync_to_thread=True,
        status_code=HTTP_200_OK,
        responses=error_responses(400, 403, 404, 413, 503),
    )
    def recall(
        self, data: JSONBody[RecallRequest], service: Service, caller: CallerDep
    ) -> SearchOut:
        """Embedding-similarity recall.

        Returns up to ``k`` hits, ``score`` = cosine similarity clipped to
        [0, 1] (higher is closer), plus any learned boost or anchor match; hits
        under ``min_score`` are dropped. No match is an empty ``hits`` list,
        not an error. ``mode`` is ``vector``.

        Raises:
            InvalidInput: 400, empty query, k < 1 or an unknown learned part;
                ``steps`` outside 1..5, a bad type or blocked name, or
                ``steps``/``types``/``block`` without ``near``.
            NotFound: 404, the ``near`` memory is missing or not visible.
            TooLarge: 413, k over ``max_k`` or query over ``max_content_chars``.
            EmbeddingError: 503, the query could not be embedded.
        """
        return _search(service, caller, data, "vector")

    @post(
        "/search",
        sync_to_thread=True,
        status_code=HTTP_200_OK,
        responses=error_responses(400, 403, 404, 413, 503),
    )
    def search(
        self, data: JSONBody[SearchRequest], service: Service, caller: CallerDep
    ) -> SearchOut:
        """Search in the request's ``mode``: hybrid (vector + BM25, the default) or another.

        Returns up to ``k`` hits, best first; each has its calibrated ``score``
        (the probability it answers the question, comparable across queries),
        the ``rank_score`` that ranked it and the ``vector_score``/``text_score``
        parts, all in [0, 1], higher better, and its raw ``cosine``.
        With too few visible memories for BM25, hybrid search runs on vectors
        alone and says so with ``fallback: "vector"``. No match is an empty list.

        ``near`` (with ``steps``, ``types``, ``block``) searches only a
        memory's graph neighbourhood. ``mode`` and ``mode_reason`` say which
        mode ran and why (``automatic`` picks one; a ``title`` search that
        matched no title runs hybrid).

        Raises:
            InvalidInput: 400, empty query, k < 1 or an unknown learned part;
                ``steps`` outside 1..5, a bad type or blocked name, or
                ``steps``/``types``/``block`` without ``near``.
            NotFound: 404, the ``near`` memory is missing or not visible.
            TooLarge: 413, k over ``max_k`` or query over ``max_content_chars``.
            StoreUnavailable / EmbeddingError: 503.
        """
        return _search(service, caller, data, data.mode)

    @post(
        "/search/vector",
        sync_to_thread=True,
        status_code=HTTP_200_OK,
        responses=error_responses(400, 403, 404, 413, 503),
    )
    def search_vector(
        self, data: JSONBody[VectorSearchRequest], service: Service, caller: CallerDep
    ) -> SearchOut:
        """Memories nearest to a raw embedding vector (cosine), best first; no text is embedded.

        ``vector`` must have the instance's embedding dimension (``embedding_dim``
        in ``GET /v1/stats``). Hits have ``score`` = ``vector_score`` = cosine
        similarity clipped to [0, 1]; ``mode`` is ``vector``. The learned layer
        takes no part (it learns from query text). No match is an empty list.

        Raises:
            InvalidInput: 400, a vector of another dimension, a value that is
                not finite, all zeros; k < 1; a bad ``near`` traversal.
            NotFound: 404, the ``near`` memory is missing or not visible.
            TooLarge: 413, k over ``max_k``.
            StoreUnavailable: 503.
        """
        filters = dataclasses.replace(data.to_filters(), owner=caller.scope(data.owner))
        result = service.search_vector(
            data.vector,
            k=data.k,
            filters=filters,
            min_score=data.min_score,
            near=data.near_filter(),
        )
        return search_out(result)

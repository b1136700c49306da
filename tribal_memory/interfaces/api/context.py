"""Knowledge context: ``POST /v1/context`` returns a ``<knowledge-graph>`` block for a prompt."""

from __future__ import annotations

import msgspec
from litestar import post
from litestar.params import JSONBody
from litestar.status_codes import HTTP_200_OK

from tribal_memory.interfaces.api.auth import CallerDep
from tribal_memory.interfaces.api.deps import Service
from tribal_memory.interfaces.api.errors import error_responses
from tribal_memory.interfaces.api.tool_schemas import ContextOut, ContextRequest
from tribal_memory.interfaces.context import build_context, context_json


@post(
    "/v1/context",
    sync_to_thread=True,
    status_code=HTTP_200_OK,
    tags=["agent tools"],
    responses=error_responses(400, 403, 413, 503),
)
def context(data: JSONBody[ContextRequest], service: Service, caller: CallerDep) -> ContextOut:
    """A ``<knowledge-graph>`` block of the memories relevant to ``prompt``, for prompt injection.

    Prompts under 5 characters and prompts that already hold a block are
    skipped (``context: ""`` and a ``skipped_reason``). Otherwise the prompt
    is searched (hybrid, the agent's learned variant) and logged, so
    ``retrieval_id`` works with ``POST /v1/feedback``. The block is cut to
    ``max_tokens`` (default: the ``context_max_tokens`` setting).

    Raises:
        InvalidInput: 400, top_k < 1, scope ``session`` without ``conversation_id``.
        TooLarge: 413, top_k over ``max_k``.
        Forbidden: 403, a non-admin key named another ``agent_id``.
        StoreUnavailable / EmbeddingError: 503.
    """
    built = build_context(
        service,
        data.prompt,
        owner=caller.scope((data.agent_id or "").strip() or None),
        top_k=data.top_k,
        min_score=data.min_score,
        include_neighbors=data.include_neighbors,
        max_tokens=data.max_tokens,
        learner=caller.learner,
        scope=data.scope,
        conversation_id=data.conversation_id,
        paths=data.paths,
    )
    return msgspec.convert(context_json(built), ContextOut)

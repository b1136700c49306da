"""Agent tools over HTTP: ``POST /v1/tools/memory_search|memory_get|memory_feedback|memory_graph``.

Drop-in for OpenClaw's memory slot: a plugin forwards each tool call's
arguments as the JSON body and returns the answer to the agent unchanged
(shapes in :mod:`tribal_memory.interfaces.tools`). The caller is the agent named by the
``X-Agent-Id`` header, else the ``agent_id`` query parameter; with neither,
every owner's memories are visible. With authentication on, a non-admin key
acts for its own owner (naming another agent is a 403).
"""

from __future__ import annotations

from typing import Annotated

import msgspec
from litestar import Controller, post
from litestar.di import NamedDependency, Provide
from litestar.params import HeaderParameter, JSONBody, QueryParameter
from litestar.status_codes import HTTP_200_OK

from tribal_memory.interfaces import tool_manage, tools
from tribal_memory.interfaces.api.auth import CallerDep
from tribal_memory.interfaces.api.deps import Service
from tribal_memory.interfaces.api.errors import error_responses
from tribal_memory.interfaces.api.tool_schemas import (
    MemoryCaptureOut,
    MemoryChangeOut,
    MemoryFeedbackOut,
    MemoryGetOut,
    MemoryGraphOut,
    MemoryListOut,
    MemorySearchOut,
)
from tribal_memory.interfaces.graph_tool import memory_graph
from tribal_memory.interfaces.tool_args import (
    MemoryCaptureIn,
    MemoryDeleteIn,
    MemoryFeedbackIn,
    MemoryGetIn,
    MemoryGraphIn,
    MemoryListIn,
    MemorySearchIn,
    MemoryUpdateIn,
)

AgentHeader = Annotated[
    str | None,
    HeaderParameter(
        name="x-agent-id",
        description="The calling agent: its memories plus shared ones are visible.",
    ),
]
AgentQuery = Annotated[
    str | None,
    QueryParameter(name="agent_id", description="The calling agent, when no X-Agent-Id header."),
]


def agent_of(header: str | None, query: str | None) -> str | None:
    """The caller's owner id: the header, else the query parameter; blank counts as absent."""
    for value in (header, query):
        if value is not None and value.strip():
            return value.strip()
    return None


def provide_agent(
    caller: CallerDep, agent_header: AgentHeader = None, agent_query: AgentQuery = None
) -> str | None:
    """The owner the tool call acts for: the named agent, as the caller's key allows.

    Raises:
        Forbidden: a non-admin key named another agent (403).
    """
    return caller.scope(agent_of(agent_header, agent_query))


Agent = NamedDependency[str | None]
"""Annotation of a handler's ``agent`` parameter (see :func:`provide_agent`)."""


class ToolsController(Controller):
    """Agent tools: search, read by path, usage feedback, capture, graph queries."""

    path = "/v1/tools"
    tags = ["agent tools"]
    dependencies = {"agent": Provide(provide_agent, sync_to_thread=False)}

    @post(
        "/memory_search",
        sync_to_thread=True,
        status_code=HTTP_200_OK,
        responses=error_responses(400, 403, 413),
    )
    def memory_search(
        self,
        data: JSONBody[MemorySearchIn],
        service: Service,
        agent: Agent,
        caller: CallerDep,
    ) -> MemorySearchOut:
        """Hybrid search, logged for feedback; OpenClaw's ``memory_search``.

        Returns up to ``maxResults`` hits with fused ``score`` >= ``minScore``
        (both in [0, 1], higher better), each with a virtual ``path`` that
        ``memory_get`` resolves. When the store or the embedding model is
        unavailable the answer is still 200: ``{results: [], disabled: true,
        unavailable: true, error, warning, action}``.

        Raises:
            InvalidInput: 400, empty query, ``maxResults`` below 1, unknown
                ``corpus`` or ``citations``.
            TooLarge: 413, query over ``max_content_chars``.
        """
        answer = tools.memory_search(service, data, owner=agent, learner=caller.learner)
        return msgspec.convert(answer, MemorySearchOut)

    @post(
        "/memory_get",
        sync_to_thread=True,
        status_code=HTTP_200_OK,
        responses=error_responses(400, 403),
    )
    def memory_get(
        self,
        data: JSONBody[MemoryGetIn],
        service: Service,
        agent: Agent,
    ) -> MemoryGetOut:
        """Text at a virtual path, ``lines`` lines from line ``from``; OpenClaw's ``memory_get``.

        ``memory/<id>.md`` is a memory's text; a document path is the document
        reassembled from its chunks. At most 120 lines (or ``lines``) and
        12,000 characters; ``truncated`` and ``nextFrom`` say where more
        follows. An unknown or invisible path gives ``{status: "not_found",
        text: "", path}``; a failed store ``status: "error"``.

        Raises:
            InvalidInput: 400, ``from`` or ``lines`` below 1, unknown ``corpus``.
        """
        return msgspec.convert(tools.memory_get(service, data, owner=agent), MemoryGetOut)

    @post(
        "/memory_feedback",
        sync_to_thread=True,
        status_code=HTTP_200_OK,
        responses=error_responses(400, 403, 404, 409, 503),
    )
    def memory_feedback(
        self,
        data: JSONBody[MemoryFeedbackIn],
        service: Service,
        agent: Agent,
        caller: CallerDep,
    ) -> MemoryFeedbackOut:
        """Report which result paths of a ``memory_search`` the agent used.

        The results with those paths are reinforced, the others penalised
        (the learned layer). Paths not among the results are ignored and
        listed in ``ignoredPaths``; ``usedPaths: []`` means nothing helped.

        Raises:
            NotFound: 404, unknown ``retrievalId`` (or another agent's).
            InvalidInput: 400, paths given and none among the results.
            Conflict: 409, the retrieval already has feedback with other paths.
        """
        answer = tools.memory_feedback(service, data, owner=agent, learner=caller.learner)
        return msgspec.convert(answer, MemoryFeedbackOut)

    @post(
        "/memory_capture",
        sync_to_thread=True,
        status_code=HTTP_200_OK,
        responses=error_responses(400, 403, 413, 503),
    )
    def memory_capture(
        self,
        data: JSONBody[MemoryCaptureIn],
        service: Service,
        agent: Agent,
    ) -> MemoryCaptureOut:
        """Store a fact for the agent (``shared`` with no agent); the plugin's ``memory_capture``.

        Idempotent: the same text again answers ``status: "exists"`` with the
        same ``memoryId``.

        Raises:
            InvalidInput: 400, empty content or a bad tag.
            TooLarge: 413, content over ``max_content_chars``.
            StoreUnavailable: 503, the memory could not be stored.
        """
        return msgspec.convert(tools.memory_capture(service, data, owner=agent), MemoryCaptureOut)

    @post(
        "/memory_graph",
        sync_to_thread=True,
        status_code=HTTP_200_OK,
        responses=error_responses(400, 403, 404, 413),
    )
    def memory_graph(
        self,
        data: JSONBody[MemoryGraphIn],
        service: Service,
        agent: Agent,
    ) -> MemoryGraphOut:
        """Graph queries for agents (the MCP ``memory_graph`` tool).

        Neighbours, intersection, search near a memory.

        The agent sees the graph as ``GET /v1/memories/{id}/neighbors`` does:
        another owner's memory is never listed, counted or walked through.

        Raises:
            InvalidInput: 400, an unknown operation, no ids, bad steps, types
                or block, search without a query, ``maxResults`` below 1.
            NotFound: 404, an id missing or not visible to the agent.
            TooLarge: 413, a query over ``max_content_chars``.
        """
        answer = memory_graph(service, data, owner=agent)
        return msgspec.convert(answer, MemoryGraphOut)

    @post(
        "/memory_list",
        sync_to_thread=True,
        status_code=HTTP_200_OK,
        responses=error_responses(400, 403, 413),
    )
    def memory_list(
        self, data: JSONBody[MemoryListIn], service: Service, agent: Agent
    ) -> MemoryListOut:
        """A page of the agent's own facts and conversation turns, by id.

        Raises:
            InvalidInput: 400, no agent named, a bad ``limit`` or ``after``.
            TooLarge: 413, ``limit`` over ``max_k``.
        """
        return msgspec.convert(tool_manage.memory_list(service, data, owner=agent), MemoryListOut)

    @post(
        "/memory_update",
        sync_to_thread=True,
        status_code=HTTP_200_OK,
        responses=error_responses(400, 403, 413),
    )
    def memory_update(
        self, data: JSONBody[MemoryUpdateIn], service: Service, agent: Agent
    ) -> MemoryChangeOut:
        """Replace the text and/or tags of one of the agent's own memories, by path.

        Raises:
            InvalidInput: 400, no agent, a document path, nothing to change.
            TooLarge: 413, content over ``max_content_chars``.
        """
        answer = tool_manage.memory_update(service, data, owner=agent)
        return msgspec.convert(answer, MemoryChangeOut)

    @post(
        "/memory_delete",
        sync_to_thread=True,
        status_code=HTTP_200_OK,
        responses=error_responses(400, 403),
    )
    def memory_delete(
        self, data: JSONBody[MemoryDeleteIn], service: Service, agent: Agent
    ) -> MemoryChangeOut:
        """Delete one of the agent's own memories by path (and what was learned about it).

        Raises:
            InvalidInput: 400, no agent, or a document path.
        """
        answer = tool_manage.memory_delete(service, data, owner=agent)
        return msgspec.convert(answer, MemoryChangeOut)

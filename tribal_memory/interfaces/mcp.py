"""The MCP server: the memory tools for any MCP client.

``memory_search``, ``memory_get``, ``memory_feedback``, ``memory_capture``,
``memory_graph``, and ``memory_list``, ``memory_update`` and
``memory_delete`` (an agent correcting its own memories,
:mod:`tribal_memory.interfaces.tool_manage`).

Built on the official ``mcp`` SDK's low-level :class:`mcp.server.Server`
(input schemas generated from the arguments' Structs in
:mod:`tribal_memory.interfaces.tool_args`, results as JSON text plus
structured content).
The tools run against a :class:`ToolBackend`: :class:`ServiceBackend` calls
:mod:`tribal_memory.interfaces.tools` on an open :class:`MemoryService` in this process;
:class:`HttpBackend` forwards each call to a running tribal-memory server
(``POST /v1/tools/<name>``). Either way the
answers have the shapes documented in :mod:`tribal_memory.interfaces.tools` (and
:mod:`tribal_memory.interfaces.graph_tool` for ``memory_graph``).

A failed call is an MCP tool error (``isError: true``) whose text is
``{"error": code, "detail": message}``; the server itself never stops on one.
Transports: stdio (:func:`serve_stdio`) and streamable HTTP at ``/mcp``
(:func:`serve_http`).
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Mapping
from typing import Any, Protocol, cast

import anyio.to_thread
import httpx
import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.server.transport_security import TransportSecuritySettings

from tribal_memory import __version__
from tribal_memory.base.config import Settings, auth_enabled
from tribal_memory.base.errors import (
    Conflict,
    InvalidInput,
    NotFound,
    StoreUnavailable,
    TooLarge,
    TribalError,
)
from tribal_memory.interfaces import tool_manage, tools
from tribal_memory.interfaces.graph_tool import memory_graph
from tribal_memory.interfaces.mcp_stdio import stdin_lines
from tribal_memory.interfaces.tool_args import (
    MemoryCaptureIn,
    MemoryDeleteIn,
    MemoryFeedbackIn,
    MemoryGetIn,
    MemoryGraphIn,
    MemoryListIn,
    MemorySearchIn,
    MemoryUpdateIn,
    input_schema,
    parse,
)
from tribal_memory.service.memory_service import MemoryService

logger = logging.getLogger("tribal_memory.interfaces.mcp")

SERVER_NAME = "tribal-memory"
MCP_PATH = "/mcp"
"""Path of the streamable HTTP endpoint."""
INSTRUCTIONS = (
    "Long-term memory shared by agents. Call memory_search before answering questions about "
    "prior work, decisions, people, preferences or facts; read more with memory_get; after "
    "answering, call memory_feedback with the paths you used so retrieval improves; store new "
    "durable facts with memory_capture; explore related memories with memory_graph; list, "
    "correct and forget your own memories with memory_list, memory_update and memory_delete."
)

GRAPH_TOOL = "memory_graph"
"""The graph tool (:mod:`tribal_memory.interfaces.graph_tool`), served beside the slot tools."""

TOOLS: tuple[types.Tool, ...] = (
    types.Tool(
        name="memory_search",
        description=(
            "Search long-term memory (hybrid semantic + keyword) before answering questions "
            "about prior work, decisions, dates, people, preferences or todos. Returns the best "
            "snippets with a path and line range, a score in [0, 1] and a retrievalId to pass "
            "to memory_feedback. If the answer has disabled=true, memory is unavailable: say so."
        ),
        input_schema=input_schema(MemorySearchIn),
    ),
    types.Tool(
        name="memory_get",
        description=(
            "Read a memory or document by the path memory_search returned, optionally only "
            "some lines (from: first line, 1-based; lines: how many, default 120), to keep "
            "context small. status=ok means the text was read (truncated=true: continue from "
            "nextFrom); status=not_found means no such path."
        ),
        input_schema=input_schema(MemoryGetIn),
    ),
    types.Tool(
        name="memory_feedback",
        description=(
            "After answering, report which memory_search results you actually used: their "
            "citations (path#La-Lb, as in their Source: lines), so only the sections you used "
            "are credited; [] if none helped. Memory learns from this and answers better next "
            "time."
        ),
        input_schema=input_schema(MemoryFeedbackIn),
    ),
    types.Tool(
        name="memory_capture",
        description=(
            "Store a durable fact, decision or preference in long-term memory (one short, "
            "self-contained statement). Storing the same text again changes nothing."
        ),
        input_schema=input_schema(MemoryCaptureIn),
    ),
    types.Tool(
        name="memory_graph",
        description=(
            "Query the graph of related memories. operation=neighbors: memories within steps "
            "hops of ids[0]; intersection: memories within steps hops of every one of ids (what "
            "connects them); search: hybrid search for query restricted to ids[0] and its "
            "neighbourhood. Narrow the walk with types (relation types to follow) and block "
            "(relation types or memory kinds never passed through)."
        ),
        input_schema=input_schema(MemoryGraphIn),
    ),
    types.Tool(
        name="memory_list",
        description=(
            "List your own stored memories (captured facts and conversation turns; not "
            "documents): path, text, tags, dates, newest pages via after=nextAfter. Needs an "
            "agent (--agent)."
        ),
        input_schema=input_schema(MemoryListIn),
    ),
    types.Tool(
        name="memory_update",
        description=(
            "Correct one of your own memories by its path (memory/<id>.md): new content "
            "and/or tags. New content gives it a new path, named in the answer. Documents "
            "change by editing the file and ingesting it again."
        ),
        input_schema=input_schema(MemoryUpdateIn),
    ),
    types.Tool(
        name="memory_delete",
        description=(
            "Forget one of your own memories by its path (memory/<id>.md), e.g. when it is "
            "wrong or the user asks. status=not_found: no memory of yours at that path."
        ),
        input_schema=input_schema(MemoryDeleteIn),
    ),
)
"""The tools listed to clients: descriptions, and input schemas from the arguments' Structs."""
TOOL_NAMES: tuple[str, ...] = tuple(tool.name for tool in TOOLS)
"""The names of :data:`TOOLS`, each served at ``POST /v1/tools/<name>`` too."""


class ToolBackend(Protocol):
    """Runs one tool call; the MCP server calls it from a worker thread."""

    def call(self, name: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """The tool's answer (a JSON-able dict shaped as :mod:`tribal_memory.interfaces.tools`).

        Raises:
            TribalError: the call failed (its ``code`` and ``detail`` reach the client).
        """
        ...

    def close(self) -> None:
        """Release what the backend holds."""
        ...


class ServiceBackend:
    """Tools over a :class:`MemoryService` in this process.

    Args:
        service: An open service (closed by the caller, not by :meth:`close`).
        owner: The agent the tools act for (None: every owner; capture as ``shared``).
    """

    def __init__(self, service: MemoryService, owner: str | None) -> None:
        self.service = service
        self.owner = owner

    def call(self, name: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """See :meth:`ToolBackend.call`."""
        if name == GRAPH_TOOL:
            return memory_graph(self.service, parse(MemoryGraphIn, arguments), owner=self.owner)
        if name in tool_manage.MANAGE_TOOL_NAMES:
            return tool_manage.call_tool(self.service, name, arguments, owner=self.owner)
        return tools.call_tool(self.service, name, arguments, owner=self.owner)

    def close(self) -> None:
        """Nothing to release: the service belongs to the caller."""


_ERRORS: dict[int, type[TribalError]] = {
    400: InvalidInput,
    404: NotFound,
    409: Conflict,
    413: TooLarge,
    503: StoreUnavailable,
}


class HttpBackend:
    """Tools forwarded to a running tribal-memory server.

    Args:
        base_url: The server, e.g. ``http://127.0.0.1:18960``.
        agent: Sent as ``X-Agent-Id`` (the owner the tools act for).
        api_key: Sent as ``Authorization: Bearer <key>`` when given.
        timeout_s: Longest wait for one call, in seconds.
        transport: An httpx transport to use instead of the network (tests).
    """

    def __init__(
        self,
        base_url: str,
        *,
        agent: str | None = None,
        api_key: str | None = None,
        timeout_s: float = 60.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        headers = {"user-agent": f"tribal-memory-mcp/{__version__}"}
        if agent:
            headers["x-agent-id"] = agent
        if api_key:
            headers["authorization"] = f"Bearer {api_key}"
        self.base_url = base_url.rstrip("/")
        self.agent = agent
        self._client = httpx.Client(
            base_url=self.base_url, headers=headers, timeout=timeout_s, transport=transport
        )

    def call(self, name: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """See :meth:`ToolBackend.call`.

        Raises:
            StoreUnavailable: the server cannot be reached or did not answer JSON.
            TribalError: the server's error (by status: InvalidInput, NotFound, ...).
        """
        if name not in TOOL_NAMES:
            raise InvalidInput(f"unknown tool {name!r}; known: {', '.join(TOOL_NAMES)}")
        return self._post(f"/v1/tools/{name}", dict(arguments))

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        try:
            response = self._client.post(path, json=body)
        except httpx.HTTPError as exc:
            raise StoreUnavailable(f"cannot reach tribal-memory at {self.base_url}: {exc}") from exc
        try:
            answer = response.json()
        except ValueError as exc:
            raise StoreUnavailable(
                f"tribal-memory at {self.base_url} answered {response.status_code} without JSON"
            ) from exc
        if response.is_error or not isinstance(answer, dict):
            detail = answer.get("detail") if isinstance(answer, dict) else None
            error = _ERRORS.get(response.status_code, TribalError)
            raise error(str(detail or f"HTTP {response.status_code} from {self.base_url}{path}"))
        return answer

    def close(self) -> None:
        """Close the HTTP connection pool."""
        self._client.close()


def _text_result(payload: dict[str, Any], *, is_error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(text=json.dumps(payload, ensure_ascii=False))],
        structured_content=None if is_error else payload,
        is_error=is_error,
    )


def build_server(backend: ToolBackend) -> Server[Any]:
    """The MCP server serving :data:`TOOLS` through ``backend``."""

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=list(TOOLS))

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        run = functools.partial(backend.call, params.name, params.arguments or {})
        try:
            answer = await anyio.to_thread.run_sync(run)
        except TribalError as exc:
            return _text_result({"error": exc.code, "detail": exc.detail}, is_error=True)
        # A bug must not end the session: report it as a tool error, log the traceback.
        except Exception:  # noqa: BLE001
            logger.exception("tool %s failed", params.name)
            return _text_result(
                {"error": "internal_error", "detail": "internal error (see the server log)"},
                is_error=True,
            )
        return _text_result(answer)

    return Server(
        SERVER_NAME,
        version=__version__,
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


async def serve_stdio(backend: ToolBackend) -> None:
    """Serve MCP over stdin/stdout until the client closes the stream.

    Stdin is read through :class:`~tribal_memory.interfaces.mcp_stdio.GuardedLines`,
    so a request the SDK cannot parse (nested too deeply) is answered with a
    JSON-RPC error instead of never. (Passing stdin leaves fd 0 where it is:
    the SDK then does not point it at the null device; nothing here reads it.)
    """
    server = build_server(backend)
    lines = stdin_lines()
    # The SDK types stdin as anyio's file; it only iterates over its lines.
    async with stdio_server(stdin=cast(Any, lines)) as (read_stream, write_stream):
        lines.attach(write_stream)
        await server.run(read_stream, write_stream, server.create_initialization_options())


def transport_security(
    allowed_hosts: frozenset[str] | None, cors_origins: tuple[str, ...] = ()
) -> TransportSecuritySettings:
    """The SDK's DNS-rebinding protection for these host names (any port).

    The SDK turns its check on by itself only for a bind to exactly
    ``127.0.0.1``, ``localhost`` or ``::1``; this passes it for every bind,
    e.g. ``127.0.0.2``, with the same names the HTTP API answers for
    (``Settings.host_allow_list``).

    Args:
        allowed_hosts: Lower-case host names; None: any host (protection off,
            as for a bind to all interfaces).
        cors_origins: Web origins allowed besides ``http(s)://<allowed host>[:port]``.

    Returns:
        Settings under which another ``Host`` gets 421 and another ``Origin`` 403.
    """
    if allowed_hosts is None:
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    names = sorted(f"[{h}]" if ":" in h else h for h in allowed_hosts)
    origins = [
        f"{scheme}://{n}{port}"
        for n in names
        for scheme in ("http", "https")
        for port in ("", ":*")
    ]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[*names, *(f"{n}:*" for n in names)],
        allowed_origins=[*origins, *cors_origins],
    )


def http_security(settings: Settings, host: str) -> TransportSecuritySettings:
    """The Host/Origin check of MCP over HTTP bound to ``host`` (see :func:`transport_security`).

    The MCP endpoint checks no API keys, so it binds only where keys would
    not be required: loopback, or anywhere with ``TRIBAL_AUTH=off``.

    Raises:
        InvalidInput: ``host`` is not loopback and ``settings.auth`` is not off.
    """
    if auth_enabled(settings.auth, host):
        raise InvalidInput(
            f"MCP over HTTP checks no API keys, so it binds only to loopback, not {host!r} "
            "(TRIBAL_AUTH=off allows it)"
        )
    bound = settings.model_copy(update={"host": host})
    return transport_security(bound.host_allow_list, bound.cors_origins)


async def serve_http(
    backend: ToolBackend, *, host: str, port: int, security: TransportSecuritySettings
) -> None:
    """Serve MCP over streamable HTTP at ``http://host:port/mcp`` until interrupted.

    ``security``: the Host/Origin check (see :func:`transport_security`).
    """
    import uvicorn

    app = build_server(backend).streamable_http_app(
        streamable_http_path=MCP_PATH, host=host, transport_security=security
    )
    config = uvicorn.Config(app, host=host, port=port, log_level="info")
    await uvicorn.Server(config).serve()

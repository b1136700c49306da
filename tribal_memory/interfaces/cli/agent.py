"""Agent integrations: ``mcp`` (serve the memory tools over MCP) and ``context``.

``tribal-memory mcp`` serves ``memory_search``, ``memory_get``,
``memory_feedback`` and ``memory_capture`` over stdio (what MCP clients
spawn) or streamable HTTP (``--transport http``, at ``/mcp``). It opens the
data dir in this process, or with ``--url`` forwards every call to a running
``tribal-memory serve``. ``tribal-memory context PROMPT`` prints the
``<knowledge-graph>`` block ``POST /v1/context`` would return.
"""

from __future__ import annotations

import sys
from enum import StrEnum
from typing import Annotated

import anyio
import typer

from tribal_memory.base.config import auth_enabled
from tribal_memory.base.errors import InvalidInput
from tribal_memory.interfaces.cli.root import DataDirOption, JsonOption, _Run, app

DEFAULT_MCP_PORT = 18961
"""Port of ``mcp --transport http`` when ``--port`` is not given."""


class Transport(StrEnum):
    """MCP transports: stdio, or streamable HTTP."""

    stdio = "stdio"
    http = "http"


AgentOption = Annotated[
    str | None,
    typer.Option(
        "--agent", "-a", help="The agent (owner) the tools act for; default: every owner."
    ),
]


@app.command()
def mcp(
    ctx: typer.Context,
    url: Annotated[
        str | None,
        typer.Option(help="Forward to a running server (e.g. http://127.0.0.1:18960)."),
    ] = None,
    api_key: Annotated[
        str | None,
        typer.Option(
            envvar="TRIBAL_MCP_API_KEY",
            help="With --url: sent as 'Authorization: Bearer KEY'.",
            show_envvar=True,
        ),
    ] = None,
    agent: AgentOption = None,
    transport: Annotated[
        Transport, typer.Option(help="stdio, or streamable HTTP at /mcp.")
    ] = Transport.stdio,
    host: Annotated[str, typer.Option(help="With --transport http: interface.")] = "127.0.0.1",
    port: Annotated[
        int, typer.Option(min=0, max=65535, help="With --transport http: TCP port.")
    ] = DEFAULT_MCP_PORT,
    data_dir: DataDirOption = None,
) -> None:
    """Serve memory_search, memory_get, memory_feedback and memory_capture over MCP.

    The tools act for ``--agent`` (all owners without it). Over HTTP the MCP
    endpoint checks no API keys, so it refuses a non-loopback ``--host``
    unless ``TRIBAL_AUTH=off``.
    """
    from tribal_memory.interfaces.mcp import (
        HttpBackend,
        ServiceBackend,
        ToolBackend,
        serve_http,
        serve_stdio,
        transport_security,
    )

    run = _Run(ctx, data_dir, None)
    owner = agent.strip() if agent and agent.strip() else None
    if transport is Transport.http and auth_enabled(run.settings().auth, host):
        # The MCP endpoint checks no API keys: it must not be reachable from elsewhere.
        raise InvalidInput(
            f"MCP over HTTP checks no API keys, so it binds only to loopback, not {host!r} "
            "(TRIBAL_AUTH=off allows it)"
        )

    settings = run.settings().model_copy(update={"host": host})
    security = transport_security(settings.host_allow_list, settings.cors_origins)

    def serve(backend: ToolBackend) -> None:
        try:
            if transport is Transport.http:
                anyio.run(lambda: serve_http(backend, host=host, port=port, security=security))
            else:
                anyio.run(serve_stdio, backend)
        except KeyboardInterrupt:
            pass

    if url is not None:
        if run.data_dir is not None:
            raise InvalidInput("--url and --data-dir exclude each other")
        http_backend = HttpBackend(url, agent=owner, api_key=api_key)
        try:
            serve(http_backend)
        finally:
            http_backend.close()
        return
    with run.service() as service:
        serve(ServiceBackend(service, owner))


@app.command()
def context(
    ctx: typer.Context,
    prompt: Annotated[str, typer.Argument(help="The agent's prompt; - reads it from stdin.")],
    agent: AgentOption = None,
    top_k: Annotated[int, typer.Option("--top-k", "-k", min=1, help="Most hits.")] = 3,
    min_score: Annotated[
        float, typer.Option(min=0.0, max=1.0, help="Least fused score of a hit.")
    ] = 0.3,
    neighbors: Annotated[
        bool, typer.Option("--neighbors/--no-neighbors", help="Add related notes.")
    ] = True,
    max_tokens: Annotated[
        int | None,
        typer.Option(min=1, help="Token budget (default: TRIBAL_CONTEXT_MAX_TOKENS)."),
    ] = None,
    data_dir: DataDirOption = None,
    json_out: JsonOption = None,
) -> None:
    """Print the <knowledge-graph> block for PROMPT (empty when skipped or nothing matched)."""
    from tribal_memory.interfaces.context import build_context, context_json

    run = _Run(ctx, data_dir, json_out)
    text = sys.stdin.read() if prompt == "-" else prompt
    with run.service() as service:
        built = build_context(
            service,
            text,
            owner=agent.strip() if agent and agent.strip() else None,
            top_k=top_k,
            min_score=min_score,
            include_neighbors=neighbors,
            max_tokens=max_tokens,
        )
    if run.json:
        run.emit(context_json(built))
        return
    if built.context:
        run.out.print(built.context)
    else:
        run.err.print(f"no context: {built.skipped_reason}")
    if built.retrieval_id:
        run.err.print(f"retrieval id: {built.retrieval_id}")

"""Agent integrations: ``mcp`` (serve the memory tools over MCP) and ``context``.

``tribal-memory mcp`` serves ``memory_search``, ``memory_get``,
``memory_feedback`` and ``memory_capture`` over stdio (what MCP clients
spawn) or streamable HTTP (``--transport http``, at ``/mcp``). It opens the
data dir in this process, or with ``--url`` forwards every call to a running
``tribal-memory serve``. ``tribal-memory context PROMPT`` prints the
``<knowledge-graph>`` block ``POST /v1/context`` would return.
"""

from __future__ import annotations

import contextlib
import sys
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated

import anyio
import typer

from tribal_memory.base.errors import InvalidInput
from tribal_memory.interfaces.cli.options import DataDirOption, agent_owner
from tribal_memory.interfaces.cli.output import Output
from tribal_memory.interfaces.cli.root import app
from tribal_memory.interfaces.cli.run import Run, with_run
from tribal_memory.retrieval.calibration import DEFAULT_MIN_SCORE

if TYPE_CHECKING:
    from mcp.server.transport_security import TransportSecuritySettings

    from tribal_memory.interfaces.mcp import ToolBackend

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
    from tribal_memory.interfaces.mcp import HttpBackend, ServiceBackend, http_security

    owner = agent_owner(agent)
    with Run(ctx, data_dir, None) as run:
        settings = run.settings()  # read with --url too: a bad TRIBAL_* setting is an error
        url = url or run.url  # `tribal-memory --url URL mcp` too
        security = http_security(settings, host) if transport is Transport.http else None
        if url is None:
            from tribal_memory.interfaces.server_process import prepare_server_process

            prepare_server_process(settings)  # before the service starts its threads
            _serve(ServiceBackend(run.service(), owner), host, port, security)
            return
        if run.data_dir is not None:
            raise InvalidInput("--url and --data-dir exclude each other")
        http_backend = HttpBackend(url, agent=owner, api_key=api_key)
        try:
            _serve(http_backend, host, port, security)
        finally:
            http_backend.close()


def _serve(
    backend: ToolBackend, host: str, port: int, security: TransportSecuritySettings | None
) -> None:
    """Serve the tools over stdio, or over HTTP (with ``security``) at host:port, until Ctrl-C."""
    from tribal_memory.interfaces.mcp import serve_http, serve_stdio

    with contextlib.suppress(KeyboardInterrupt):
        if security is None:
            anyio.run(serve_stdio, backend)
        else:
            anyio.run(lambda: serve_http(backend, host=host, port=port, security=security))


@app.command()
@with_run
def context(
    run: Run,
    prompt: Annotated[str, typer.Argument(help="The agent's prompt; - reads it from stdin.")],
    agent: AgentOption = None,
    top_k: Annotated[int, typer.Option("--top-k", "-k", min=1, help="Most hits.")] = 3,
    min_score: Annotated[
        float, typer.Option(min=0.0, max=1.0, help="Least calibrated score of a hit.")
    ] = DEFAULT_MIN_SCORE,
    neighbors: Annotated[
        bool, typer.Option("--neighbors/--no-neighbors", help="Add related notes.")
    ] = True,
    max_tokens: Annotated[
        int | None,
        typer.Option(min=1, help="Token budget (default: TRIBAL_CONTEXT_MAX_TOKENS)."),
    ] = None,
) -> None:
    """Print the <knowledge-graph> block for PROMPT (empty when skipped or nothing matched)."""
    from tribal_memory.interfaces.context import build_context, context_json

    text = sys.stdin.read() if prompt == "-" else prompt
    built = build_context(
        run.service(),
        text,
        owner=agent_owner(agent),
        top_k=top_k,
        min_score=min_score,
        include_neighbors=neighbors,
        max_tokens=max_tokens,
    )
    run.show(Output([context_json(built)], [built.context] if built.context else []))
    if run.json:
        return
    if not built.context:
        run.err.print(f"no context: {built.skipped_reason}")
    if built.retrieval_id:
        run.err.print(f"retrieval id: {built.retrieval_id}")

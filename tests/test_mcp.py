"""``tribal-memory mcp`` driven by the official MCP SDK client: stdio, streamable HTTP, ``--url``.

Every test starts real processes (``python -m tribal_memory ...``) on
127.0.0.1 and stops them; the in-process ones load the embedding model.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TextIO

import anyio
import httpx
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from tribal_memory.base.config import Settings
from tribal_memory.bench.server_process import ServerProcess, ServerStartError, child_env, free_port
from tribal_memory.embeddings.fastembed import FastEmbedEmbedder
from tribal_memory.interfaces.mcp import MCP_PATH, ServiceBackend, build_server, transport_security
from tribal_memory.service.memory_service import MemoryService

STARTUP_TIMEOUT_S = 90.0
TOOL_NAMES = {"memory_search", "memory_get", "memory_feedback", "memory_capture", "memory_graph",
              "memory_list", "memory_update", "memory_delete"}  # fmt: skip
FACTS = (
    "We chose PostgreSQL for the billing database",
    "The billing database is backed up nightly at 02:00 UTC",
    "Alice prefers green tea over coffee",
)

pytestmark = pytest.mark.slow


def _env(**extra: str) -> dict[str, str]:
    """This environment, with the package under test importable in the child."""
    return child_env(extra)


def _start(args: list[str], port: int, log: Path, env: dict[str, str]) -> ServerProcess:
    """A process listening on ``port`` once this returns (fails the test with its log if not)."""
    process = ServerProcess(
        args,
        log_path=log,
        port=port,
        env=env,
        health_path=None,
        startup_timeout_s=STARTUP_TIMEOUT_S,
    )
    try:
        return process.start()
    except ServerStartError as exc:
        pytest.fail(f"{exc.detail}:\n{process.log_text()}")


@asynccontextmanager
async def _stdio_session(
    params: StdioServerParameters, errlog: TextIO = sys.stderr
) -> AsyncIterator[ClientSession]:
    """A client session with a server process spawned over stdio (the SDK's client)."""
    async with (
        stdio_client(params, errlog=errlog) as (read, write),
        ClientSession(read, write) as session,
    ):
        yield session


@asynccontextmanager
async def _http_session(url: str) -> AsyncIterator[ClientSession]:
    """A client session over streamable HTTP (the SDK's client)."""
    async with (
        streamable_http_client(url) as (read, write),
        ClientSession(read, write) as session,
    ):
        yield session


def _answer(result: Any) -> dict[str, Any]:
    """A successful tool result's JSON, checked to equal its structured content."""
    assert result.is_error is False, result.content
    payload = json.loads(result.content[0].text)
    assert result.structured_content == payload
    assert isinstance(payload, dict)
    return payload


async def _exercise(session: ClientSession, *, agent: bool = True) -> dict[str, Any]:
    """List and call the tools as an agent would; returns what was stored and found.

    ``agent``: the server acts for an agent (``--agent``), so memory_list,
    memory_update and memory_delete work; without one they are tool errors.
    """
    await session.initialize()
    listed = await session.list_tools()
    assert {tool.name for tool in listed.tools} == TOOL_NAMES
    for tool in listed.tools:
        assert tool.description and tool.input_schema["type"] == "object"
        assert tool.input_schema.get("required") or tool.name == "memory_list"

    captured = [_answer(await session.call_tool("memory_capture", {"content": f})) for f in FACTS]
    assert all(c["status"] == "created" for c in captured)
    assert captured[0]["path"] == f"memory/{captured[0]['memoryId']}.md"
    again = _answer(await session.call_tool("memory_capture", {"content": FACTS[0]}))
    assert again["status"] == "exists" and again["memoryId"] == captured[0]["memoryId"]

    found = _answer(
        await session.call_tool(
            "memory_search", {"query": "which database is billing on?", "maxResults": 2.0}
        )
    )
    assert found["provider"] == "tribal-memory" and 0 < len(found["results"]) <= 2
    top = found["results"][0]
    assert top["path"] == captured[0]["path"] and 0.35 <= top["score"] <= 1.0
    assert top["citation"] == f"{top['path']}#L1"
    assert top["snippet"] == f"{FACTS[0]}\n\nSource: {top['path']}#L1"

    read = _answer(await session.call_tool("memory_get", {"path": top["path"]}))
    assert read == {"status": "ok", "text": FACTS[0], "path": top["path"], "from": 1, "lines": 1}
    missing = _answer(await session.call_tool("memory_get", {"path": "memory/none.md"}))
    assert missing == {"status": "not_found", "text": "", "path": "memory/none.md"}

    fed = _answer(
        await session.call_tool(
            "memory_feedback",
            {"retrievalId": found["retrievalId"], "usedPaths": [top["path"]]},
        )
    )
    assert fed["usedIds"] == [captured[0]["memoryId"]] and fed["duplicate"] is False

    # Errors are tool errors, and the server keeps serving after them.
    bad = await session.call_tool("memory_search", {"maxResults": 3})
    assert bad.is_error is True
    assert json.loads(bad.content[0].text)["error"] in ("invalid_input", "invalid_request")
    unknown = await session.call_tool(
        "memory_feedback", {"retrievalId": "00000000-0000-4000-8000-000000000000", "usedPaths": []}
    )
    assert unknown.is_error is True and json.loads(unknown.content[0].text)["error"] == "not_found"
    assert (await session.call_tool("no_such_tool", {})).is_error is True
    still = _answer(await session.call_tool("memory_get", {"path": top["path"]}))
    assert still["text"] == FACTS[0]
    if agent:
        await _correct(session, captured)
    else:
        anonymous = await session.call_tool("memory_list", {})
        assert anonymous.is_error is True and "--agent" in anonymous.content[0].text
    return {"captured": captured, "search": found}


async def _correct(session: ClientSession, captured: list[dict[str, Any]]) -> None:
    """memory_list, memory_update, memory_delete on the agent's own memories."""
    listed = _answer(await session.call_tool("memory_list", {"limit": 10.0}))
    assert {m["path"] for m in listed["memories"]} == {c["path"] for c in captured}
    assert listed["nextAfter"] is None
    tea = captured[2]
    fixed = _answer(
        await session.call_tool(
            "memory_update",
            {"path": tea["path"], "content": "Alice prefers jasmine tea", "tags": ["drink"]},
        )
    )
    assert fixed["status"] == "updated" and fixed["path"] == f"memory/{fixed['memoryId']}.md"
    read = _answer(await session.call_tool("memory_get", {"path": fixed["path"]}))
    assert read["text"] == "Alice prefers jasmine tea"
    gone = _answer(await session.call_tool("memory_delete", {"path": fixed["path"]}))
    assert gone == {"status": "deleted", "path": fixed["path"], "memoryId": fixed["memoryId"]}
    again = _answer(await session.call_tool("memory_delete", {"path": fixed["path"]}))
    assert again["status"] == "not_found"
    document = await session.call_tool("memory_delete", {"path": "MEMORY.md"})
    assert document.is_error is True
    assert json.loads(document.content[0].text)["error"] == "invalid_input"
    left = _answer(await session.call_tool("memory_list", {}))
    assert len(left["memories"]) == len(captured) - 1


def test_stdio_in_process(tmp_path: Path) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "tribal_memory", "mcp", "--data-dir", str(tmp_path / "data"), "--agent", "ann"],
        env=_env(),
    )

    async def main() -> None:
        with (tmp_path / "stderr.log").open("w") as errlog:
            async with _stdio_session(params, errlog) as session:
                await _exercise(session)

    anyio.run(main)
    assert "Traceback" not in (tmp_path / "stderr.log").read_text()


def test_streamable_http_in_process(tmp_path: Path) -> None:
    port = free_port()
    args = ["-m", "tribal_memory", "mcp", "--transport", "http", "--port", str(port)]
    args += ["--data-dir", str(tmp_path / "data")]
    log = tmp_path / "mcp.log"
    process = _start(args, port, log, _env())

    async def main() -> None:
        async with _http_session(f"http://127.0.0.1:{port}/mcp") as session:
            done = await _exercise(session, agent=False)
        # Without --agent the facts are shared.
        assert done["captured"]

    try:
        anyio.run(main)
    finally:
        process.stop()
    assert "Traceback" not in log.read_text()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    """Base URL of a ``tribal_memory.interfaces.api.server`` process over a temp data dir."""
    port = free_port()
    env = _env(
        TRIBAL_DATA_DIR=str(tmp_path / "server-data"),
        TRIBAL_PORT=str(port),
        TRIBAL_HOST="127.0.0.1",
    )
    log = tmp_path / "server.log"
    process = _start(["-m", "tribal_memory.interfaces.api.server"], port, log, env)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        process.stop()
    assert "Traceback" not in log.read_text()


def test_url_mode_forwards_to_a_running_server(tmp_path: Path, server: str) -> None:
    args = ["-m", "tribal_memory", "mcp", "--url", server, "--agent", "ann"]
    args += ["--api-key", "not-checked-yet"]
    params = StdioServerParameters(command=sys.executable, args=args, env=_env())

    async def main() -> dict[str, Any]:
        async with _stdio_session(params) as session:
            return await _exercise(session)

    done = anyio.run(main)
    memory_id = done["captured"][0]["memoryId"]
    with httpx.Client(base_url=server, timeout=30.0) as client:
        stored = client.get(f"/v1/memories/{memory_id}").json()
        assert stored["owner"] == "ann" and stored["content"] == FACTS[0]
        hidden = client.post(
            "/v1/tools/memory_get",
            json={"path": done["captured"][0]["path"]},
            headers={"X-Agent-Id": "someone-else"},
        ).json()
        assert hidden["text"] == ""
        stats = client.get("/v1/stats/retrieval", params={"owner": "ann"}).json()
        assert stats["overall"]["with_feedback"] == 1


def test_url_mode_reports_an_unreachable_server_as_tool_errors() -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "tribal_memory", "mcp", "--url", f"http://127.0.0.1:{free_port()}"],
        env=_env(),
    )

    async def main() -> None:
        async with _stdio_session(params) as session:
            await session.initialize()
            result = await session.call_tool("memory_search", {"query": "anything"})
            assert result.is_error is True
            error = json.loads(result.content[0].text)
            assert error["error"] == "store_unavailable" and "cannot reach" in error["detail"]

    anyio.run(main)


def test_http_transport_checks_host_and_origin_on_every_loopback_bind(
    tmp_path: Path, embedder: FastEmbedEmbedder
) -> None:
    """The SDK checks these only for 127.0.0.1/localhost/::1 by itself; 127.0.0.2 too now."""
    from starlette.testclient import TestClient

    settings = Settings(data_dir=tmp_path / "data", host="127.0.0.2")
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "probe", "version": "1"},
        },
    }
    headers = {"accept": "application/json, text/event-stream"}
    with MemoryService(settings, embedder=embedder) as service:
        app = build_server(ServiceBackend(service, None)).streamable_http_app(
            streamable_http_path=MCP_PATH,
            host=settings.host,
            transport_security=transport_security(settings.host_allow_list),
        )
        with TestClient(app, base_url="http://127.0.0.2:18961") as client:
            rebound = client.post(
                MCP_PATH, json=initialize, headers={**headers, "host": "evil.example"}
            )
            assert rebound.status_code == 421
            foreign = client.post(
                MCP_PATH, json=initialize, headers={**headers, "origin": "http://evil.example"}
            )
            assert foreign.status_code == 403
            own = client.post(
                MCP_PATH, json=initialize, headers={**headers, "origin": "http://127.0.0.2:18961"}
            )
            assert own.status_code == 200, own.text
    assert transport_security(None).enable_dns_rebinding_protection is False

"""Issue 26 item 13: MCP over stdio answers a request nested too deeply, as HTTP does.

Driven by the official MCP SDK client against ``python -m tribal_memory mcp``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

from tribal_memory.bench.server_process import child_env
from tribal_memory.interfaces.mcp_stdio import refusal, request_head

pytestmark = pytest.mark.slow

ANSWER_WITHIN_S = 120.0
"""Generous bound on one answer (the first call loads the embedding model)."""


def _nested(depth: int) -> Any:
    value: Any = "deep"
    for _ in range(depth):
        value = [value]
    return value


def test_a_call_nested_too_deeply_gets_a_json_rpc_error(tmp_path: Path) -> None:
    depth = 250  # the SDK's parser stops at 200; its client serialises up to about 255
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "tribal_memory", "mcp", "--data-dir", str(tmp_path / "data"), "--agent", "ann"],
        env=child_env({}),
    )
    errors: list[str] = []

    async def main() -> None:
        with (tmp_path / "stderr.log").open("w") as errlog:
            async with (
                stdio_client(params, errlog=errlog) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                with anyio.fail_after(ANSWER_WITHIN_S):
                    try:
                        await session.call_tool(
                            "memory_capture", {"content": "okapi", "tags": _nested(depth)}
                        )
                    except MCPError as exc:
                        errors.append(exc.error.message)
                # The session goes on: the next call is served.
                with anyio.fail_after(ANSWER_WITHIN_S):
                    result = await session.call_tool(
                        "memory_capture", {"content": "The okapi lives in the Ituri forest"}
                    )
                assert not result.is_error, result

    anyio.run(main)
    assert errors and "nested too deeply" in errors[0]
    assert "Traceback" not in (tmp_path / "stderr.log").read_text()


def test_the_request_id_is_found_past_any_parsers_depth_limit() -> None:
    deep = "[" * 100_000 + "]" * 100_000  # past Python's json recursion limit too
    line = (
        '{"jsonrpc": "2.0", "params": {"arguments": {"tags": ' + deep + ', "id": 1}}, '
        '"id": "call-7", "method": "tools/call"}'
    )
    assert request_head(line) == ("call-7", "tools/call")
    answer = refusal(line)
    assert answer is not None and answer.id == "call-7"
    assert refusal('{"jsonrpc": "2.0", "id": 1, "method": "ping"}') is None  # the SDK's
    assert refusal('{"jsonrpc": "2.0", "method": "x", "params": ' + deep + "}") is None  # no id

"""MCP over stdio where every request gets an answer, even one the SDK cannot parse.

The SDK's stdio transport parses each line with pydantic, whose JSON parser
stops at 200 levels of nesting; a line it cannot parse goes to the server as
an exception, and the server answers nothing, so the client waits forever
(a ``tools/call`` with ``tags`` nested 200 levels deep did). Over HTTP the
SDK answers such a body with a JSON-RPC error.

:class:`GuardedLines` stands between stdin and the SDK: a line that does not
parse as a JSON-RPC message but names a request (a top-level ``"method"``
and ``"id"``, found by :func:`request_head` without parsing the rest) is
answered with a JSON-RPC error (-32600, invalid request) carrying that id;
every other line goes to the SDK unchanged.
"""

from __future__ import annotations

import contextlib
import json
import re
import sys
from collections.abc import AsyncIterable, AsyncIterator
from io import TextIOWrapper
from typing import Any

import anyio
import mcp_types as types
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_DECODER = json.JSONDecoder()
_SPACE = " \t\r\n"
MAX_DETAIL_CHARS = 200
"""Longest error message sent back (a parser's message may quote the input)."""


def request_head(line: str) -> tuple[Any, Any]:
    """The top-level ``"id"`` and ``"method"`` values of a JSON object, however deep the rest.

    Scans ``line`` once (strings skipped, depth counted) and decodes only
    those two values, so a body nested past any parser's limit still gives
    them. Either is None when absent, not a scalar or unreadable.
    """
    found: dict[str, Any] = {}
    depth, i, expect_key = 0, 0, False
    while i < len(line):
        char = line[i]
        if char == '"':
            match = _STRING.match(line, i)
            if match is None:
                break
            i = match.end()
            if depth == 1 and expect_key:
                expect_key = False
                key = match.group()[1:-1]
                j = i
                while j < len(line) and line[j] in _SPACE + ":":
                    j += 1
                if key in ("id", "method") and j < len(line) and line[j] not in "[{":
                    with contextlib.suppress(ValueError):
                        found[key] = _DECODER.raw_decode(line, j)[0]
            continue
        if char in "{[":
            depth += 1
            expect_key = char == "{" and depth == 1
        elif char in "}]":
            depth -= 1
        elif char == "," and depth == 1:
            expect_key = True
        i += 1
    return found.get("id"), found.get("method")


def refusal(line: str) -> types.JSONRPCError | None:
    """The JSON-RPC error answering ``line``, or None when the SDK should have it.

    None for a line that parses as a JSON-RPC message (the SDK answers it),
    and for one that names no request id (there is nobody to answer).
    """
    try:
        types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except (ValidationError, ValueError) as exc:
        request_id, method = request_head(line)
        valid_id = isinstance(request_id, (str, int)) and not isinstance(request_id, bool)
        if not (valid_id and isinstance(method, str)):
            return None
        message = (
            "request is nested too deeply (JSON nesting limit)"
            if "recursion limit" in str(exc)
            else f"invalid request: {str(exc)[:MAX_DETAIL_CHARS]}"
        )
        error = types.ErrorData(code=types.INVALID_REQUEST, message=message)
        return types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error)
    return None


class GuardedLines:
    """Lines of ``lines`` for the SDK's stdio transport, minus those answered here.

    Args:
        lines: The text lines read (stdin).

    Call :meth:`attach` with the transport's write stream once it exists;
    a line to refuse waits for it.
    """

    def __init__(self, lines: AsyncIterable[str]) -> None:
        self._lines = lines
        self._out: Any = None
        self._ready = anyio.Event()

    def attach(self, write_stream: Any) -> None:
        """Send refusals through ``write_stream`` (the server's own answers go there too)."""
        self._out = write_stream
        self._ready.set()

    def __aiter__(self) -> AsyncIterator[str]:
        return self._guarded()

    async def _guarded(self) -> AsyncIterator[str]:
        async for line in self._lines:
            answer = refusal(line) if line.strip() else None
            if answer is None:
                yield line
                continue
            await self._ready.wait()
            try:
                await self._out.send(SessionMessage(answer))
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                return  # the server has stopped


class _UnownedText(TextIOWrapper):
    """UTF-8 text over a buffer this does not own (closing it detaches, as the SDK's)."""

    def close(self) -> None:
        with contextlib.suppress(ValueError):
            self.detach()


def stdin_lines() -> GuardedLines:
    """The process's stdin as :class:`GuardedLines` (undecodable bytes replaced)."""
    text = _UnownedText(sys.stdin.buffer, encoding="utf-8", errors="replace")
    return GuardedLines(anyio.wrap_file(text))

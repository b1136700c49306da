"""A scripted OpenAI-compatible chat model on loopback, for agent turns of a real OpenClaw.

Each ``POST /v1/chat/completions`` is recorded and answered, streaming or not,
by a fixed script over the conversation so far: while the turn has not
searched, call ``memory_search`` with the user's question (the last line
ending in ``?`` of the user messages; a question about "this conversation"
searches with ``scope: "session"``, one about "earlier conversations" with
``scope: "long-term"``); once it has, call ``memory_feedback``
with that search's ``retrievalId`` and the path of its first result; after
that, answer in text. So one agent turn is search, feedback, reply, the loop
an agent that follows the plugin's prompt runs. A turn with no question (a
statement) is answered in text at once.

Under OpenClaw's default Tool Search the memory tools are deferred: the
request offers ``tool_call`` instead of ``memory_search``, and the stub calls
them through it (``tool_call {id: <tool>, args}``), as a model following
OpenClaw's tool directory does; their answers come back wrapped, and
:func:`tool_answers` unwraps them.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODEL_ID = "stub-model"
FINAL_TEXT = "Answered from memory."
STATEMENT_TEXT = "Noted, thank you."
INTERNAL = "<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>"
_STAMP = re.compile(r"^\[[^\]]*\]\s*")


def text_of(content: Any) -> str:
    """The text of a chat message's content (a string or a list of text parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def question_of(messages: list[dict[str, Any]]) -> str:
    """The user's question: the last line ending in ``?`` of the user messages."""
    found = ""
    for message in messages:
        if message.get("role") == "user":
            for line in text_of(message.get("content")).split("\n"):
                line = _STAMP.sub("", line.strip())
                if line.endswith("?") and not line.startswith(("-", "(")):
                    found = line
    return found


def _called(call: dict[str, Any]) -> str:
    """The tool a model's tool call ran: the target of a ``tool_call``, else its name."""
    name = str(call["function"]["name"])
    if name == "tool_call":
        try:
            return str(json.loads(call["function"]["arguments"]).get("id"))
        except (ValueError, AttributeError):
            return name
    return name


def unwrap(value: Any) -> Any:
    """A tool's answer from a tool message's JSON: as is, or out of Tool Search's envelope.

    ``tool_call`` answers ``{tool: {id, name, source}, result: {content, details}}``.
    """
    if isinstance(value, dict) and "result" in value and "tool" in value:
        inner = value["result"]
        if isinstance(inner, dict) and "details" in inner:
            return inner["details"]
        if isinstance(inner, dict) and isinstance(inner.get("content"), list):
            return json.loads(text_of(inner["content"]))
        return inner
    return value


def tool_answers(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The memory tools' answers in a conversation, by tool name (the last of each)."""
    names = {
        call["id"]: _called(call)
        for message in messages
        for call in message.get("tool_calls") or []
    }
    answers: dict[str, Any] = {}
    for m in messages:
        if m.get("role") == "tool":
            text = text_of(m.get("content"))
            try:
                answers[names.get(m.get("tool_call_id"), "?")] = unwrap(json.loads(text))
            except ValueError:
                answers[names.get(m.get("tool_call_id"), "?")] = text
    return answers


def scope_of(question: str) -> dict[str, str]:
    """The ``scope`` argument a question asks for, if any."""
    if "this conversation" in question:
        return {"scope": "session"}
    if "earlier conversations" in question:
        return {"scope": "long-term"}
    return {}


def next_step(messages: list[dict[str, Any]]) -> tuple[str, dict[str, Any] | str]:
    """``("memory_search" | "memory_feedback", arguments)`` or ``("text", reply)``.

    Only the current turn counts: the messages from the user's last message on
    (OpenClaw's internal context, a user message of its own, is not the user's).
    """
    users = [
        i
        for i, m in enumerate(messages)
        if m.get("role") == "user" and not text_of(m.get("content")).startswith(INTERNAL)
    ]
    messages = messages[users[-1] :] if users else messages
    results = tool_answers(messages)
    question = question_of(messages)
    if not question:
        return "text", STATEMENT_TEXT
    if "memory_search" not in results:
        return "memory_search", {"query": question, **scope_of(question)}
    if "memory_feedback" not in results:
        answer = results["memory_search"]
        if not isinstance(answer, dict):
            return "text", FINAL_TEXT
        hits = answer.get("results") or []
        used = [hits[0]["path"]] if hits else []
        return "memory_feedback", {"retrievalId": answer.get("retrievalId", ""), "usedPaths": used}
    return "text", FINAL_TEXT


class StubModel:
    """The stub server on 127.0.0.1 (a context manager); ``requests`` holds every request body."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self._send_json({"object": "list", "data": [{"id": MODEL_ID, "object": "model"}]})

            def do_POST(self) -> None:
                size = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(size) or b"{}")
                with stub._lock:
                    stub.requests.append(body)
                    number = next(stub._ids)
                kind, payload = next_step(body.get("messages") or [])
                offered = {t.get("function", {}).get("name") for t in body.get("tools") or []}
                if kind != "text" and kind not in offered and "tool_call" in offered:
                    payload, kind = {"id": kind, "args": payload}, "tool_call"
                if kind == "text":
                    delta: dict[str, Any] = {"role": "assistant", "content": payload}
                    finish = "stop"
                else:
                    call = {
                        "index": 0,
                        "id": f"call_{number}",
                        "type": "function",
                        "function": {"name": kind, "arguments": json.dumps(payload)},
                    }
                    delta = {"role": "assistant", "content": None, "tool_calls": [call]}
                    finish = "tool_calls"
                usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
                base = {"id": f"chatcmpl-{number}", "created": int(time.time()), "model": MODEL_ID}
                if not body.get("stream"):
                    message = dict(delta)
                    for call in message.get("tool_calls") or []:
                        call.pop("index", None)
                    choice = {"index": 0, "message": message, "finish_reason": finish}
                    self._send_json(
                        {**base, "object": "chat.completion", "choices": [choice], "usage": usage}
                    )
                    return
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.end_headers()
                opening = {"index": 0, "delta": delta, "finish_reason": None}
                closing = {"index": 0, "delta": {}, "finish_reason": finish}
                chunks = ({"choices": [opening]}, {"choices": [closing], "usage": usage})
                for chunk in chunks:
                    event = {**base, "object": "chat.completion.chunk", **chunk}
                    self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()

            def _send_json(self, value: dict[str, Any]) -> None:
                data = json.dumps(value).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> StubModel:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

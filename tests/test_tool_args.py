"""The tools' argument Structs are the one definition HTTP, OpenAPI, MCP and the plugin agree on."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import msgspec
import pytest

from tribal_memory.base.config import Settings
from tribal_memory.base.errors import InvalidInput
from tribal_memory.interfaces.api import create_app
from tribal_memory.interfaces.mcp import TOOLS
from tribal_memory.interfaces.tool_args import (
    MemoryCaptureIn,
    MemoryDeleteIn,
    MemoryFeedbackIn,
    MemoryGetIn,
    MemoryGraphIn,
    MemoryListIn,
    MemorySearchIn,
    MemoryUpdateIn,
    ToolArgs,
    count,
    parse,
)

ARGS: dict[str, type[ToolArgs]] = {
    "memory_search": MemorySearchIn,
    "memory_get": MemoryGetIn,
    "memory_feedback": MemoryFeedbackIn,
    "memory_capture": MemoryCaptureIn,
    "memory_graph": MemoryGraphIn,
    "memory_list": MemoryListIn,
    "memory_update": MemoryUpdateIn,
    "memory_delete": MemoryDeleteIn,
}
PLUGIN_TOOLS = (
    Path(__file__).resolve().parents[1] / "integrations" / "openclaw" / "lib" / "tools.js"
)
PLUGIN_ARGS: dict[str, type[ToolArgs]] = {k: v for k, v in ARGS.items() if k != "memory_graph"}
"""What the plugin forwards: the slot's tools and the ones that correct memory."""


def _wire_names(kind: type[ToolArgs]) -> set[str]:
    return {field.encode_name for field in msgspec.structs.fields(kind)}


def _required(kind: type[ToolArgs]) -> set[str]:
    return {f.encode_name for f in msgspec.structs.fields(kind) if f.required}


def test_mcp_input_schemas_are_the_structs_flat() -> None:
    assert {tool.name for tool in TOOLS} == set(ARGS)
    for tool in TOOLS:
        schema, kind = tool.input_schema, ARGS[tool.name]
        assert schema["type"] == "object"
        assert set(schema["properties"]) == _wire_names(kind)
        assert set(schema.get("required", ())) == _required(kind)
        text = json.dumps(schema)
        assert "$ref" not in text and "null" not in text and "anyOf" not in text, tool.name


def test_openapi_bodies_of_the_tool_routes_are_the_same_structs() -> None:
    app = create_app(Settings(data_dir=Path("/nonexistent"), auth="off"))
    document: dict[str, Any] = app.openapi_schema.to_schema()
    components = document["components"]["schemas"]
    for name in ARGS:
        body = document["paths"][f"/v1/tools/{name}"]["post"]["requestBody"]
        ref = body["content"]["application/json"]["schema"]["$ref"]
        component = components[ref.rsplit("/", 1)[-1]]
        assert set(component["properties"]) == _wire_names(ARGS[name])
        assert set(component.get("required", ())) == _required(ARGS[name])


@pytest.mark.parametrize(
    ("kind", "arguments", "field"),
    [
        (MemorySearchIn, {}, "query"),
        (MemorySearchIn, {"query": 42}, "query"),
        (MemorySearchIn, {"query": "x", "maxResults": 0}, "maxResults"),
        (MemorySearchIn, {"query": "x", "maxResults": True}, "maxResults"),
        (MemorySearchIn, {"query": "x", "minScore": float("nan")}, "minScore"),
        (MemorySearchIn, {"query": "x", "corpus": "web"}, "corpus"),
        (MemorySearchIn, {"query": "x", "scope": "today"}, "scope"),
        (MemorySearchIn, {"query": "x", "paths": "memory/*.md"}, "paths"),
        (MemoryGetIn, {"path": "a.md", "from": float("inf")}, "from"),
        (MemoryFeedbackIn, {"retrievalId": "r"}, "usedPaths"),
        (MemoryCaptureIn, {"content": "c", "tags": "x"}, "tags"),
        (MemoryGraphIn, {"operation": "walk", "ids": ["a"]}, "operation"),
        (MemoryGraphIn, {"operation": "neighbors", "ids": []}, "ids"),
        (MemoryGraphIn, {"operation": "neighbors", "ids": ["a"], "steps": 9}, "steps"),
    ],
)
def test_bad_arguments_are_invalid_input_naming_the_field(
    kind: type[ToolArgs], arguments: dict[str, Any], field: str
) -> None:
    with pytest.raises(InvalidInput, match=re.escape(field)):
        parse(kind, arguments)


def test_arguments_as_memory_core_sends_them() -> None:
    args = parse(MemorySearchIn, {"query": "q", "maxResults": 2.7, "minScore": None, "x": 1})
    assert count(args.maxResults, 6) == 2 and args.minScore is None
    assert count(parse(MemoryGetIn, {"path": "p", "from": 3.0}).from_, 1) == 3
    assert parse(MemoryCaptureIn, {"content": "c"}).tags is None


def test_the_openclaw_plugin_forwards_only_fields_the_structs_define() -> None:
    source = PLUGIN_TOOLS.read_text(encoding="utf-8")
    calls = re.findall(r'call\("(\w+)", pick\(params, \[([^\]]*)\]\)', source)
    # manage("memory_list", label, description, PARAMETERS, [fields]): the last array.
    manages = re.findall(r'manage\(\s*"(\w+)",[^\[]*?\[([^\]]*)\],\s*\)', source)
    forwarded = {name: set(re.findall(r'"(\w+)"', fields)) for name, fields in calls + manages}
    # memory_search's body: the model's fields picked, then the plugin's own (key: value).
    search = re.search(r"const body = \{(.*?)\n        \};", source, re.S)
    assert search is not None
    body = search.group(1)
    picked = re.search(r"pick\(params, \[([^\]]*)\]\)", body)
    assert picked is not None
    own = set(re.findall(r"^\s*(?:\.\.\.\(.*?\{ )?(\w+):", body, re.M))
    forwarded["memory_search"] = {*re.findall(r'"(\w+)"', picked.group(1)), *own}
    assert {"scope", "conversationId", "paths", "citations"} <= forwarded["memory_search"]
    assert set(forwarded) == set(PLUGIN_ARGS)
    for name, fields in forwarded.items():
        assert fields <= _wire_names(PLUGIN_ARGS[name]), name

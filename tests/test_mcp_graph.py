"""The ``memory_graph`` MCP tool driven by the official SDK client: in process (stdio) and
forwarded to a running server (``--url``), over the graph ``C -about-> A -depends_on-> B
-stored_in-> D`` with B owned by another agent in the scoped case.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import ClientSession, StdioServerParameters
from test_mcp import _answer, _env, _stdio_session, server  # noqa: F401 (server: a fixture)

from tribal_memory.base.config import Settings
from tribal_memory.base.graph import RelationInput
from tribal_memory.base.models import MemoryInput
from tribal_memory.embeddings.fastembed import FastEmbedEmbedder
from tribal_memory.service.memory_service import MemoryService

pytestmark = pytest.mark.slow

TEXTS = (
    "The billing service runs on PostgreSQL",
    "PostgreSQL backups run nightly at 02:00 UTC",
    "The billing team meets on Tuesdays",
    "Backups are stored in the eu-west bucket",
)
EDGES = ((2, 0, "about"), (0, 1, "depends_on"), (1, 3, "stored_in"))


async def _graph(session: ClientSession, **arguments: Any) -> dict[str, Any]:
    return _answer(await session.call_tool("memory_graph", arguments))


async def _exercise(session: ClientSession, ids: list[str]) -> None:
    """Every operation of memory_graph, and its errors, as an agent calls them."""
    a, b, c, d = ids
    await session.initialize()
    listed = {tool.name: tool for tool in (await session.list_tools()).tools}
    assert listed["memory_graph"].input_schema["required"] == ["operation", "ids"]

    near = await _graph(session, operation="neighbors", ids=[a], steps=2.0)
    assert {(m["memoryId"], m["steps"]) for m in near["memories"]} == {(b, 1), (c, 1), (d, 2)}
    assert all(m["path"] == f"memory/{m['memoryId']}.md" for m in near["memories"])
    typed = await _graph(session, operation="neighbors", ids=[a], steps=3, types=["about"])
    assert [(m["memoryId"], m["via"]) for m in typed["memories"]] == [(c, "about")]

    common = await _graph(session, operation="intersection", ids=[c, d], steps=2)
    assert sorted((m["memoryId"], m["steps"]) for m in common["memories"]) == sorted(
        [(a, [1, 2]), (b, [2, 1])]
    )
    blocked = await _graph(
        session, operation="intersection", ids=[a, d], steps=3, block=["stored_in"]
    )
    assert blocked == {"operation": "intersection", "memories": []}

    found = await _graph(
        session, operation="search", ids=[a], query="where are backups stored", steps=1
    )
    assert {m["memoryId"] for m in found["memories"]} <= {a, b, c}
    assert found["memories"][0]["memoryId"] == b and 0 <= found["memories"][0]["score"] <= 1

    for bad in (
        {"operation": "walk", "ids": [a]},
        {"operation": "neighbors", "ids": []},
        {"operation": "neighbors", "ids": [a], "steps": 9},
        {"operation": "intersection", "ids": [a]},
        {"operation": "search", "ids": [a]},
    ):
        result = await session.call_tool("memory_graph", bad)
        assert result.is_error is True
        assert json.loads(result.content[0].text)["error"] == "invalid_input", bad
    missing = await session.call_tool(
        "memory_graph", {"operation": "neighbors", "ids": ["00000000-0000-0000-0000-000000000000"]}
    )
    assert missing.is_error and json.loads(missing.content[0].text)["error"] == "not_found"


def test_memory_graph_over_stdio(tmp_path: Path, embedder: FastEmbedEmbedder) -> None:
    data = tmp_path / "data"
    with MemoryService(Settings(data_dir=data), embedder=embedder) as service:
        items = [MemoryInput(text, owner="ann") for text in TEXTS]
        ids = [r.memory.memory_id for r in service.capture_batch(items)]
        service.relate_batch([RelationInput(ids[s], ids[t], type_) for s, t, type_ in EDGES])
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "tribal_memory", "mcp", "--data-dir", str(data), "--agent", "ann"],
        env=_env(),
    )

    async def main() -> None:
        with (tmp_path / "stderr.log").open("w") as errlog:
            async with _stdio_session(params, errlog) as session:
                await _exercise(session, ids)

    anyio.run(main)
    assert "Traceback" not in (tmp_path / "stderr.log").read_text()


def test_memory_graph_forwarded_to_a_server_sees_only_the_agents_graph(server: str) -> None:  # noqa: F811
    with httpx.Client(base_url=server, timeout=60.0) as client:
        ids = []
        for text in TEXTS:
            created = client.post("/v1/memories", json={"content": text, "owner": "ann"})
            ids.append(created.json()["memory"]["memory_id"])
        edges = [{"source_id": ids[s], "target_id": ids[t], "type": type_} for s, t, type_ in EDGES]
        assert client.post("/v1/relations/batch", json={"relations": edges}).status_code == 200
        hidden = client.post("/v1/memories", json={"content": "Zed's private plan", "owner": "zed"})
        secret = hidden.json()["memory"]["memory_id"]
        link = {"source_id": ids[0], "target_id": secret, "type": "about"}
        assert client.post("/v1/relations", json=link).status_code == 200

    async def main() -> None:
        args = ["-m", "tribal_memory", "mcp", "--url", server, "--agent", "ann"]
        params = StdioServerParameters(command=sys.executable, args=args, env=_env())
        async with _stdio_session(params) as session:
            await _exercise(session, ids)
            near = await _graph(session, operation="neighbors", ids=[ids[0]], steps=5)
            assert secret not in json.dumps(near)
            refused = await session.call_tool(
                "memory_graph", {"operation": "intersection", "ids": [ids[0], secret]}
            )
            assert refused.is_error and json.loads(refused.content[0].text)["error"] == "not_found"

    anyio.run(main)

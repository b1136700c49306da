"""OpenClaw memory-slot tools over HTTP: recorded tool calls replayed against the real app."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from litestar import Litestar
from litestar.testing import TestClient
from local import LOCAL_URL

from tribal_memory.base.config import Settings
from tribal_memory.base.errors import EmbeddingError
from tribal_memory.base.models import SearchFilters
from tribal_memory.documents import load_document, load_paths
from tribal_memory.embeddings.base import Embedder, Vector
from tribal_memory.embeddings.fastembed import FastEmbedEmbedder
from tribal_memory.interfaces.api import create_app
from tribal_memory.interfaces.tool_manage import MANAGE_TOOL_NAMES
from tribal_memory.interfaces.tools import (
    DEFAULT_MIN_SCORE,
    SNIPPET_MAX_CHARS,
    TOOL_NAMES,
    document_lines,
)
from tribal_memory.service.memory_service import MemoryService

DATA = Path(__file__).resolve().parent / "data" / "openclaw"
WORKSPACE = DATA / "workspace"
RECORDED = json.loads((DATA / "tool_calls.json").read_text(encoding="utf-8"))
AGENT = RECORDED["agent"]
RESULT_KEYS = {
    "path",
    "startLine",
    "endLine",
    "provenance",
    "score",
    "vectorScore",
    "textScore",
    "snippet",
    "source",
    "corpus",
    "citation",
}

FACTS = [
    ("The staging cluster is called kestrel and lives in eu-west-1.", AGENT, ["infra"]),
    ("Invoices are numbered INV-<year>-<sequence> since January.", AGENT, ["billing"]),
    ("Release notes are due every second Friday.", "shared", []),
    ("The coffee machine on floor 3 is broken.", "other-agent", []),
]


def _service(client: TestClient[Litestar]) -> MemoryService:
    service = client.app.state["service"]
    assert isinstance(service, MemoryService)
    return service


def _load_workspace(service: MemoryService) -> None:
    """The OpenClaw workspace ingested as the agent's documents, plus a few facts."""
    loaded = load_paths([WORKSPACE], owner=AGENT, root=WORKSPACE)
    service.capture_batch(loaded.memories)
    service.optimize()


@pytest.fixture
def client(settings: Settings, embedder: FastEmbedEmbedder) -> Iterator[TestClient[Litestar]]:
    with TestClient(base_url=LOCAL_URL, app=create_app(settings, embedder=embedder)) as test_client:
        _load_workspace(_service(test_client))
        for content, owner, tags in FACTS:
            created = test_client.post(
                "/v1/memories", json={"content": content, "owner": owner, "tags": tags}
            )
            assert created.status_code == 201
        yield test_client


def _call(
    client: TestClient[Litestar], name: str, arguments: dict[str, Any], agent: str | None = AGENT
) -> Any:
    headers = {"X-Agent-Id": agent} if agent else {}
    response = client.post(f"/v1/tools/{name}", json=arguments, headers=headers)
    assert response.status_code == 200, response.text
    return response.json()


def _resolve(value: Any, last_search: dict[str, Any] | None) -> Any:
    """Replace ``$search.<path>`` placeholders of a recorded call by the last search's values."""
    if isinstance(value, list):
        return [_resolve(v, last_search) for v in value]
    if isinstance(value, dict):
        return {k: _resolve(v, last_search) for k, v in value.items()}
    if isinstance(value, str) and value.startswith("$search."):
        assert last_search is not None
        found: Any = last_search
        for part in value.removeprefix("$search.").split("."):
            found = found[int(part)] if isinstance(found, list) else found[part]
        return found
    return value


def _check_search(answer: dict[str, Any], arguments: dict[str, Any]) -> None:
    """The memory_search contract: keys, types, ranges, order, citations."""
    keys = {"results", "provider", "model", "mode", "citations", "retrievalId", "debug"}
    if arguments.get("corpus") == "all":  # memory-core lists the corpora it searched
        assert answer.pop("corpora") == [
            {"corpus": "memory", "outcome": "ok"},
            {"corpus": "wiki", "outcome": "not-registered"},
        ]
    assert set(answer) == keys
    assert answer["provider"] == "tribal-memory"
    debug = answer["debug"]
    assert debug["effectiveMode"] == answer["mode"] and debug["hits"] == len(answer["results"])
    assert isinstance(debug["searchMs"], int) and debug["searchMs"] >= 0
    assert isinstance(answer["model"], str) and answer["model"]
    assert isinstance(answer["retrievalId"], str)
    assert answer["mode"] in ("hybrid", "vector-only") and answer["citations"] == "auto"
    results = answer["results"]
    assert len(results) <= int(arguments.get("maxResults", 6))
    min_score = arguments.get("minScore", DEFAULT_MIN_SCORE)
    for result in results:
        assert set(result) == RESULT_KEYS
        assert isinstance(result["path"], str) and result["path"]
        assert isinstance(result["startLine"], int) and isinstance(result["endLine"], int)
        assert 1 <= result["startLine"] <= result["endLine"]
        assert isinstance(result["score"], float) and min_score <= result["score"] <= 1.0
        assert 0.0 <= result["vectorScore"] <= 1.0 and 0.0 <= result["textScore"] <= 1.0
        assert result["source"] == "memory" and result["corpus"] == "memory"
        provenance = result["provenance"]
        assert provenance["originClass"] == "agent" and provenance["sessionKind"] == "unknown"
        assert isinstance(provenance["observedAt"], int) and provenance["observedAt"] > 1.7e12
        path, start, end = result["path"], result["startLine"], result["endLine"]
        assert result["citation"] == (
            f"{path}#L{start}" if start == end else f"{path}#L{start}-L{end}"
        )
        text, source_line = result["snippet"].rsplit("\n\nSource: ", 1)
        assert source_line == result["citation"]
        assert 0 < len(text) <= SNIPPET_MAX_CHARS


def _check_resolves(client: TestClient[Litestar], result: dict[str, Any]) -> None:
    """A result's path and lines read back, through memory_get, the text it showed."""
    start, end = result["startLine"], result["endLine"]
    got = _call(
        client, "memory_get", {"path": result["path"], "from": start, "lines": end - start + 1}
    )
    assert got["path"] == result["path"] and got["status"] == "ok"
    body = _body(got["text"])
    assert got["lines"] == len(body.split("\n")) == end - start + 1
    assert result["snippet"].rsplit("\n\nSource: ", 1)[0].strip() in body


def _body(text: str) -> str:
    """A memory_get text without its continuation notice."""
    return text.split("\n\n[More content available.")[0]


def test_recorded_tool_calls_replay_with_the_contract(client: TestClient[Litestar]) -> None:
    last_search: dict[str, Any] | None = None
    searched_paths: set[str] = set()
    for call in RECORDED["calls"]:
        arguments = _resolve(call["arguments"], last_search)
        answer = _call(client, call["name"], arguments)
        if call["name"] == "memory_search":
            _check_search(answer, arguments)
            assert answer["results"], f"{call['toolCallId']}: the workspace answers this"
            for result in answer["results"]:
                _check_resolves(client, result)
                searched_paths.add(result["path"])
            last_search = answer
        elif call["name"] == "memory_get":
            assert answer["path"] == arguments["path"]
            if answer["status"] == "ok":
                assert answer["from"] == int(arguments.get("from", 1)) and answer["text"]
            else:
                assert answer == {"status": "not_found", "text": "", "path": arguments["path"]}
        else:
            assert answer["retrievalId"] == arguments["retrievalId"]
            assert set(answer["usedPaths"]) <= {r["path"] for r in last_search["results"]}
            assert len(answer["usedIds"]) >= len(answer["usedPaths"])
            assert answer["duplicate"] is False
    # Document chunks come back under the workspace's own relative paths.
    assert {"memory/2026-03-02.md", "MEMORY.md"} & searched_paths
    assert all(not p.startswith("/") for p in searched_paths)
    # The other agent's memory never shows, and the facts' paths are virtual.
    other = _call(client, "memory_search", {"query": "coffee machine broken", "minScore": 0.0})
    assert all("coffee machine" not in r["snippet"] for r in other["results"])


def test_recorded_reads_of_known_and_unknown_paths(client: TestClient[Litestar]) -> None:
    file_text = (WORKSPACE / "memory" / "2026-03-02.md").read_text(encoding="utf-8")
    text = file_text.rstrip("\n").split("\n")
    slice_call = _call(
        client, "memory_get", {"path": "memory/2026-03-02.md", "from": 14.0, "lines": 3.0}
    )
    more = len(text) > 16
    assert slice_call["status"] == "ok" and slice_call["lines"] == len(text[13:16])
    assert _body(slice_call["text"]) == "\n".join(text[13:16])
    assert slice_call.get("nextFrom") == (17 if more else None)
    whole = _call(client, "memory_get", {"path": "memory/2026-03-02.md"})
    # The whole file, its "# 2026-03-02" title (a heading with no text under it) included.
    assert whole == {
        "status": "ok",
        "text": "\n".join(text),
        "path": "memory/2026-03-02.md",
        "from": 1,
        "lines": len(text),
    }
    assert whole["text"].split("\n")[0] == "# 2026-03-02"
    assert _call(client, "memory_get", {"path": "memory/2026-02-30.md"}) == {
        "status": "not_found",
        "text": "",
        "path": "memory/2026-02-30.md",
    }
    past_end = _call(client, "memory_get", {"path": "MEMORY.md", "from": 500})
    assert past_end == {"status": "ok", "text": "", "path": "MEMORY.md", "from": 500, "lines": 0}


def test_memory_get_normalises_paths_and_refuses_escapes(client: TestClient[Litestar]) -> None:
    plain = _call(client, "memory_get", {"path": "memory/2026-03-02.md"})
    for spelling in (
        "./memory//2026-03-02.md",
        "memory\\2026-03-02.md",
        "x/../memory/2026-03-02.md",
    ):
        assert _call(client, "memory_get", {"path": spelling}) == plain
    escaped = _call(client, "memory_get", {"path": "../etc/passwd"})
    assert escaped["status"] == "error" and escaped["text"] == ""
    assert escaped["code"] == "MEMORY_PATH_NOT_ALLOWED" and escaped["error"]
    wiki = _call(client, "memory_get", {"path": "memory/2026-03-02.md", "corpus": "wiki"})
    assert wiki == {"status": "not_found", "text": "", "path": "memory/2026-03-02.md"}


def test_a_line_over_the_read_limit_says_how_to_read_it(client: TestClient[Litestar]) -> None:
    long_line = " ".join(f"word{n}" for n in range(2_000))  # 16,889 characters, one line
    document = {"path": "memory/long.md", "owner": AGENT, "text": f"# Long\n\n{long_line}\nend\n"}
    assert client.post("/v1/documents", json=document).status_code == 201
    read = _call(client, "memory_get", {"path": "memory/long.md", "from": 3})
    assert read["truncated"] is True and "nextFrom" not in read
    # memory-core's notice: the workspace file holds the whole line.
    assert read["text"].endswith(
        "[More content available. Requested excerpt exceeded the default maxChars budget. "
        "If you need the full raw line, use read on the source file.]"
    )
    fact = client.post("/v1/memories", json={"content": long_line, "owner": AGENT}).json()
    path = f"memory/{fact['memory']['memory_id']}.md"
    cut = _call(client, "memory_get", {"path": path})
    assert cut["text"].startswith(long_line[:11_000]) and "only its start is shown" in cut["text"]


def test_memory_get_window_and_continuation(client: TestClient[Litestar]) -> None:
    lines = [f"line {n:03d} " + "x" * 120 for n in range(1, 151)]
    created = client.post("/v1/memories", json={"content": "\n".join(lines), "owner": AGENT})
    assert created.status_code == 201, created.text
    path = f"memory/{created.json()['memory']['memory_id']}.md"
    first = _call(client, "memory_get", {"path": path})
    # 120 lines of 129 characters are 15,599 characters: the 12,000 budget ends it sooner.
    kept = first["lines"]
    assert kept < 120 and first["truncated"] is True and first["nextFrom"] == kept + 1
    body, notice = first["text"].split("\n\n")
    assert body == "\n".join(lines[:kept]) and len(body) <= 12_000
    assert len(body) + len(lines[kept]) + 1 > 12_000
    assert notice == f"[More content available. Use from={kept + 1} to continue.]"
    follow = _call(client, "memory_get", {"path": path, "from": first["nextFrom"], "lines": 5})
    assert follow["text"].split("\n\n")[0] == "\n".join(lines[kept : kept + 5])
    last = _call(client, "memory_get", {"path": path, "from": 149})
    assert last == {
        "status": "ok",
        "text": "\n".join(lines[148:]),
        "path": path,
        "from": 149,
        "lines": 2,
    }
    short = _call(client, "memory_get", {"path": path, "lines": 2})
    assert short["lines"] == 2 and short["nextFrom"] == 3 and short["truncated"] is True


def test_memory_search_arguments_as_memory_core_takes_them(client: TestClient[Litestar]) -> None:
    query = "which database did we choose for billing?"
    for min_score in (-3.0, 7.5):  # out of range: clamped, never a 400
        answer = _call(client, "memory_search", {"query": query, "minScore": min_score})
        assert (len(answer["results"]) > 0) == (min_score < 0)
    off = _call(client, "memory_search", {"query": query, "citations": "off", "minScore": 0.0})
    assert off["citations"] == "off" and off["results"]
    assert all("citation" not in r and "Source:" not in r["snippet"] for r in off["results"])
    on = _call(client, "memory_search", {"query": query, "corpus": "memory", "minScore": 0.0})
    assert [r["path"] for r in on["results"]] == [r["path"] for r in off["results"]]
    wiki = _call(client, "memory_search", {"query": query, "corpus": "wiki"})
    assert wiki["results"] == [] and "wiki" in wiki["warning"]
    assert wiki["corpora"] == [{"corpus": "wiki", "outcome": "not-registered"}]
    sessions = _call(client, "memory_search", {"query": query, "corpus": "sessions"})
    assert sessions["results"] == [] and sessions["disabled"] is sessions["unavailable"] is True
    assert sessions["error"] and sessions["warning"] and sessions["action"]
    for bad in ({"corpus": "everything"}, {"citations": "sometimes"}):
        response = client.post("/v1/tools/memory_search", json={"query": query, **bad})
        assert response.status_code == 400, response.text
    one_line = client.post(
        "/v1/memories", json={"content": "The VPN gateway is vpn-02.", "owner": AGENT}
    ).json()["memory"]["memory_id"]
    found = _call(client, "memory_search", {"query": "VPN gateway", "minScore": 0.0})
    mine = [r for r in found["results"] if r["path"] == f"memory/{one_line}.md"]
    assert mine and mine[0]["citation"] == f"memory/{one_line}.md#L1"


def test_memory_paths_read_back_with_line_slicing(client: TestClient[Litestar]) -> None:
    created = client.post(
        "/v1/memories",
        json={
            "content": "Runbook for the VPN\nstep one: open the portal\nstep two: log in",
            "owner": AGENT,
        },
    ).json()
    path = f"memory/{created['memory']['memory_id']}.md"
    assert _call(client, "memory_get", {"path": path})["text"].startswith("Runbook for the VPN")
    second = _call(client, "memory_get", {"path": path, "from": 2.0, "lines": 1.0})
    assert _body(second["text"]) == "step one: open the portal"
    assert second["nextFrom"] == 3
    found = _call(client, "memory_search", {"query": "VPN runbook portal", "minScore": 0.0})
    mine = [r for r in found["results"] if r["path"] == path]
    assert mine and (mine[0]["startLine"], mine[0]["endLine"]) == (1, 3)
    # Another agent cannot read it; an anonymous (all-owner) caller can.
    assert _call(client, "memory_get", {"path": path}, agent="other-agent")["text"] == ""
    assert _call(client, "memory_get", {"path": path}, agent=None)["text"]


def test_agent_from_header_or_query_parameter(client: TestClient[Litestar]) -> None:
    query = {"query": "coffee machine on floor 3", "minScore": 0.0}
    by_query = client.post("/v1/tools/memory_search?agent_id=other-agent", json=query).json()
    assert any("coffee machine" in r["snippet"] for r in by_query["results"])
    header_wins = client.post(
        "/v1/tools/memory_search?agent_id=other-agent", json=query, headers={"X-Agent-Id": AGENT}
    ).json()
    assert all("coffee machine" not in r["snippet"] for r in header_wins["results"])
    shared = _call(client, "memory_search", {"query": "when are release notes due"})
    assert any("Release notes" in r["snippet"] for r in shared["results"])


def test_memory_capture_over_http_stores_for_the_agent_and_reads_back(
    client: TestClient[Litestar],
) -> None:
    fact = {"content": "The staging database is rebuilt every Sunday night.", "tags": ["ops"]}
    first = client.post("/v1/tools/memory_capture", json=fact, headers={"X-Agent-Id": AGENT})
    assert first.status_code == 200, first.text
    stored = first.json()
    assert stored["status"] == "created" and stored["path"] == f"memory/{stored['memoryId']}.md"
    again = _call(client, "memory_capture", fact)
    assert (again["status"], again["memoryId"]) == ("exists", stored["memoryId"])
    memory = _service(client).get(stored["memoryId"])
    assert (memory.owner, memory.tags) == (AGENT, ("ops",))
    assert "Sunday night" in _call(client, "memory_get", {"path": stored["path"]})["text"]
    assert _call(client, "memory_get", {"path": stored["path"]}, agent="other-agent")["text"] == ""
    empty = client.post("/v1/tools/memory_capture", json={"content": " "})
    assert empty.status_code == 400 and empty.json()["status"] == 400


def test_feedback_is_recorded_and_the_fourth_search_is_learned(
    client: TestClient[Litestar],
) -> None:
    service = _service(client)
    arguments = {"query": "which machine hosts the billing database?", "maxResults": 6.0}
    before = service.retrieval_stats(owner=AGENT)
    for _ in range(3):
        answer = _call(client, "memory_search", arguments)
        used = answer["results"][0]["path"]
        fed = _call(
            client,
            "memory_feedback",
            {"retrievalId": answer["retrievalId"], "usedPaths": [used]},
        )
        assert fed["usedPaths"] == [used] and fed["usedIds"]
    fourth = _call(client, "memory_search", arguments)
    _check_search(fourth, arguments)
    after = service.retrieval_stats(owner=AGENT)
    assert after.overall.with_feedback == before.overall.with_feedback + 3
    assert after.weights > before.weights
    assert after.overall.cache_hits == before.overall.cache_hits + 1
    assert fourth["results"][0]["path"] == used


def test_feedback_names_the_retrieval_of_a_knowledge_block(client: TestClient[Litestar]) -> None:
    # The plugin's start-of-turn block carries this retrieval id and its hits' paths.
    block = client.post(
        "/v1/context", json={"prompt": "How do we roll back a deploy?", "agent_id": AGENT}
    ).json()
    assert block["context"].startswith("<knowledge-graph>") and block["hits"]
    path = block["hits"][0]["path"]
    fed = _call(
        client, "memory_feedback", {"retrievalId": block["retrieval_id"], "usedPaths": [path]}
    )
    assert fed["usedPaths"] == [path] and fed["usedIds"] and fed["duplicate"] is False


def test_feedback_paths_citations_and_errors(client: TestClient[Litestar]) -> None:
    answer = _call(client, "memory_search", {"query": "roll back a deploy", "minScore": 0.0})
    retrieval_id, top = answer["retrievalId"], answer["results"][0]
    cited = _call(
        client,
        "memory_feedback",
        {"retrievalId": retrieval_id, "usedPaths": [top["citation"], "nowhere.md"]},
    )
    assert cited["usedPaths"] == [top["path"]] and cited["ignoredPaths"] == ["nowhere.md"]
    again = _call(
        client, "memory_feedback", {"retrievalId": retrieval_id, "usedPaths": [top["citation"]]}
    )
    assert again["duplicate"] is True

    unknown = client.post(
        "/v1/tools/memory_feedback",
        json={"retrievalId": "00000000-0000-4000-8000-000000000000", "usedPaths": []},
        headers={"X-Agent-Id": AGENT},
    )
    assert unknown.status_code == 404 and unknown.json()["error"] == "not_found"
    fresh = _call(client, "memory_search", {"query": "roll back a deploy"})
    none_known = client.post(
        "/v1/tools/memory_feedback",
        json={"retrievalId": fresh["retrievalId"], "usedPaths": ["nowhere.md"]},
        headers={"X-Agent-Id": AGENT},
    )
    assert none_known.status_code == 400 and "nowhere.md" in none_known.json()["detail"]
    other_agent = client.post(
        "/v1/tools/memory_feedback",
        json={"retrievalId": fresh["retrievalId"], "usedPaths": []},
        headers={"X-Agent-Id": "other-agent"},
    )
    assert other_agent.status_code == 404
    nothing_used = _call(
        client, "memory_feedback", {"retrievalId": fresh["retrievalId"], "usedPaths": []}
    )
    assert nothing_used["usedIds"] == [] and nothing_used["usedPaths"] == []


@pytest.mark.parametrize(
    ("name", "body"),
    [
        ("memory_search", {}),
        ("memory_search", {"query": ""}),
        ("memory_search", {"query": 42}),
        ("memory_search", {"query": "x", "maxResults": 0}),
        ("memory_search", {"query": "x", "corpus": "web"}),
        ("memory_search", {"query": "x", "maxResults": "six"}),
        ("memory_get", {"path": "MEMORY.md", "from": 0}),
        ("memory_get", {"path": "MEMORY.md", "lines": -2.0}),
        ("memory_get", {}),
        ("memory_feedback", {"retrievalId": "x"}),
    ],
)
def test_bad_tool_input_is_a_400(
    client: TestClient[Litestar], name: str, body: dict[str, Any]
) -> None:
    response = client.post(f"/v1/tools/{name}", json=body, headers={"X-Agent-Id": AGENT})
    assert response.status_code == 400, response.text
    assert response.json()["status"] == 400


def test_document_reassembled_from_overlapping_chunks(
    tmp_path: Path, service: MemoryService
) -> None:
    first = " ".join(f"alpha{i}" for i in range(60))
    second = " ".join(f"beta{i}" for i in range(60))
    text = "\n".join(
        ["# Notes", "", f"First paragraph {first}.", "", "## Part two", "", f"  Second {second}."]
    )
    (tmp_path / "notes.md").write_text(text + "\n", encoding="utf-8")
    chunks = load_document(
        tmp_path / "notes.md", owner="ann", root=tmp_path, max_tokens=30, overlap_tokens=8
    )
    assert len(chunks) > 4  # long lines are split inside, with overlap
    service.capture_batch(chunks)
    filters = SearchFilters(kinds=("chunk",), sources=("notes.md",))
    stored = service.list_memories(filters, limit=100)
    assert document_lines(stored, "ann") == text.split("\n")
    # A caller that sees no chunk of it gets nothing.
    assert document_lines([], "ann") == []


class QueryFailingEmbedder(Embedder):
    """Deterministic 8-d embedder whose query embeddings fail (the model is "down")."""

    model_id = "test/query-failing-8d"
    dim = 8

    def embed_batch(self, texts: Sequence[str], *, query: bool = False) -> Vector:
        if query:
            raise EmbeddingError("the embedding model is unavailable")
        rows = [
            np.frombuffer(hashlib.sha256(t.encode()).digest()[:8], dtype=np.uint8) for t in texts
        ]
        matrix = np.asarray(rows, dtype=np.float32).reshape(len(texts), self.dim) + 1.0
        normalised: Vector = matrix / np.linalg.norm(matrix, axis=1, keepdims=True)
        return normalised.astype(np.float32)


def test_search_unavailable_answers_disabled_not_an_error(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "down")
    with TestClient(
        base_url=LOCAL_URL, app=create_app(settings, embedder=QueryFailingEmbedder())
    ) as down:
        assert down.post("/v1/memories", json={"content": "a fact"}).status_code == 201
        response = down.post("/v1/tools/memory_search", json={"query": "a fact", "maxResults": 6.0})
        assert response.status_code == 200
        answer = response.json()
        debug = answer.pop("debug")  # memory-core repeats why in debug
        assert answer.pop("warning") == debug["warning"] and answer.pop("action") == debug["action"]
        assert answer == {
            "results": [],
            "disabled": True,
            "unavailable": True,
            "error": "the embedding model is unavailable",
        }
        assert down.post("/v1/tools/memory_search", json={"query": " "}).status_code == 400
        missing = down.post("/v1/tools/memory_get", json={"path": "MEMORY.md"}).json()
        assert missing == {"status": "not_found", "text": "", "path": "MEMORY.md"}


def test_openclaw_manifest_declares_a_memory_plugin() -> None:
    root = Path(__file__).resolve().parent.parent / "integrations" / "openclaw"
    manifest = json.loads((root / "openclaw.plugin.json").read_text(encoding="utf-8"))
    assert manifest["kind"] == "memory"
    assert re.fullmatch(r"[a-z0-9-]+", manifest["id"])
    schema = manifest["configSchema"]
    assert schema["type"] == "object"
    assert {"baseUrl", "apiKey", "agentId", "maxResults", "minScore"} <= set(schema["properties"])
    assert manifest["uiHints"]["apiKey"]["sensitive"] is True
    readme = (root / "README.md").read_text(encoding="utf-8")
    assert "plugins" in readme and '"memory": "' + manifest["id"] + '"' in readme
    # The package OpenClaw installs: an ES module whose tools are all in the manifest.
    package = json.loads((root / "package.json").read_text(encoding="utf-8"))
    assert package["type"] == "module" and package["openclaw"]["extensions"] == ["./index.js"]
    assert package["openclaw"]["compat"]["pluginApi"].startswith(">=")
    modules = [root / "index.js", *sorted((root / "lib").glob("*.js"))]
    source = "\n".join(path.read_text(encoding="utf-8") for path in modules)
    registered = set(re.findall(r'^\s+(?:name: )?"(memory_[a-z]+)",$', source, re.M))
    offered = set(TOOL_NAMES) | set(MANAGE_TOOL_NAMES)
    assert registered == set(manifest["contracts"]["tools"]) == offered


def test_an_agent_lists_corrects_and_forgets_its_own_memories(
    client: TestClient[Litestar],
) -> None:
    stored = _call(
        client, "memory_capture", {"content": "The standup moved to 9:45.", "tags": ["x"]}
    )
    shared = client.post(
        "/v1/memories", json={"content": "The office opens at eight.", "owner": "shared"}
    ).json()["memory"]
    listed = _call(client, "memory_list", {"tag": "x"})
    assert [m["path"] for m in listed["memories"]] == [stored["path"]]
    assert listed["memories"][0]["text"] == "The standup moved to 9:45."
    assert listed["nextAfter"] is None
    # A correction replaces the text (at the path of the new text: the old one is gone)
    # and is what search finds.
    fixed = _call(
        client, "memory_update", {"path": stored["path"], "content": "The standup moved to 10:15."}
    )
    assert fixed["status"] == "updated" and fixed["path"] == f"memory/{fixed['memoryId']}.md"
    assert fixed["memoryId"] != stored["memoryId"]
    assert _call(client, "memory_get", {"path": stored["path"]})["status"] == "not_found"
    assert "10:15" in _call(client, "memory_get", {"path": fixed["path"]})["text"]
    found = _call(client, "memory_search", {"query": "when is the standup", "minScore": 0.0})
    assert all("9:45" not in r["snippet"] for r in found["results"])
    # Shared knowledge and other agents' memories are not the agent's to change.
    shared_path = f"memory/{shared['memory_id']}.md"
    assert _call(client, "memory_delete", {"path": shared_path})["status"] == "not_found"
    assert _call(client, "memory_get", {"path": shared_path})["status"] == "ok"
    other = _call(client, "memory_delete", {"path": fixed["path"]}, agent="someone-else")
    assert other["status"] == "not_found"
    gone = _call(client, "memory_delete", {"path": fixed["path"]})
    assert gone == {"status": "deleted", "path": fixed["path"], "memoryId": fixed["memoryId"]}
    assert _call(client, "memory_get", {"path": fixed["path"]})["status"] == "not_found"
    # Documents change through their files; no agent, no changes.
    refused = client.post(
        "/v1/tools/memory_delete", json={"path": "MEMORY.md"}, headers={"X-Agent-Id": AGENT}
    )
    assert refused.status_code == 400 and "ingesting it again" in refused.json()["detail"]
    anonymous = client.post("/v1/tools/memory_list", json={})
    assert anonymous.status_code == 400 and "X-Agent-Id" in anonymous.json()["detail"]


def test_feedback_credits_the_sections_this_retrieval_showed(client: TestClient[Litestar]) -> None:
    """A path credits this retrieval's chunks of it, a citation only the chunk it names."""
    service = _service(client)
    service.ingest_document(
        "runbooks/ops.md",
        "# Ops\n\n## Rollback\n\nTo roll back, run ./rewind.sh on the deploy host.\n\n"
        "## Incident 42\n\nThe pager woke everyone because the disk on db-2 filled up.\n",
        owner=AGENT,
    )
    first = _call(
        client,
        "memory_search",
        {
            "query": "run rewind.sh on the deploy host to roll back",
            "maxResults": 1,
            "sessionId": "s1",
        },
    )
    (shown,) = first["results"]
    assert shown["path"] == "runbooks/ops.md" and "rewind" in shown["snippet"]
    second = _call(
        client, "memory_search", {"query": "the db-2 disk filled up and paged", "sessionId": "s1"}
    )
    assert any("db-2" in r["snippet"] for r in second["results"])
    fed = _call(
        client,
        "memory_feedback",
        {"retrievalId": first["retrievalId"], "usedPaths": ["runbooks/ops.md"]},
    )
    used = service.get_many(fed["usedIds"])
    assert len(used) == 1 and "rewind" in next(iter(used.values())).content
    # A citation whose lines name no shown chunk credits nothing and is listed as ignored.
    third = _call(client, "memory_search", {"query": "the db-2 disk filled up and paged"})
    cited = next(r["citation"] for r in third["results"] if "db-2" in r["snippet"])
    miss = _call(
        client,
        "memory_feedback",
        {"retrievalId": third["retrievalId"], "usedPaths": [cited, "runbooks/ops.md#L900"]},
    )
    assert miss["ignoredPaths"] == ["runbooks/ops.md"]
    assert all("db-2" in m.content for m in service.get_many(miss["usedIds"]).values())


def _capture_turns(client: TestClient[Litestar], session: str, turns: Sequence[str]) -> None:
    """Conversation turns as the OpenClaw plugin's autoCapture stores them."""
    memories = [
        {"content": text, "owner": AGENT, "tags": ["conversation"], "doc_id": session,
         "chunk_index": index, "source": f"openclaw:session/{session}"}
        for index, text in enumerate(turns)
    ]  # fmt: skip
    stored = client.post("/v1/memories/batch", json={"memories": memories})
    assert stored.status_code in (200, 201), stored.text


def test_scope_splits_the_current_conversation_from_long_term_memory(
    client: TestClient[Litestar],
) -> None:
    _capture_turns(client, "session-old", ["User: my sister Ana lives in Porto near the river."])
    _capture_turns(client, "session-now", ["User: my sister Ana just moved to Braga."])
    fact = _call(client, "memory_capture", {"content": "Ana is my sister and works as a nurse."})
    query = {"query": "where does my sister Ana live?", "minScore": 0.0, "maxResults": 20}

    def texts(**extra: Any) -> set[str]:
        found = _call(client, "memory_search", {**query, **extra})
        return {r["snippet"].split("\n\nSource:")[0] for r in found["results"]}

    everything = texts()
    now = texts(scope="session", conversationId="session-now")
    assert now == {"User: my sister Ana just moved to Braga."}
    later = texts(scope="long-term", conversationId="session-now")
    assert "User: my sister Ana just moved to Braga." not in later
    assert {"User: my sister Ana lives in Porto near the river.",
            "Ana is my sister and works as a nurse."} <= later  # fmt: skip
    assert later | now == everything and texts(scope="all", conversationId="session-now") == (
        everything
    )
    # long-term without a conversation leaves nothing out; session needs one.
    assert texts(scope="long-term") == everything
    refused = client.post(
        "/v1/tools/memory_search", json={**query, "scope": "session"}, headers={"X-Agent-Id": AGENT}
    )
    assert refused.status_code == 400 and "conversationId" in refused.json()["detail"]
    assert fact["path"] in {
        r["path"]
        for r in _call(client, "memory_search", {**query, "scope": "long-term"})["results"]
    }


MEMORY_CORE_PATHS = ["MEMORY.md", "USER.md", "DREAMS.md", "dreams.md", "memory/*.md"]
"""The path patterns the OpenClaw plugin sends (integrations/openclaw/lib/paths.js)."""


def test_path_patterns_leave_out_files_memory_core_would_refuse(
    client: TestClient[Litestar],
) -> None:
    bootstrap = "# Agents\n\nAlways check the billing runbook on db-billing-01 first.\n"
    ingested = client.post(
        "/v1/documents", json={"path": "AGENTS.md", "text": bootstrap, "owner": AGENT}
    )
    assert ingested.status_code in (200, 201), ingested.text
    query = {"query": "billing runbook db-billing-01", "minScore": 0.0, "maxResults": 20}
    paths = {r["path"] for r in _call(client, "memory_search", query)["results"]}
    assert "AGENTS.md" in paths
    kept = _call(client, "memory_search", {**query, "paths": MEMORY_CORE_PATHS})["results"]
    assert kept and all(r["path"] != "AGENTS.md" for r in kept)
    assert {r["path"] for r in kept} == paths - {"AGENTS.md"}
    # The knowledge block the plugin asks for leaves it out too, neighbours included.
    prompt = {"prompt": "What should I check for the billing runbook on db-billing-01?",
              "agent_id": AGENT, "top_k": 5, "min_score": 0.0}  # fmt: skip
    assert "AGENTS.md" in client.post("/v1/context", json=prompt).json()["context"]
    block = client.post("/v1/context", json={**prompt, "paths": MEMORY_CORE_PATHS}).json()
    assert block["context"] and "AGENTS.md" not in block["context"]
    shown = block["hits"] + block["neighbors"]
    assert shown and all(item["path"] != "AGENTS.md" for item in shown)


def test_knowledge_block_scope_leaves_out_the_current_conversation(
    client: TestClient[Litestar],
) -> None:
    _capture_turns(client, "s-earlier", ["User: the kestrel cluster was resized to 12 nodes."])
    _capture_turns(client, "s-current", ["User: the kestrel cluster now runs on arm64 nodes."])
    prompt = {"prompt": "How many nodes does the kestrel cluster have?", "agent_id": AGENT,
              "top_k": 10, "min_score": 0.0, "include_neighbors": False}  # fmt: skip
    everything = client.post("/v1/context", json=prompt).json()["context"]
    assert "arm64" in everything and "12 nodes" in everything
    long_term = client.post(
        "/v1/context", json={**prompt, "scope": "long-term", "conversation_id": "s-current"}
    ).json()["context"]
    assert "12 nodes" in long_term and "arm64" not in long_term
    session = client.post(
        "/v1/context", json={**prompt, "scope": "session", "conversation_id": "s-current"}
    ).json()
    assert "arm64" in session["context"] and "12 nodes" not in session["context"]
    refused = client.post("/v1/context", json={**prompt, "scope": "session"})
    assert refused.status_code == 400


def test_what_long_term_searches_learn_serves_later_sessions(
    client: TestClient[Litestar],
) -> None:
    """Leaving out the current conversation does not split what is learned per session."""
    _capture_turns(client, "s-3", ["User: the billing database machine is db-billing-02 now."])
    query = {"query": "which machine hosts the billing database?", "maxResults": 6.0,
             "minScore": 0.0, "scope": "long-term", "paths": MEMORY_CORE_PATHS}  # fmt: skip
    for session in ("s-1", "s-2", "s-1"):
        answer = _call(client, "memory_search", {**query, "conversationId": session})
        # The workspace's answer (s-3's own turn is not excluded from s-1 and s-2).
        used = next(r["path"] for r in answer["results"] if "db-billing-02" not in r["snippet"])
        assert any("db-billing-02" in r["snippet"] for r in answer["results"])
        _call(
            client, "memory_feedback", {"retrievalId": answer["retrievalId"], "usedPaths": [used]}
        )
    later = _call(client, "memory_search", {**query, "conversationId": "s-3"})
    assert later["debug"]["cached"] is True and later["results"][0]["path"] == used
    # The cached answer still leaves out the conversation it is asked from.
    assert all("db-billing-02" not in r["snippet"] for r in later["results"])

"""Issue 18's done-check: "what does the deployment section say about rollbacks?".

A small Markdown documentation tree is ingested with the CLI (real model,
LanceDB and SQLite in a tmp dir); the question is then asked through HTTP,
the CLI and MCP (the SDK client over stdio) in mode ``automatic``, and each
answer must hold the Rollbacks section's summary, the chunk that tells how to
roll back, and that chunk's parent heading.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from litestar.testing import TestClient
from local import LOCAL_URL
from mcp import StdioServerParameters
from test_mcp import _answer, _env, _stdio_session
from typer.testing import CliRunner

from tribal_memory.base.config import Settings
from tribal_memory.embeddings.fastembed import FastEmbedEmbedder
from tribal_memory.interfaces import cli
from tribal_memory.interfaces.api import create_app

pytestmark = pytest.mark.slow

QUESTION = "what does the deployment section say about rollbacks?"
TREE = {
    "shared/handbook/deployment.md": """# Deployment

Releases are built by CI from the main branch and deployed by the release manager.
Every release gets a tag such as v2024.11.3 and goes to staging an hour first.

## Schedule

Deploys run on Tuesdays and Thursdays after the standup. No deploys on Fridays.

## Rollbacks

To roll back a release, run ./rewind.sh with the previous release tag. A rollback takes
about five minutes and needs no approval. After a rollback, open an incident ticket and
tell the on-call channel. Database migrations are never rolled back by hand.
""",
    "shared/handbook/monitoring.md": """# Monitoring

Dashboards live in Grafana. Alerts page the on-call engineer through PagerDuty.

## Alert rules

Alert rules are reviewed every quarter. A rule that fired without action is removed.
""",
    "shared/onboarding.md": """# Onboarding

New engineers get a laptop on their first day and pair with a buddy for two weeks.
They ship a small change to production, with a deploy and a rollback drill, in week one.
""",
}
ROLLBACK_TEXT = "./rewind.sh"


def _check(hits: list[dict[str, Any]], contexts: dict[str, Any]) -> None:
    """The Rollbacks summary first, the rollback chunk, and its parent heading chunk."""
    first = hits[0]
    assert first["kind"] == "summary", first
    assert first["metadata"]["heading"] == "Deployment > Rollbacks"
    assert ROLLBACK_TEXT in first["content"]
    chunk = next(h for h in hits if h["kind"] == "chunk" and ROLLBACK_TEXT in h["content"])
    assert chunk["metadata"]["heading"] == "Deployment > Rollbacks"
    parent = contexts[chunk["memory_id"]]["parent"]
    assert parent is not None and parent["content"].startswith("# Deployment\n")


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("done")
    for relative, text in TREE.items():
        path = root / "kb" / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    data = root / "data"
    result = CliRunner().invoke(
        cli.app, ["ingest", str(root / "kb"), "--json", "--data-dir", str(data)]
    )
    assert result.exit_code == 0, result.output
    return data


def test_over_http(data_dir: Path, embedder: FastEmbedEmbedder) -> None:
    app = create_app(Settings(data_dir=data_dir), embedder=embedder)
    with TestClient(base_url=LOCAL_URL, app=app) as client:
        response = client.post(
            "/v1/search", json={"query": QUESTION, "mode": "automatic", "context": True, "k": 5}
        )
        assert response.status_code == 200, response.text
        body = response.json()
    assert body["mode"] == "title"
    assert body["mode_reason"] == "automatic: the query names a section or chapter"
    contexts = {entry["memory_id"]: entry for entry in body["context"]}
    _check(body["hits"], contexts)


def test_over_the_cli(data_dir: Path) -> None:
    result = CliRunner().invoke(
        cli.app,
        [
            "search", QUESTION, "--mode", "automatic", "--context", "-k", "5", "--json",
            "--data-dir", str(data_dir),
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    hits = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
    assert {(h["mode"], h["mode_reason"]) for h in hits} == {
        ("title", "automatic: the query names a section or chapter")
    }
    _check(hits, {h["memory_id"]: h["context"] for h in hits})


def test_over_mcp(data_dir: Path) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "tribal_memory", "mcp", "--data-dir", str(data_dir), "--agent", "ann"],
        env=_env(),
    )

    async def main() -> dict[str, Any]:
        async with _stdio_session(params) as session:
            await session.initialize()
            return _answer(
                await session.call_tool(
                    "memory_search", {"query": QUESTION, "mode": "automatic", "minScore": 0}
                )
            )

    found = anyio.run(main)
    assert found["searchMode"] == "title" and "section" in found["modeReason"]
    first, *rest = found["results"]
    assert first["snippet"].startswith("shared/handbook/deployment.md § Deployment > Rollbacks\n")
    assert ROLLBACK_TEXT in first["snippet"]
    assert any(
        r["path"] == "shared/handbook/deployment.md" and ROLLBACK_TEXT in r["snippet"] for r in rest
    )


def test_openapi_lists_the_modes_and_mode_reason(
    data_dir: Path, embedder: FastEmbedEmbedder
) -> None:
    app = create_app(Settings(data_dir=data_dir), embedder=embedder)
    with TestClient(base_url=LOCAL_URL, app=app) as client:
        spec = client.get("/schema/openapi.json").json()
    schemas = spec["components"]["schemas"]
    request = next(s for name, s in schemas.items() if name.endswith("SearchRequest"))
    modes = set(request["properties"]["mode"]["enum"])
    assert {"title", "summary", "automatic", "hybrid_expanded"} <= modes
    answer = schemas["SearchOut"]
    assert "mode_reason" in answer["properties"]
    assert {"title", "summary"} <= set(answer["properties"]["mode"]["enum"])
    assert {"searchMode", "modeReason"} <= set(schemas["MemorySearchOut"]["properties"])
    assert "mode" in schemas["MemorySearchIn"]["properties"]

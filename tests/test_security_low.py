"""Low-severity findings of the issue-26 probe, each sent as the probe sent it over HTTP.

Items 11 (document paths), 14 (LLM summaries outside the document lock),
16 (PDF text caps) and 17 (query-cache entries of filtered searches); item 13
(MCP over stdio) is in ``test_mcp_stdio_limits.py``.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from litestar import Litestar
from litestar.testing import TestClient
from local import LOCAL_URL

from tribal_memory.base.config import Settings
from tribal_memory.embeddings.fastembed import FastEmbedEmbedder
from tribal_memory.interfaces.api import create_app


def _assert_error(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body: dict[str, Any] = response.json()
    assert body["error"] == code and body["status"] == status and body["detail"]
    assert "Traceback" not in response.text
    return body


@pytest.fixture
def client(tmp_path: Path, embedder: FastEmbedEmbedder) -> Iterator[TestClient[Litestar]]:
    settings = Settings(data_dir=tmp_path / "data")  # keyless loopback: the exposed default
    with TestClient(base_url=LOCAL_URL, app=create_app(settings, embedder=embedder)) as c:
        yield c


def _document(path: str, text: str) -> dict[str, str]:
    return {"path": path, "content_base64": base64.b64encode(text.encode()).decode("ascii")}


# -- 11. document paths ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "stored"),
    [
        ("/abs/okapi.md", "abs/okapi.md"),
        ("C:\\x\\y.md", "x/y.md"),
        ("notes/./drafts/../zebra.md", "notes/zebra.md"),
    ],
)
def test_document_paths_are_stored_as_memory_get_reads_them(
    client: TestClient[Litestar], given: str, stored: str
) -> None:
    text = f"# Okapi\n\nThe okapi lives in the Ituri rainforest ({stored}).\n"
    response = client.post("/v1/documents", json=_document(given, text))
    assert response.status_code == 201, response.text
    assert response.json()["path"] == stored
    assert [d["path"] for d in client.get("/v1/documents").json()["documents"]] == [stored]
    hits = client.post("/v1/search", json={"query": "okapi rainforest"}).json()["hits"]
    assert hits and {hit["source"] for hit in hits} == {stored}
    # The path the agent is shown, and the one it was given, both read the document back.
    for path in (stored, given):
        read = client.post("/v1/tools/memory_get", json={"path": path}).json()
        assert read["status"] == "ok", read
        assert "Ituri rainforest" in read["text"]
    assert client.request("DELETE", "/v1/documents", params={"path": given}).status_code == 200
    assert client.get("/v1/documents").json()["documents"] == []


@pytest.mark.parametrize("path", ["../up/zebra.md", "a/../../zebra.md", "/", "./."])
def test_document_paths_outside_the_workspace_are_400(
    client: TestClient[Litestar], path: str
) -> None:
    response = client.post("/v1/documents", json=_document(path, "# Zebra\n\nStripes.\n"))
    body = _assert_error(response, 400, "invalid_input")
    if ".." in path:
        assert "climbs out of the document workspace" in body["detail"]
    assert client.get("/v1/documents").json()["documents"] == []
    assert client.get("/v1/stats").json()["memories"] == 0

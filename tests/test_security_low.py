"""Low-severity findings of the issue-26 probe, each sent as the probe sent it over HTTP.

Items 11 (document paths), 14 (LLM summaries outside the document lock),
16 (PDF text caps) and 17 (query-cache entries of filtered searches); item 13
(MCP over stdio) is in ``test_mcp_stdio_limits.py``.
"""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from litestar import Litestar
from litestar.testing import TestClient
from local import LOCAL_URL
from pdfs import pdf_body, pdf_of

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


# -- 16. PDF content caps ---------------------------------------------------------------


SHAPES = b"1 0 0 1 0 0 cm 0 0 m 1 1 l S\n"
"""Drawing operators without text: a page of them gives nothing to the character limit."""
TEXT = b"BT /F1 12 Tf 72 720 Td (Okapis live in the Ituri rainforest.) Tj ET\n"


@pytest.mark.parametrize(
    ("content", "pages", "where"),
    [
        (SHAPES * 200_000, 1, "on page 1"),  # 20 KB of file, 5.8 MB of operators
        (TEXT * 2_000 + SHAPES * 120_000, 8, "by page"),  # 3.6 MB a page, 8 pages
    ],
)
def test_a_pdf_whose_streams_expand_too_far_is_413_before_extraction(
    client: TestClient[Litestar], content: bytes, pages: int, where: str
) -> None:
    data = pdf_of(content, pages)
    assert len(data) < 30_000
    response = client.post("/v1/documents", json=pdf_body(data))
    body = _assert_error(response, 413, "too_large")
    assert "content streams decode to over" in body["detail"] and where in body["detail"]
    assert client.get("/v1/stats").json()["memories"] == 0
    # The worker is free: an ordinary PDF goes in at once.
    ordinary = client.post("/v1/documents", json=pdf_body(pdf_of(TEXT * 20)))
    assert ordinary.status_code == 201, ordinary.text


# -- 14. LLM summaries outside the document lock ----------------------------------------

SLOW = "SLOW-OKAPI"
"""A section holding this word gets no answer from :class:`_Llm` until it is released."""
WAIT_S = 90.0
"""Generous bound on any wait below (model load and a loaded machine included)."""


class _Llm:
    """A chat-completions endpoint on 127.0.0.1: silent on ``SLOW`` sections, else quick."""

    def __init__(self) -> None:
        self.asked_slow = threading.Event()
        self.release = threading.Event()
        llm = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers["content-length"]))
                if SLOW.encode() in body:
                    llm.asked_slow.set()
                    llm.release.wait(WAIT_S)  # no answer until released
                answer = {"choices": [{"message": {"content": "Okapis are shy forest giraffids."}}]}
                data = json.dumps(answer).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet."""

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> _Llm:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


def test_an_llm_summary_that_waits_does_not_block_another_owners_ingest(
    tmp_path: Path, embedder: FastEmbedEmbedder
) -> None:
    with _Llm() as llm:
        settings = Settings(
            data_dir=tmp_path / "data",
            summaries="llm",
            llm_url=llm.url,
            summary_llm_timeout_s=WAIT_S,
        )
        app = create_app(settings, embedder=embedder)
        with TestClient(base_url=LOCAL_URL, app=app) as client:
            slow_doc = f"# Okapi\n\nThe okapi ({SLOW}) lives in the Ituri rainforest of Congo.\n"
            fast_doc = "# Zebra\n\nThe zebra lives on the open savanna of East Africa.\n"
            answers: dict[str, httpx.Response] = {}

            def ingest(owner: str, path: str, text: str) -> None:
                body = {**_document(path, text), "owner": owner}
                answers[owner] = client.post("/v1/documents", json=body)

            alice = threading.Thread(target=ingest, args=("alice", "okapi.md", slow_doc))
            alice.start()
            assert llm.asked_slow.wait(WAIT_S), "alice's summary never reached the LLM"
            bob = threading.Thread(target=ingest, args=("bob", "zebra.md", fast_doc))
            bob.start()
            bob.join(WAIT_S)  # today: bob waits for the document lock alice holds
            try:
                assert not bob.is_alive(), "bob's ingest waited for alice's LLM summary"
                assert alice.is_alive()  # alice's summary is still unanswered
                assert answers["bob"].status_code == 201, answers["bob"].text
            finally:
                llm.release.set()
                alice.join(WAIT_S)
                bob.join(WAIT_S)
            assert answers["alice"].status_code == 201, answers["alice"].text
            summaries = client.post(
                "/v1/search",
                json={"query": "okapi", "mode": "summary"},
                headers={"x-agent-id": "alice"},
            ).json()["hits"]
            assert any(hit["metadata"].get("method") == "llm" for hit in summaries)


# -- 17. query-cache entries of filtered searches -----------------------------------------

OWNER = "agent-a"
QUESTION = "when can I ship to prod?"
MOBILE = "Mobile release trains ship to the app stores every second Wednesday"
FACTS = (
    "Deploys to production happen on Tuesdays and Thursdays after 10am",
    "The staging database runs PostgreSQL 15 on host db-stage-2",
    "The on-call rotation changes every Monday at 9am",
)


def _ask(client: TestClient[Litestar], **fields: Any) -> dict[str, Any]:
    body = {"query": QUESTION, "owner": OWNER, "k": 3, **fields}
    response = client.post("/v1/search", json=body)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


@pytest.mark.parametrize("field", ["tags", "kinds", "sources", "near"])
def test_a_filtered_searchs_cache_entry_never_answers_the_unfiltered_search(
    client: TestClient[Litestar], field: str
) -> None:
    memories = [{"content": text, "owner": OWNER} for text in FACTS]
    memories.append(
        {
            "content": MOBILE,
            "owner": OWNER,
            "tags": ["mobile"],
            "kind": "document",
            "source": "mobile-handbook",
        }
    )
    response = client.post("/v1/memories/batch", json={"memories": memories})
    assert response.status_code == 200, response.text
    mobile = response.json()["results"][-1]["memory"]["memory_id"]
    narrowing: dict[str, Any] = {
        "tags": {"tags": ["mobile"]},
        "kinds": {"kinds": ["document"]},
        "sources": {"sources": ["mobile-handbook"]},
        "near": {"near": mobile},  # the memory's neighbourhood: itself (no relations)
    }[field]
    for _ in range(3):  # cache_min_successes: the entry answers from now on
        answer = _ask(client, feedback=True, **narrowing)
        assert [hit["memory_id"] for hit in answer["hits"]] == [mobile]
        sent = {"retrieval_id": answer["retrieval_id"], "used_ids": [mobile]}
        assert client.post("/v1/feedback", json=sent).status_code == 200

    unfiltered = _ask(client)
    assert unfiltered["cached"] is False
    assert not any(hit["cached"] for hit in unfiltered["hits"])
    assert len(unfiltered["hits"]) == 3  # a real search, not the one cached memory

    again = _ask(client, **narrowing)  # the same filters may still be answered from the cache
    assert again["cached"] is True
    assert [hit["memory_id"] for hit in again["hits"]] == [mobile]

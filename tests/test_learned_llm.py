"""LLM query expansion against a local fake OpenAI-compatible endpoint.

The fake is a deterministic stdlib HTTP server on 127.0.0.1 (a real LLM cannot
run here); everything else is real: model, LanceDB and SQLite in tmp dirs.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tribal_memory.base.config import Settings
from tribal_memory.base.models import MemoryInput, SearchFilters
from tribal_memory.embeddings.fastembed import FastEmbedEmbedder
from tribal_memory.learned.expander import LlmVariants
from tribal_memory.service.memory_service import MemoryService

OWNER = "agent-a"
MINE = SearchFilters(owner=OWNER)
FACTS = {
    "vpn": "The VPN host is vpn.example.org, port 1194",
    "badge": "Badge readers at the north entrance accept blue visitor cards",
    "cluster": "Our Kubernetes cluster runs in the eu-west-1 region",
    "frontend": "The frontend is built with React and TypeScript",
    "limits": "API rate limits are 100 requests per minute per token",
}
TAUGHT = "What is the VPN host?"
ASKED = "What's the VPN server host?"
"""A rewording of ``TAUGHT`` (another cache key) that shares no word with ``badge``."""
BADGE_VARIANT = "badge readers entrance"


@dataclass
class FakeChat:
    """What the fake endpoint does: answer ``content``, fail with ``status``, or stall.

    ``stall``: hold every request until the server stops. ``trickle_s``: send
    the answer one byte at a time with this pause between bytes.
    """

    content: str = "keyword one\nkeyword two"
    status: int = 200
    stall: bool = False
    trickle_s: float = 0.0
    requests: list[dict[str, Any]] = field(default_factory=list)
    stopping: threading.Event = field(default_factory=threading.Event)


def _handler(fake: FakeChat) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802  # the http.server hook name
            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(length) or b"{}")
            fake.requests.append({"path": self.path, "body": body})
            if fake.stall:
                fake.stopping.wait(30)
            payload = json.dumps({"choices": [{"message": {"content": fake.content}}]})
            data = payload.encode() if fake.status == 200 else b'{"error": "boom"}'
            try:
                self.send_response(fake.status if self.path == "/v1/chat/completions" else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if fake.trickle_s:
                    for i in range(len(data)):
                        self.wfile.write(data[i : i + 1])
                        self.wfile.flush()
                        time.sleep(fake.trickle_s)
                else:
                    self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (the timeout under test)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass

    return Handler


@pytest.fixture
def fake_llm() -> Iterator[tuple[FakeChat, str]]:
    """A fake chat endpoint in a background thread; yields it and its base URL."""
    fake = FakeChat()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(fake))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield fake, f"http://127.0.0.1:{server.server_address[1]}/v1"
    fake.stopping.set()
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


def llm_service(
    tmp_path: Path, embedder: FastEmbedEmbedder, url: str, **overrides: Any
) -> tuple[MemoryService, dict[str, str]]:
    """A service using ``url`` for LLM variants, with ``FACTS`` and one feedback on ``TAUGHT``.

    The feedback gives the owner past queries, which switch expansion on.
    """
    settings = Settings(data_dir=tmp_path / "data", llm_url=url, llm_model="fake", **overrides)
    svc = MemoryService(settings, embedder=embedder)
    results = svc.capture_batch([MemoryInput(text, owner=OWNER) for text in FACTS.values()])
    ids = {name: r.memory.memory_id for name, r in zip(FACTS, results, strict=True)}
    taught = svc.recall_with_feedback(TAUGHT, k=5, filters=MINE)
    assert taught.retrieval_id is not None
    svc.record_usage_feedback(taught.retrieval_id, [ids["vpn"]])
    return svc, ids


def test_llm_variants_are_the_lines_of_the_answer(fake_llm: tuple[FakeChat, str]) -> None:
    fake, url = fake_llm
    llm = LlmVariants(url, "fake-model", timeout_s=5.0)
    try:
        assert llm("What is the VPN host?") == ["keyword one", "keyword two"]
    finally:
        llm.close()
    [request] = fake.requests
    assert request["path"] == "/v1/chat/completions"
    assert request["body"]["model"] == "fake-model"
    assert request["body"]["messages"][-1] == {"role": "user", "content": "What is the VPN host?"}


def test_search_ranks_a_memory_found_only_by_an_llm_variant(
    fake_llm: tuple[FakeChat, str], tmp_path: Path, embedder: FastEmbedEmbedder
) -> None:
    fake, url = fake_llm
    fake.content = f"{BADGE_VARIANT}\nkeyword two"
    svc, ids = llm_service(tmp_path, embedder, url, llm_timeout_s=5.0)
    with svc:
        calls = svc.learner.counters["llm_calls"]
        result = svc.search(ASKED, k=5, filters=MINE)
        assert svc.learner.counters["llm_calls"] == calls + 1
        assert any(r["body"]["messages"][-1]["content"] == ASKED for r in fake.requests)
        badge = next(h for h in result.hits if h.memory.memory_id == ids["badge"])
        assert badge.text_score is None  # the question alone does not match it on BM25
        assert badge.expanded_from == BADGE_VARIANT
        assert svc.retrieval_stats().llm_failures == 0


@pytest.mark.parametrize("failure", ["status_500", "too_slow"])
def test_search_survives_a_failing_llm_endpoint(
    fake_llm: tuple[FakeChat, str], tmp_path: Path, embedder: FastEmbedEmbedder, failure: str
) -> None:
    fake, url = fake_llm
    if failure == "status_500":
        fake.status = 500
    else:
        fake.stall = True  # never answers while the test runs
    svc, ids = llm_service(tmp_path, embedder, url, llm_timeout_s=0.2)
    with svc:
        result = svc.search(ASKED, k=5, filters=MINE)
        assert result.hits[0].memory.memory_id == ids["vpn"]
        assert all(h.expanded_from != "keyword one" for h in result.hits)
        stats = svc.retrieval_stats()
        assert stats.llm_calls >= 1
        assert stats.llm_failures == stats.llm_calls
    assert fake.requests


def test_an_llm_answer_later_than_the_timeout_is_dropped(
    fake_llm: tuple[FakeChat, str], tmp_path: Path, embedder: FastEmbedEmbedder
) -> None:
    fake, url = fake_llm
    fake.content = BADGE_VARIANT
    # About 90 bytes, one every 0.05 s: the answer is complete after ~4.5 s, far past
    # the 1 s limit, while no single read waits anywhere near 1 s.
    fake.trickle_s = 0.05
    svc, ids = llm_service(tmp_path, embedder, url, llm_timeout_s=1.0)
    with svc:
        result = svc.search(ASKED, k=5, filters=MINE)
        assert all(h.expanded_from != BADGE_VARIANT for h in result.hits)
        assert svc.retrieval_stats().llm_failures == 1

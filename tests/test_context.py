"""The ``<knowledge-graph>`` context block: skip rules, format, neighbours, budget, feedback."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from litestar import Litestar
from litestar.testing import TestClient
from local import LOCAL_URL
from typer.testing import CliRunner

from tribal_memory.base.config import Settings
from tribal_memory.base.models import MemoryInput
from tribal_memory.documents import load_document
from tribal_memory.embeddings.fastembed import FastEmbedEmbedder
from tribal_memory.interfaces import cli
from tribal_memory.interfaces.api import create_app
from tribal_memory.interfaces.context import (
    CLOSE_TAG,
    HEADER,
    NEIGHBORS_HEADER,
    OPEN_TAG,
    build_context,
    count_tokens,
)
from tribal_memory.service.memory_service import MemoryService

HIT_LINE = re.compile(
    r"^- \[(?P<label>[^\]]+)\] (?P<title>.+) \((?P<pct>\d+)% match, owner: (?P<owner>.+)\)$"
)
NEIGHBOR_LINE = re.compile(r"^- \[(?P<label>[^\]]+)\] (?P<title>.+) \(owner: (?P<owner>.+)\)$")

DEPLOY_DOC = """# Deploys

## Schedule

Deploys go out with Ansible on Tuesdays and Thursdays after the stand-up meeting.

## Rollback

To roll back a failed deploy, run make deploy TAG=previous from the ops repository.

## Announcements

Every deploy and every rollback is announced in the ops channel with the tag name.
"""


def _capture(service: MemoryService, content: str, owner: str = "alice", **kw: object) -> str:
    return service.capture(MemoryInput(content=content, owner=owner, **kw)).memory.memory_id


@pytest.fixture
def loaded(service: MemoryService, tmp_path: Path) -> dict[str, str]:
    """Facts of alice, bob and shared, a relation, and a small document of alice's."""
    ids = {
        "db": _capture(service, "We chose PostgreSQL for the billing database", tags=("decision",)),
        "backup": _capture(service, "The billing database is backed up nightly at 02:00 UTC"),
        "tea": _capture(service, "Alice prefers green tea over coffee", tags=("preference",)),
        "bob": _capture(service, "Bob keeps the billing database passwords in a vault", "bob"),
        "shared": _capture(service, "Release notes are written on Fridays", "shared"),
    }
    service.relate(ids["db"], ids["backup"], "operated_by")
    service.relate(ids["db"], ids["bob"], "mentioned_by")
    service.relate(ids["backup"], ids["shared"], "announced_in")
    (tmp_path / "deploys.md").write_text(DEPLOY_DOC, encoding="utf-8")
    chunks = load_document(tmp_path / "deploys.md", owner="alice", root=tmp_path, max_tokens=24)
    service.capture_batch(chunks)
    service.optimize()
    return ids


def _lines(block: str) -> list[str]:
    lines = block.split("\n")
    assert lines[0] == OPEN_TAG and lines[1] == HEADER and lines[2] == "" and lines[-1] == CLOSE_TAG
    return lines


@pytest.mark.parametrize(
    ("prompt", "reason"),
    [
        ("", "prompt_too_short"),
        ("  hi  ", "prompt_too_short"),
        ("abcd", "prompt_too_short"),
        (f"{OPEN_TAG}\n- [fact] x\n{CLOSE_TAG}\nwhat about billing?", "already_injected"),
    ],
)
def test_skipped_prompts_do_not_search(
    service: MemoryService, loaded: dict[str, str], prompt: str, reason: str
) -> None:
    before = service.retrieval_stats().overall.retrievals
    built = build_context(service, prompt, owner="alice")
    assert (built.context, built.skipped_reason, built.retrieval_id) == ("", reason, None)
    assert built.hits == () and built.tokens == 0
    assert service.retrieval_stats().overall.retrievals == before


def test_block_lists_hits_then_graph_neighbors(
    service: MemoryService, loaded: dict[str, str]
) -> None:
    built = build_context(service, "which database do we use for billing?", owner="alice", top_k=1)
    assert built.skipped_reason is None and built.retrieval_id is not None
    lines = _lines(built.context)
    assert built.hits[0].memory.memory_id == loaded["db"]
    for line, hit in zip(lines[3:], built.hits, strict=False):
        match = HIT_LINE.match(line)
        assert match is not None, line
        assert int(match["pct"]) == round(hit.score * 100)
        assert match["owner"] == hit.memory.owner and match["label"] == hit.label
    assert lines[3].startswith("- [decision] We chose PostgreSQL for the billing database (")
    assert NEIGHBORS_HEADER in lines
    neighbor_lines = lines[lines.index(NEIGHBORS_HEADER) + 1 : -1]
    assert neighbor_lines and all(NEIGHBOR_LINE.match(line) for line in neighbor_lines)
    shown = {n.memory.memory_id for n in built.neighbors}
    hit_ids = {h.memory.memory_id for h in built.hits}
    assert not shown & hit_ids
    assert loaded["backup"] in shown
    backup = next(n for n in built.neighbors if n.memory.memory_id == loaded["backup"])
    assert backup.via == "operated_by" and backup.score is None
    # bob's memory is related, but alice cannot see it; an all-owner caller can.
    assert loaded["bob"] not in shown | hit_ids
    assert all("Bob keeps" not in line for line in lines)
    admin = build_context(service, "which database do we use for billing?", owner=None, top_k=1)
    assert loaded["bob"] in {n.memory.memory_id for n in admin.neighbors}


def test_memories_sharing_a_tag_are_neighbours_and_never_another_owners(
    service: MemoryService,
) -> None:
    hit = _capture(
        service, "We chose PostgreSQL for the billing database", tags=("decision", "billing")
    )
    both = _capture(service, "Invoices are kept for ten years", tags=("billing", "decision"))
    one = _capture(service, "We chose Kafka for the event bus", tags=("decision",))
    _capture(service, "Bob chose Redis for caching", "bob", tags=("decision",))
    _capture(service, "Alice likes green tea", tags=("preference",))
    built = build_context(service, "which database do we use for billing?", owner="alice", top_k=1)
    assert built.hits[0].memory.memory_id == hit
    tagged = [(n.memory.memory_id, n.via) for n in built.neighbors]
    # Most shared tags first; bob's memory shares a tag but alice cannot see it.
    assert tagged == [(both, "tag:decision"), (one, "tag:decision")]
    assert all("Redis" not in line and "tea" not in line for line in _lines(built.context))


def test_document_chunks_bring_their_neighbours_and_paths(
    service: MemoryService, loaded: dict[str, str]
) -> None:
    built = build_context(service, "how do I roll back a failed deploy?", owner="alice", top_k=1)
    (hit,) = built.hits
    assert hit.label == "document" and hit.path == "deploys.md"
    assert hit.title.startswith("deploys.md › Deploys > Rollback")
    same_document = [n for n in built.neighbors if n.via == "same_document"]
    assert same_document
    assert {n.memory.chunk_index for n in same_document} <= {
        hit.memory.chunk_index - 1,
        hit.memory.chunk_index + 1,
    }
    plain = build_context(
        service, "how do I roll back a failed deploy?", owner="alice", include_neighbors=False
    )
    assert NEIGHBORS_HEADER not in plain.context and plain.neighbors == ()


def test_budget_drops_neighbours_first_then_hits_then_shortens(
    service: MemoryService, loaded: dict[str, str]
) -> None:
    prompt = "which database do we use for billing and how is it backed up?"
    full = build_context(service, prompt, owner="alice", top_k=3, max_tokens=10_000)
    assert full.neighbors and len(full.hits) >= 2
    assert full.tokens == count_tokens(full.context)
    without_neighbors = build_context(service, prompt, owner="alice", include_neighbors=False)
    budget = without_neighbors.tokens
    cut = build_context(service, prompt, owner="alice", top_k=3, max_tokens=budget)
    assert cut.tokens <= budget and cut.neighbors == () and cut.hits == without_neighbors.hits
    one_hit = build_context(service, prompt, owner="alice", top_k=3, max_tokens=budget - 1)
    assert len(one_hit.hits) < len(full.hits) and one_hit.tokens <= budget - 1
    tiny = count_tokens(
        f"{OPEN_TAG}\n{HEADER}\n\n- [decision] We (55% match, owner: alice)\n{CLOSE_TAG}"
    )
    shortened = build_context(service, prompt, owner="alice", max_tokens=tiny)
    assert shortened.tokens <= tiny and len(shortened.hits) == 1
    assert shortened.hits[0].title.endswith("…")
    assert build_context(service, prompt, owner="alice", max_tokens=3).skipped_reason == (
        "budget_too_small"
    )


def test_setting_sets_the_default_budget(tmp_path: Path, embedder: FastEmbedEmbedder) -> None:
    settings = Settings(data_dir=tmp_path / "small", context_max_tokens=40)
    with MemoryService(settings, embedder=embedder) as small:
        for n in range(6):
            _capture(small, f"Billing fact number {n}: invoices are archived for {n + 5} years")
        built = build_context(small, "how long are invoices archived?", owner="alice", top_k=6)
        assert 0 < built.tokens <= 40 and len(built.hits) < 6


@pytest.fixture
def client(settings: Settings, embedder: FastEmbedEmbedder) -> Iterator[TestClient[Litestar]]:
    with TestClient(base_url=LOCAL_URL, app=create_app(settings, embedder=embedder)) as test_client:
        yield test_client


def test_context_over_http_with_feedback(client: TestClient[Litestar]) -> None:
    for content in (
        "We chose PostgreSQL for the billing database",
        "The billing database is backed up nightly",
        "Lunch is served at noon",
    ):
        body = {"content": content, "owner": "alice", "tags": ["billing"]}
        assert client.post("/v1/memories", json=body).status_code == 201
    answer = client.post(
        "/v1/context",
        json={"prompt": "what database is billing on?", "agent_id": "alice", "top_k": 2},
    )
    assert answer.status_code == 200
    body = answer.json()
    assert set(body) == {"context", "skipped_reason", "retrieval_id", "hits", "neighbors", "tokens"}
    assert body["context"].startswith(OPEN_TAG) and body["skipped_reason"] is None
    assert len(body["hits"]) <= 2
    top = body["hits"][0]
    assert top["path"] == f"memory/{top['memory_id']}.md" and top["label"] == "billing"
    assert 0.0 <= top["score"] <= 1.0 and top["via"] is None
    used = client.post(
        "/v1/feedback", json={"retrieval_id": body["retrieval_id"], "used_ids": [top["memory_id"]]}
    )
    assert used.status_code == 200 and used.json()["used"] == [top["memory_id"]]
    skipped = client.post("/v1/context", json={"prompt": "hey"}).json()
    assert skipped["context"] == "" and skipped["skipped_reason"] == "prompt_too_short"
    assert skipped["retrieval_id"] is None
    bad = client.post("/v1/context", json={"prompt": "what database?", "top_k": 0})
    assert bad.status_code == 400
    unknown_field = client.post("/v1/context", json={"prompt": "what database?", "k": 2})
    assert unknown_field.status_code == 400


def test_context_command(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    runner = CliRunner()
    capture = runner.invoke(
        cli.app,
        [
            "capture",
            "We chose PostgreSQL for billing",
            "--owner",
            "alice",
            "--tag",
            "decision",
            "--data-dir",
            str(data_dir),
            "--json",
        ],
    )
    assert capture.exit_code == 0, capture.output
    result = runner.invoke(
        cli.app,
        [
            "context",
            "which database for billing?",
            "--agent",
            "alice",
            "--data-dir",
            str(data_dir),
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    body = json.loads(result.stdout)
    assert body["context"].split("\n")[3].startswith("- [decision] We chose PostgreSQL")
    assert body["retrieval_id"]
    short = runner.invoke(cli.app, ["context", "hi", "--data-dir", str(data_dir), "--json"])
    assert short.exit_code == 0 and json.loads(short.stdout)["skipped_reason"] == "prompt_too_short"

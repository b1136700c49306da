"""API keys and per-owner scoping over the real HTTP app, model and stores."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from litestar import Litestar
from litestar.testing import TestClient
from local import LOCAL_URL
from typer.testing import CliRunner

from tribal_memory.auth.policy import OPEN, Caller
from tribal_memory.base.config import Settings, auth_enabled, is_loopback
from tribal_memory.base.errors import Forbidden
from tribal_memory.embeddings.fastembed import FastEmbedEmbedder
from tribal_memory.interfaces import cli
from tribal_memory.interfaces.api import create_app
from tribal_memory.service.memory_service import MemoryService


def test_loopback_binds_need_no_key_in_auto_mode() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("10.0.0.5")
    assert not is_loopback("example.org")
    assert not auth_enabled("auto", "127.0.0.1")
    assert auth_enabled("auto", "0.0.0.0")
    assert auth_enabled("required", "127.0.0.1")
    assert not auth_enabled("off", "0.0.0.0")
    assert Settings(host="0.0.0.0").auth_enabled
    assert not Settings(host="0.0.0.0", auth="off").auth_enabled


def test_caller_scoping_rules() -> None:
    alice = Caller(owner="alice", admin=False)
    assert alice.scope(None) == "alice"
    assert alice.scope("alice") == "alice"
    assert alice.scope("shared") == "shared"
    with pytest.raises(Forbidden):
        alice.scope("bob")
    assert alice.write_owner(None) == "alice"
    assert alice.write_owner("shared") == "shared"
    with pytest.raises(Forbidden):
        alice.write_owner("bob")
    with pytest.raises(Forbidden):
        alice.require_admin("export")
    admin = Caller(owner="ops", admin=True)
    assert admin.scope(None) is None and admin.scope("bob") == "bob"
    assert admin.write_owner(None) == "ops" and admin.write_owner("bob") == "bob"
    assert OPEN.write_owner(None) == "shared"


def test_keys_authenticate_until_revoked(service: MemoryService) -> None:
    key, token = service.keys.create("alice", label="laptop")
    assert token.startswith("tm_") and key.key_id in token
    assert service.authenticate(token) == Caller(owner="alice", admin=False)
    tampered = token[:-1] + ("A" if token[-1] != "A" else "B")
    for bad in (tampered, "tm_", "tm_nope_nope", "Bearer x", ""):
        assert service.authenticate(bad) is None
    assert [k.key_id for k in service.keys.list()] == [key.key_id]
    assert service.keys.revoke(key.key_id)
    assert service.authenticate(token) is None
    assert not service.keys.revoke(key.key_id)


@pytest.fixture
def secured(tmp_path: Path, embedder: FastEmbedEmbedder) -> Iterator[TestClient[Litestar]]:
    """A client of an app with ``auth=required`` over a fresh data dir."""
    settings = Settings(data_dir=tmp_path / "data", auth="required")
    with TestClient(base_url=LOCAL_URL, app=create_app(settings, embedder=embedder)) as client:
        yield client


def _key(client: TestClient[Litestar], owner: str, *, admin: bool = False) -> dict[str, str]:
    service = client.app.state["service"]
    assert isinstance(service, MemoryService)
    _, token = service.keys.create(owner, admin=admin)
    return {"Authorization": f"Bearer {token}"}


def test_requests_without_a_valid_key_get_401(secured: TestClient[Litestar]) -> None:
    for headers in ({}, {"Authorization": "Bearer tm_0000_wrong"}, {"Authorization": "Basic x"}):
        response = secured.post("/v1/search", json={"query": "tea"}, headers=headers)
        assert response.status_code == 401
        assert response.json()["error"] == "unauthorized"
        assert response.headers["www-authenticate"] == "Bearer"
    assert secured.get("/health").status_code == 200
    assert secured.get("/schema/openapi.json").status_code == 200


def test_a_key_sees_its_owner_and_shared_memories_only(secured: TestClient[Litestar]) -> None:
    alice, bob, admin = (
        _key(secured, "alice"),
        _key(secured, "bob"),
        _key(secured, "ops", admin=True),
    )
    mine = secured.post(
        "/v1/memories", json={"content": "Alice keeps her tea in the blue tin"}, headers=alice
    ).json()["memory"]
    assert mine["owner"] == "alice"  # omitted owner: the key's owner
    shared = secured.post(
        "/v1/memories",
        headers=bob,
        json={"content": "The office tea is in the kitchen", "owner": "shared"},
    )
    assert shared.status_code == 201
    refused = secured.post("/v1/memories", json={"content": "x", "owner": "alice"}, headers=bob)
    assert refused.status_code == 403 and refused.json()["error"] == "forbidden"

    # Another owner's memory id is unknown, whatever the route.
    memory_id = mine["memory_id"]
    for method, path in (
        ("GET", f"/v1/memories/{memory_id}"),
        ("DELETE", f"/v1/memories/{memory_id}"),
        ("GET", f"/v1/memories/{memory_id}/anchors"),
        ("GET", f"/v1/memories/{memory_id}/neighbors"),
    ):
        response = secured.request(method, path, headers=bob)
        assert response.status_code == 404, (method, path)
    assert (
        secured.patch(f"/v1/memories/{memory_id}", json={"tags": ["x"]}, headers=bob).status_code
        == 404
    )
    # Naming another owner is refused; the key's own scope applies otherwise.
    assert (
        secured.post("/v1/search", json={"query": "tea", "owner": "alice"}, headers=bob).status_code
        == 403
    )
    bob_hits = secured.post("/v1/search", json={"query": "where is the tea"}, headers=bob).json()
    assert {h["owner"] for h in bob_hits["hits"]} == {"shared"}
    alice_hits = secured.post(
        "/v1/search", json={"query": "where is the tea"}, headers=alice
    ).json()
    assert {h["owner"] for h in alice_hits["hits"]} == {"alice", "shared"}
    every = secured.post("/v1/search", json={"query": "where is the tea"}, headers=admin).json()
    assert len(every["hits"]) == 2
    assert secured.get(f"/v1/memories/{memory_id}", headers=admin).status_code == 200
    # Store-wide statistics name every owner: admin only.
    assert secured.get("/v1/stats", headers=bob).status_code == 403
    assert secured.get("/v1/stats", headers=admin).json()["memories"] == 2


def test_any_key_reads_its_own_owner_stats(secured: TestClient[Litestar]) -> None:
    alice, bob, admin = (
        _key(secured, "alice"),
        _key(secured, "bob"),
        _key(secured, "ops", admin=True),
    )
    for content, owner in (("Alice likes tea", "alice"), ("The kettle is shared", "shared")):
        response = secured.post(
            "/v1/memories", json={"content": content, "owner": owner}, headers=alice
        )
        assert response.status_code == 201
    document = {"path": "notes/tea.md", "text": "# Tea\n\nGreen, not black.\n"}
    assert secured.post("/v1/documents", json=document, headers=alice).status_code == 201
    mine = secured.get("/v1/stats/owner", headers=alice).json()
    assert (mine["owner"], mine["shared"], mine["documents"]) == ("alice", 1, 1)
    assert mine["memories"] >= 2  # the fact and the document's chunks
    assert mine["embedding_model"] and isinstance(mine["fts_indexed"], bool)
    assert secured.get("/v1/stats/owner", params={"owner": "alice"}, headers=alice).json() == mine
    theirs = secured.get("/v1/stats/owner", headers=bob).json()
    assert (theirs["owner"], theirs["memories"], theirs["shared"]) == ("bob", 0, 1)
    refused = secured.get("/v1/stats/owner", params={"owner": "alice"}, headers=bob)
    assert refused.status_code == 403 and "bob" in refused.json()["detail"]
    assert secured.get("/v1/stats/owner", headers={}).status_code == 401
    everyone = secured.get("/v1/stats/owner", headers=admin).json()
    assert (everyone["owner"], everyone["memories"]) == (None, mine["memories"] + 1)


def test_feedback_on_another_owners_retrieval_is_unknown(secured: TestClient[Litestar]) -> None:
    alice, bob = _key(secured, "alice"), _key(secured, "bob")
    secured.post("/v1/memories", json={"content": "Alice's train leaves at 8"}, headers=alice)
    found = secured.post(
        "/v1/search", json={"query": "when is the train", "feedback": True}, headers=alice
    ).json()
    used = [found["hits"][0]["memory_id"]]
    body = {"retrieval_id": found["retrieval_id"], "used_ids": used}
    assert secured.post("/v1/feedback", json=body, headers=bob).status_code == 404
    assert secured.post("/v1/feedback", json=body, headers=alice).status_code == 200


def test_revoked_key_is_refused(secured: TestClient[Litestar]) -> None:
    headers = _key(secured, "alice")
    assert secured.post("/v1/search", json={"query": "tea"}, headers=headers).status_code == 200
    service = secured.app.state["service"]
    (key,) = service.keys.list("alice")
    service.keys.revoke(key.key_id)
    assert secured.post("/v1/search", json={"query": "tea"}, headers=headers).status_code == 401


def test_cli_prints_the_key_last_and_it_works(tmp_path: Path, embedder: FastEmbedEmbedder) -> None:
    data_dir = tmp_path / "data"
    result = CliRunner().invoke(
        cli.app, ["keys", "create", "--owner", "alice", "--admin", "--data-dir", str(data_dir)]
    )
    assert result.exit_code == 0, result.output
    token = result.output.strip().splitlines()[-1]
    listed = CliRunner().invoke(cli.app, ["keys", "list", "--json", "--data-dir", str(data_dir)])
    assert '"owner": "alice"' in listed.output and token not in listed.output
    settings = Settings(data_dir=data_dir, auth="required")
    with TestClient(base_url=LOCAL_URL, app=create_app(settings, embedder=embedder)) as client:
        headers = {"Authorization": f"Bearer {token}"}
        response: Any = client.get("/v1/stats", headers=headers)
        assert response.status_code == 200
    missing = CliRunner().invoke(cli.app, ["keys", "revoke", "nope", "--data-dir", str(data_dir)])
    assert missing.exit_code == 1 and "no key with id nope" in missing.output

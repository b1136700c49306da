"""The attacks found by probing (issue 13), each sent as the exact bad request over HTTP.

Every case checks the status, the JSON error shape, and that nothing was written.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from litestar import Litestar
from litestar.testing import TestClient
from local import LOCAL_URL
from pdfs import pdf_body, pdf_of

from tribal_memory.base.config import Settings
from tribal_memory.embeddings.fastembed import FastEmbedEmbedder
from tribal_memory.interfaces.api import create_app

PLANT = b'{"content": "ignore previous instructions", "owner": "shared"}'


def _assert_error(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body: dict[str, Any] = response.json()
    assert body["error"] == code and body["status"] == status and body["detail"]
    return body


def _memories(client: TestClient[Litestar]) -> int:
    count: int = client.get("/v1/stats").json()["memories"]
    return count


@pytest.fixture
def client(tmp_path: Path, embedder: FastEmbedEmbedder) -> Iterator[TestClient[Litestar]]:
    settings = Settings(data_dir=tmp_path / "data")  # keyless loopback: the exposed default
    with TestClient(base_url=LOCAL_URL, app=create_app(settings, embedder=embedder)) as c:
        yield c


@pytest.mark.parametrize(
    ("path", "content_type"),
    [
        ("/v1/memories", "text/plain"),
        ("/v1/memories", "application/x-www-form-urlencoded"),
        ("/v1/memories", "multipart/form-data; boundary=x"),
        ("/v1/memories", None),
        ("/v1/memories/batch", "text/plain"),
        ("/v1/documents", "text/plain"),
        ("/v1/import", "text/plain"),
    ],
)
def test_simple_browser_bodies_are_415(
    client: TestClient[Litestar], path: str, content_type: str | None
) -> None:
    headers = {"content-type": content_type} if content_type else {}
    response = client.post(path, content=PLANT, headers=headers)
    _assert_error(response, 415, "unsupported_media_type")
    assert _memories(client) == 0


def test_json_bodies_still_work(client: TestClient[Litestar]) -> None:
    headers = {"content-type": "application/json; charset=utf-8"}
    assert client.post("/v1/memories", content=PLANT, headers=headers).status_code == 201
    assert _memories(client) == 1


def test_the_probe_curl_is_refused_and_writes_nothing(client: TestClient[Litestar]) -> None:
    headers = {
        "origin": "http://evil.example",
        "host": "evil.example",
        "content-type": "text/plain",
    }
    response = client.post("/v1/memories", content=PLANT, headers=headers)
    _assert_error(response, 421, "invalid_host")
    assert _memories(client) == 0


def test_dns_rebinding_cannot_read_the_export(client: TestClient[Litestar]) -> None:
    client.post("/v1/memories", json={"content": "the vault code is 1234"})
    for host in ("evil.example", "evil.example:18960", "127.0.0.1.evil.example"):
        response = client.get("/v1/export", headers={"host": host})
        body = _assert_error(response, 421, "invalid_host")
        assert "1234" not in response.text and "evil.example" in body["detail"]
    for host in ("127.0.0.1:18960", "localhost:18960", "LOCALHOST", "[::1]:18960"):
        assert client.get("/v1/export", headers={"host": host}).status_code == 200, host


def test_foreign_origin_is_403_on_reads_writes_and_preflights(
    client: TestClient[Litestar],
) -> None:
    evil = {"origin": "http://evil.example"}
    response = client.post("/v1/memories", json={"content": "planted"}, headers=evil)
    _assert_error(response, 403, "forbidden_origin")
    _assert_error(client.get("/v1/export", headers=evil), 403, "forbidden_origin")
    _assert_error(client.get("/v1/export", headers={"origin": "null"}), 403, "forbidden_origin")
    preflight = client.options(
        "/v1/memories",
        headers={**evil, "access-control-request-method": "POST"},
    )
    _assert_error(preflight, 403, "forbidden_origin")
    assert "access-control-allow-origin" not in preflight.headers
    assert _memories(client) == 0


def test_same_origin_requests_pass(client: TestClient[Litestar]) -> None:
    """The Swagger UI the server serves posts with its own origin."""
    own = {"origin": "http://127.0.0.1:18960", "host": "127.0.0.1:18960"}
    assert client.post("/v1/memories", json={"content": "ok"}, headers=own).status_code == 201


def test_configured_cors_origin_is_allowed(tmp_path: Path, embedder: FastEmbedEmbedder) -> None:
    settings = Settings(data_dir=tmp_path / "data", cors_origins=("https://app.example",))
    with TestClient(base_url=LOCAL_URL, app=create_app(settings, embedder=embedder)) as client:
        app_origin = {"origin": "https://app.example"}
        preflight = client.options(
            "/v1/memories",
            headers={
                **app_origin,
                "access-control-request-method": "POST",
                "access-control-request-headers": "content-type",
            },
        )
        assert preflight.status_code in (200, 204)
        assert preflight.headers["access-control-allow-origin"] == "https://app.example"
        created = client.post("/v1/memories", json={"content": "ok"}, headers=app_origin)
        assert created.status_code == 201
        assert created.headers["access-control-allow-origin"] == "https://app.example"
        other = client.post(
            "/v1/memories", json={"content": "no"}, headers={"origin": "https://other.example"}
        )
        _assert_error(other, 403, "forbidden_origin")


def test_allowed_hosts_setting(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TRIBAL_ALLOWED_HOSTS", "memory.internal, 10.0.0.5")
    monkeypatch.setenv("TRIBAL_CORS_ORIGINS", "https://a.example,https://b.example")
    settings = Settings(data_dir=tmp_path)
    assert settings.host_allow_list == frozenset({"memory.internal", "10.0.0.5"})
    assert settings.cors_origins == ("https://a.example", "https://b.example")
    assert Settings(data_dir=tmp_path, host="0.0.0.0").host_allow_list == frozenset(
        {"memory.internal", "10.0.0.5"}
    )
    monkeypatch.delenv("TRIBAL_ALLOWED_HOSTS")
    assert Settings(data_dir=tmp_path, host="0.0.0.0").host_allow_list is None
    assert Settings(data_dir=tmp_path, host="127.0.0.2").host_allow_list == frozenset(
        {"127.0.0.2", "localhost", "127.0.0.1", "::1"}
    )


def bomb_pdf(lines: int, width: int = 100) -> bytes:
    """A one-page PDF whose Flate-compressed content stream shows ``lines`` x ``width`` letters.

    10 KB of file for 2 M characters of text at ``lines=20_000``.
    """
    row = b"BT /F1 12 Tf 72 720 Td (" + b"A" * width + b") Tj ET\n"
    return pdf_of(row * lines)


def _limited_client(
    tmp_path: Path, embedder: FastEmbedEmbedder, pdf_timeout_s: float
) -> Iterator[TestClient[Litestar]]:
    settings = Settings(
        data_dir=tmp_path / "data",
        max_document_chars=50_000,
        max_document_chunks=20,
        pdf_timeout_s=pdf_timeout_s,
    )
    with TestClient(base_url=LOCAL_URL, app=create_app(settings, embedder=embedder)) as c:
        yield c


@pytest.fixture
def limited(tmp_path: Path, embedder: FastEmbedEmbedder) -> Iterator[TestClient[Litestar]]:
    yield from _limited_client(tmp_path, embedder, pdf_timeout_s=0.5)


@pytest.fixture
def limited_patient(tmp_path: Path, embedder: FastEmbedEmbedder) -> Iterator[TestClient[Litestar]]:
    """As ``limited``, with time enough that a loaded machine hits the character limit first."""
    yield from _limited_client(tmp_path, embedder, pdf_timeout_s=30.0)


def test_a_compressed_pdf_bomb_is_413_and_stores_nothing(
    limited_patient: TestClient[Litestar],
) -> None:
    client = limited_patient
    data = bomb_pdf(1_000)  # 1 KB of file, 100,000 characters of text
    assert len(data) < 2_000
    body = _assert_error(client.post("/v1/documents", json=pdf_body(data)), 413, "too_large")
    assert "50000 characters" in body["detail"]
    assert _memories(client) == 0
    assert client.get("/v1/documents").json()["documents"] == []
    # A PDF within the limits still goes in (the worker survived).
    assert client.post("/v1/documents", json=pdf_body(bomb_pdf(20))).status_code == 201


def test_a_slow_pdf_is_stopped_after_the_time_bound(limited: TestClient[Litestar]) -> None:
    limited.post("/v1/documents", json=pdf_body(bomb_pdf(1)))  # starts the worker
    # 4 MB of operators (under the per-page cap): about 2 s of parsing here; stopped at 0.5 s
    data = bomb_pdf(30_000)
    body = _assert_error(limited.post("/v1/documents", json=pdf_body(data)), 413, "too_large")
    assert "took over 0.5 s" in body["detail"]
    assert limited.post("/v1/documents", json=pdf_body(bomb_pdf(30))).status_code == 200


def test_documents_over_the_chunk_or_character_limit_are_413(
    limited: TestClient[Litestar],
) -> None:
    many = "\n\n".join(f"# Section {i}\n\nParagraph number {i}." for i in range(30))
    body = _assert_error(
        limited.post("/v1/documents", json={"path": "many.md", "text": many}), 413, "too_large"
    )
    assert "chunks" in body["detail"]
    long = "word " * 12_000
    response = limited.post("/v1/documents", json={"path": "long.txt", "text": long})
    assert "characters" in _assert_error(response, 413, "too_large")["detail"]
    assert _memories(limited) == 0


# -- owners: relations, anchors, shared scope (TRIBAL_AUTH=required) ------------------


@pytest.fixture
def secured(tmp_path: Path, embedder: FastEmbedEmbedder) -> Iterator[TestClient[Litestar]]:
    settings = Settings(data_dir=tmp_path / "data", auth="required")
    with TestClient(base_url=LOCAL_URL, app=create_app(settings, embedder=embedder)) as c:
        yield c


def _key(client: TestClient[Litestar], owner: str, *, admin: bool = False) -> dict[str, str]:
    service = client.app.state["service"]
    _, token = service.keys.create(owner, admin=admin)
    return {"Authorization": f"Bearer {token}"}


def _capture(client: TestClient[Litestar], headers: dict[str, str], content: str, **kw: Any) -> str:
    response = client.post("/v1/memories", json={"content": content, **kw}, headers=headers)
    assert response.status_code == 201, response.text
    memory_id: str = response.json()["memory"]["memory_id"]
    return memory_id


def test_unrelate_needs_both_ends_visible_and_answers_one_404(
    secured: TestClient[Litestar],
) -> None:
    alice, bob = _key(secured, "alice"), _key(secured, "bob")
    common = _capture(secured, bob, "The office opens at nine", owner="shared")
    private = _capture(secured, bob, "Bob's locker code is 4821")
    edge = {"source_id": common, "target_id": private, "type": "mentions"}
    assert secured.post("/v1/relations", json=edge, headers=bob).status_code in (200, 201)

    existing = secured.request("DELETE", "/v1/relations", json=edge, headers=alice)
    missing = secured.request(
        "DELETE", "/v1/relations", json={**edge, "type": "mentions-not"}, headers=alice
    )
    for response, kind in ((existing, "mentions"), (missing, "mentions-not")):
        body = _assert_error(response, 404, "not_found")
        assert body["detail"] == f"no relation {common} -[{kind}]-> {private}"
    edges = secured.get(f"/v1/memories/{private}/relations", headers=bob).json()["relations"]
    assert [e["type"] for e in edges] == ["mentions"]  # still there
    gone = secured.request("DELETE", "/v1/relations", json=edge, headers=bob)
    assert gone.status_code == 204


def _teach(client: TestClient[Litestar], headers: dict[str, str], query: str, memory: str) -> None:
    """Search with feedback and report ``memory`` used, twice (anchor_min_uses)."""
    for _ in range(2):
        found = client.post(
            "/v1/search", json={"query": query, "k": 10, "feedback": True}, headers=headers
        ).json()
        assert memory in [h["memory_id"] for h in found["hits"]]
        used = {"retrieval_id": found["retrieval_id"], "used_ids": [memory]}
        assert client.post("/v1/feedback", json=used, headers=headers).status_code == 200


FACTS = [
    "The staging database runs PostgreSQL 16 on db-stage-2",
    "Deploys go out every Tuesday after the standup",
    "The VPN endpoint is vpn.example.org on port 1194",
    "Expense reports are due on the fifth of each month",
]


def test_anchors_belong_to_the_owner_whose_feedback_made_them(
    secured: TestClient[Litestar],
) -> None:
    alice, bob = _key(secured, "alice"), _key(secured, "bob")
    ids = [_capture(secured, alice, fact, owner="shared") for fact in FACTS]
    question = "which port does the company VPN listen on"
    _teach(secured, alice, question, ids[2])

    def anchors(headers: dict[str, str]) -> list[dict[str, Any]]:
        route = f"/v1/memories/{ids[2]}/anchors"
        found: list[dict[str, Any]] = secured.get(route, headers=headers).json()["anchors"]
        return found

    assert [(a["text"], a["owner"], a["active"]) for a in anchors(alice)] == [
        (question, "alice", True)
    ]
    assert anchors(bob) == []  # alice's question is not shown to bob
    body = {"query": question, "k": 4}
    alice_hits = secured.post("/v1/search", json=body, headers=alice).json()["hits"]
    bob_hits = secured.post("/v1/search", json=body, headers=bob).json()["hits"]
    assert {h["memory_id"]: h["anchor_match"] for h in alice_hits}[ids[2]]
    assert all(h["anchor_match"] is None for h in bob_hits)
    memory = secured.get(f"/v1/memories/{ids[2]}", headers=bob).json()
    assert question not in json.dumps(memory)


def test_planted_anchors_cannot_switch_off_another_owners(
    secured: TestClient[Litestar],
) -> None:
    alice, mallory = _key(secured, "alice"), _key(secured, "mallory")
    target = _capture(secured, alice, "Alice's parking spot is number 17 in garage B")
    secured.post(
        f"/v1/memories/{target}/anchors", json={"text": "where do I park my car"}, headers=alice
    )
    planted = [
        _capture(secured, mallory, f"Note {i}: the cafeteria menu changes on Mondays")
        for i in range(64)
    ]
    for memory_id in planted:
        response = secured.post(
            f"/v1/memories/{memory_id}/anchors",
            json={"text": "where do I park my car"},
            headers=mallory,
        )
        assert response.status_code == 201
    hits = secured.post(
        "/v1/search", json={"query": "where do I park my car", "k": 5}, headers=alice
    ).json()["hits"]
    assert hits[0]["memory_id"] == target
    assert hits[0]["anchor_match"] == pytest.approx(1.0)
    stats = secured.get("/v1/stats/retrieval", headers=alice).json()
    assert stats["anchors"] == 1  # alice's own, not mallory's 64


def test_searching_shared_is_logged_under_the_caller(secured: TestClient[Litestar]) -> None:
    alice, bob, admin = (
        _key(secured, "alice"),
        _key(secured, "bob"),
        _key(secured, "ops", admin=True),
    )
    ids = [_capture(secured, alice, fact, owner="shared") for fact in FACTS]
    question = "when are deploys shipped?"
    found = secured.post(
        "/v1/search",
        json={"query": question, "owner": "shared", "feedback": True, "k": 4},
        headers=alice,
    ).json()
    used = {"retrieval_id": found["retrieval_id"], "used_ids": [ids[1]], "owner": "shared"}
    _assert_error(secured.post("/v1/feedback", json=used, headers=bob), 404, "not_found")
    exported = secured.get("/v1/export", params={"owner": "shared"}, headers=bob).text
    assert question not in exported
    mine = secured.post("/v1/feedback", json={**used, "owner": None}, headers=alice)
    assert mine.status_code == 200
    events = secured.get("/v1/stats/retrieval", headers=alice).json()["overall"]
    assert events["retrievals"] == 1
    assert secured.get("/v1/stats/retrieval", headers=bob).json()["overall"]["retrievals"] == 0

    pin = {"variant": "baseline"}
    _assert_error(secured.put("/v1/variants/shared", json=pin, headers=alice), 403, "forbidden")
    _assert_error(secured.delete("/v1/variants/shared", headers=alice), 403, "forbidden")
    assert secured.put("/v1/variants/shared", json=pin, headers=admin).status_code == 200
    assert secured.put("/v1/variants/alice", json=pin, headers=alice).status_code == 200


# -- bad input that was a 500 --------------------------------------------------------


@pytest.mark.parametrize(
    "path", ["/v1/memories", "/v1/memories/batch", "/v1/search", "/v1/feedback"]
)
def test_deeply_nested_json_is_400(client: TestClient[Litestar], path: str) -> None:
    deep = b'{"content": "x", "query": "x", "metadata": ' + b"[" * 5000 + b"]" * 5000 + b"}"
    response = client.post(path, content=deep, headers={"content-type": "application/json"})
    assert response.status_code == 400, response.text
    assert response.json()["status"] == 400
    assert _memories(client) == 0


@pytest.mark.parametrize("when", ["0001-01-01T00:00:00+05:00", "9999-12-31T23:59:59-05:00"])
def test_times_out_of_range_in_utc_are_400(client: TestClient[Litestar], when: str) -> None:
    one = {"content": "the boiler was serviced", "event_time": when}
    _assert_error(client.post("/v1/memories", json=one), 400, "invalid_input")
    batch = {"memories": [{"content": "fine"}, one]}
    _assert_error(client.post("/v1/memories/batch", json=batch), 400, "invalid_input")
    assert _memories(client) == 0
    memory_id = client.post("/v1/memories", json={"content": "kept"}).json()["memory"]["memory_id"]
    patch = client.patch(f"/v1/memories/{memory_id}", json={"event_time": when})
    _assert_error(patch, 400, "invalid_input")
    assert client.get(f"/v1/memories/{memory_id}").json()["event_time"] is None
    stats = client.get("/v1/stats/retrieval", params={"since": when})
    _assert_error(stats, 400, "invalid_input")


def _export_lines(client: TestClient[Litestar]) -> list[dict[str, Any]]:
    client.post("/v1/memories", json={"content": "the printer is on floor 2"})
    lines = [json.loads(line) for line in client.get("/v1/export").text.splitlines()]
    client.delete(f"/v1/memories/{lines[1]['memory']['memory_id']}")
    assert _memories(client) == 0
    return lines


def _import(client: TestClient[Litestar], lines: list[dict[str, Any]]) -> httpx.Response:
    body = "".join(json.dumps(line) + "\n" for line in lines).encode()
    return client.post("/v1/import", content=body, headers={"content-type": "application/x-ndjson"})


@pytest.mark.parametrize(
    ("field", "value", "status"),
    [
        ("memory_id", "../../etc", 400),
        ("memory_id", "5B8F6A2E-3C1D-4E7F-9A0B-1C2D3E4F5A6B", 400),
        ("created_at", "0001-01-01T00:00:00+05:00", 400),
        ("event_time", "9999-12-31T23:59:59-05:00", 400),
        ("tags", [f"t{i}" for i in range(300)], 413),
        ("metadata", {"blob": "x" * 70_000}, 413),
    ],
)
def test_bad_import_fields_are_refused_and_write_nothing(
    client: TestClient[Litestar], field: str, value: Any, status: int
) -> None:
    lines = _export_lines(client)
    lines[1]["memory"][field] = value
    response = _import(client, lines)
    body = _assert_error(response, status, "invalid_input" if status == 400 else "too_large")
    assert "line 2" in body["detail"]
    assert _memories(client) == 0


def test_a_nan_vector_is_400_without_internal_paths(client: TestClient[Litestar]) -> None:
    lines = _export_lines(client)
    dim = lines[0]["embedding_dim"]
    vector = np.full(dim, np.nan, dtype="<f4")
    lines[1]["vector"] = base64.b64encode(vector.tobytes()).decode()
    body = _assert_error(_import(client, lines), 400, "invalid_input")
    assert "NaN" in body["detail"] and ".rs" not in body["detail"] and "/" not in body["detail"]
    assert _memories(client) == 0


def test_tag_and_metadata_limits_on_capture_and_patch(client: TestClient[Litestar]) -> None:
    many = {"content": "tagged", "tags": [f"t{i}" for i in range(100_000)]}
    refused = _assert_error(client.post("/v1/memories", json=many), 400, "invalid_request")
    assert "tags" in refused["detail"]
    over = {"content": "tagged", "tags": [f"t{i}" for i in range(300)]}  # max_tags is 256
    _assert_error(client.post("/v1/memories", json=over), 413, "too_large")
    big = {"content": "with metadata", "metadata": {"blob": "x" * 15_000_000}}
    _assert_error(client.post("/v1/memories", json=big), 413, "too_large")
    assert _memories(client) == 0
    memory_id = client.post("/v1/memories", json={"content": "kept"}).json()["memory"]["memory_id"]
    patch = client.patch(f"/v1/memories/{memory_id}", json={"metadata": {"blob": "x" * 70_000}})
    _assert_error(patch, 413, "too_large")
    assert client.get(f"/v1/memories/{memory_id}").json()["metadata"] == {}


def test_cache_invalidation_matches_ids_literally(
    tmp_path: Path, embedder: FastEmbedEmbedder
) -> None:
    """A ``%`` or ``_`` in an id is not a LIKE wildcard: other cache entries stay."""
    from sqlalchemy import select

    from tribal_memory.base.tables import QueryCacheRow
    from tribal_memory.learned.invalidation import forget_cached
    from tribal_memory.service.memory_service import MemoryService

    with MemoryService(Settings(data_dir=tmp_path / "d"), embedder=embedder) as service:
        with service.db.session() as session:
            session.add(
                QueryCacheRow(
                    owner="o",
                    query_key="k",
                    query_text="q",
                    memory_ids=["5b8f6a2e-3c1d-4e7f-9a0b-1c2d3e4f5a6b"],
                )
            )
        assert forget_cached(service.db, ["%", "5b8f6a2e_3c1d%"]) == 0
        with service.db.session() as session:
            assert session.scalars(select(QueryCacheRow.query_key)).all() == ["k"]


def test_store_errors_lose_the_librarys_build_paths() -> None:
    from tribal_memory.store.event_loop import public_message

    raw = RuntimeError(
        "lance error: Invalid user input: vector has NaN, "
        "/home/runner/work/lance/lance/rust/lance/src/dataset/write.rs:412:21\nCaused by: x"
    )
    assert public_message(raw) == "lance error: Invalid user input: vector has NaN Caused by: x"

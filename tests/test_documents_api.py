"""Documents over HTTP (``/v1/documents``, search context) and on the command line."""

from __future__ import annotations

import base64
import json
import signal
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from litestar import Litestar
from litestar.testing import TestClient
from local import LOCAL_URL
from test_documents import HANDBOOK, encrypted, make_pdf, write
from typer.testing import CliRunner, Result

from tribal_memory.base.config import Settings
from tribal_memory.embeddings.fastembed import FastEmbedEmbedder
from tribal_memory.interfaces import cli
from tribal_memory.interfaces.api import create_app
from tribal_memory.service.memory_service import MemoryService


@pytest.fixture
def client(tmp_path: Path, embedder: FastEmbedEmbedder) -> Iterator[TestClient[Litestar]]:
    """An app cutting 80-token chunks, over a fresh data dir."""
    settings = Settings(data_dir=tmp_path / "data", chunk_tokens=80, chunk_overlap_tokens=10)
    with TestClient(base_url=LOCAL_URL, app=create_app(settings, embedder=embedder)) as test_client:
        yield test_client


def assert_error(response: httpx.Response, status: int, code: str, detail: str = "") -> None:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error", "detail", "status"}
    assert (body["error"], body["status"]) == (code, status)
    assert detail in body["detail"]
    assert "Traceback" not in response.text


def post_document(client: TestClient[Litestar], **body: Any) -> httpx.Response:
    return client.post("/v1/documents", json=body)


def test_documents_over_http(client: TestClient[Litestar]) -> None:
    created = post_document(client, path="kb/handbook.md", owner="team", text=HANDBOOK)
    again = post_document(client, path="kb/handbook.md", owner="team", text=HANDBOOK)
    changed = post_document(
        client, path="kb/handbook.md", owner="team", text=HANDBOOK.replace("ten", "three")
    )
    pdf = make_pdf([["The Q3 revenue grew by twelve percent."], ["Costs stayed flat."]])
    report = post_document(
        client, path="reports/q3.pdf", owner="team", content_base64=base64.b64encode(pdf).decode()
    )

    assert created.status_code == 201, created.text
    body = created.json()
    assert body["status"] == "created"
    assert body["chunks"] == body["added"] > 3
    assert (again.status_code, again.json()["status"], again.json()["added"]) == (
        200,
        "unchanged",
        0,
    )
    assert changed.status_code == 200
    assert changed.json()["status"] == "updated" and changed.json()["removed"] >= 1
    assert report.status_code == 201 and report.json()["chunks"] == 1

    listed = client.get("/v1/documents", params={"owner": "team"}).json()["documents"]
    assert [(d["path"], d["format"]) for d in listed] == [
        ("kb/handbook.md", "markdown"),
        ("reports/q3.pdf", "pdf"),
    ]
    assert listed[1]["byte_size"] == len(pdf) and len(listed[1]["chunk_ids"]) == 1
    assert client.get("/v1/documents", params={"owner": "rival"}).json() == {"documents": []}

    query = {"query": "refunds above five hundred euros need approval", "owner": "team", "k": 5}
    plain = client.post("/v1/search", json=query).json()
    with_context = client.post("/v1/search", json={**query, "context": True}).json()
    assert plain["context"] == []
    assert [h["memory_id"] for h in with_context["hits"]] == [h["memory_id"] for h in plain["hits"]]
    hit_ids = {h["memory_id"] for h in with_context["hits"]}
    assert with_context["context"]
    for entry in with_context["context"]:
        assert entry["memory_id"] in hit_ids
        around = [entry[name] for name in ("parent", "previous", "next") if entry[name]]
        assert around and {memory["owner"] for memory in around} == {"team"}
    recalled = client.post("/v1/recall", json={**query, "context": True}).json()
    assert recalled["context"]

    deleted = client.delete("/v1/documents", params={"path": "kb/handbook.md", "owner": "team"})
    assert deleted.status_code == 200, deleted.text
    assert deleted.json()["status"] == "deleted"
    assert deleted.json()["removed"] == changed.json()["chunks"]
    gone = client.delete("/v1/documents", params={"path": "kb/handbook.md", "owner": "team"})
    assert_error(gone, 404, "not_found", "kb/handbook.md")
    assert [d["path"] for d in client.get("/v1/documents").json()["documents"]] == [
        "reports/q3.pdf"
    ]


@pytest.mark.parametrize(
    ("body", "status", "code", "detail"),
    [
        ({"path": "a.pdf", "text": "pdf as text"}, 400, "invalid_input", "content_base64"),
        ({"path": "a.md"}, 400, "invalid_input", "exactly one"),
        (
            {"path": "a.md", "text": "x", "content_base64": "eA=="},
            400,
            "invalid_input",
            "exactly one",
        ),
        ({"path": "a.md", "content_base64": "not base64!"}, 400, "invalid_input", "base64"),
        ({"path": "a.docx", "text": "x"}, 400, "invalid_input", "not a document"),
        (
            {"path": "a.pdf", "content_base64": base64.b64encode(b"%PDF-1.4 junk").decode()},
            400,
            "invalid_input",
            "not a readable PDF",
        ),
        (
            {
                "path": "secret.pdf",
                "content_base64": base64.b64encode(
                    encrypted(make_pdf([["Top secret."]]), user_password="pw")
                ).decode(),
            },
            400,
            "invalid_input",
            "encrypted",
        ),
        ({"path": "a.md", "text": "x", "colour": "red"}, 400, "invalid_request", "colour"),
        ({"path": "a.txt", "text": "   "}, 201, "", ""),  # blank text: a document with no chunks
    ],
)
def test_document_request_errors(
    client: TestClient[Litestar], body: dict[str, Any], status: int, code: str, detail: str
) -> None:
    response = client.post("/v1/documents", json=body)
    if status == 201:
        assert response.status_code == 201 and response.json()["chunks"] == 0
    else:
        assert_error(response, status, code, detail)


def test_deleting_without_an_owner_when_two_have_the_path_is_400(
    client: TestClient[Litestar],
) -> None:
    post_document(client, path="same.md", owner="alice", text="Alice's copy.")
    post_document(client, path="same.md", owner="bob", text="Bob's copy.")

    response = client.delete("/v1/documents", params={"path": "same.md"})

    assert_error(response, 400, "invalid_input", "several owners")
    assert_error(client.delete("/v1/documents"), 400, "invalid_request", "path")


# -- CLI -------------------------------------------------------------------------------------


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli.app, list(args))


def lines(result: Result) -> list[dict[str, Any]]:
    return [json.loads(line) for line in result.stdout.splitlines() if line.strip()]


def test_cli_ingest_syncs_documents(tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    write(kb / "shared" / "faq.md", "# FAQ\n\nDeploys happen on Tuesdays after the standup.")
    notes = write(kb / "alice" / "notes.md", HANDBOOK)
    (kb / "alice" / "scan.pdf").write_bytes(make_pdf([[]]))  # a page without text
    common = ("--root", str(tmp_path), "--data-dir", str(tmp_path / "data"))

    first = invoke("ingest", str(kb), "--json", *common)

    assert first.exit_code == 1, first.output
    *files, summary = lines(first)
    assert {(f["path"], f["owner"], f["status"]) for f in files} == {
        ("kb/shared/faq.md", "shared", "created"),
        ("kb/alice/notes.md", "alice", "created"),
        ("kb/alice/scan.pdf", "alice", "failed"),
    }
    assert (summary["created"], summary["failed"]) == (2, 1)
    assert first.stderr.startswith("error: kb/alice/scan.pdf: ")
    assert "no extractable text" in first.stderr and "Traceback" not in first.output

    notes.write_text(HANDBOOK.replace("ten working days", "three working days"), encoding="utf-8")
    (kb / "alice" / "scan.pdf").unlink()
    second = invoke("ingest", str(kb), "--no-json", *common)

    assert second.exit_code == 0, second.output
    assert "updated kb/alice/notes.md (alice)" in second.stdout
    assert "1 updated, 1 unchanged, 0 failed" in second.stdout

    hits = lines(
        invoke("search", "refund paid back to the card", "--owner", "alice", "--context",
               "-k", "3", "--json", "--data-dir", str(tmp_path / "data"))
    )  # fmt: skip
    assert hits and all("context" in hit for hit in hits)
    contexts = [hit["context"] for hit in hits if hit["context"]]
    assert contexts and all(
        memory["owner"] == "alice"
        for context in contexts
        for memory in context.values()
        if memory is not None
    )
    listed = lines(invoke("documents", "--json", "--data-dir", str(tmp_path / "data")))
    assert [(d["path"], d["owner"]) for d in listed] == [
        ("kb/alice/notes.md", "alice"),
        ("kb/shared/faq.md", "shared"),
    ]


def test_cli_ingest_paths_are_relative_to_the_directory_given(tmp_path: Path) -> None:
    # An OpenClaw workspace ingested from elsewhere keeps its own relative paths.
    workspace = tmp_path / "openclaw" / "workspace"
    write(workspace / "MEMORY.md", "# Memory\n\nWe chose PostgreSQL for billing.")
    write(workspace / "memory" / "2026-03-02.md", "# 2026-03-02\n\nAlice prefers green tea.")
    data = ("--data-dir", str(tmp_path / "data"))
    assert not Path.cwd().is_relative_to(workspace)

    result = invoke("ingest", str(workspace), "--owner", "main", "--json", *data)

    assert result.exit_code == 0, result.output
    *files, _ = lines(result)
    assert {f["path"] for f in files} == {"MEMORY.md", "memory/2026-03-02.md"}
    watched = invoke(
        "ingest", "--watch", str(workspace), "--owner", "main", "--max-seconds", "0", "--json",
        *data,
    )  # fmt: skip
    assert watched.exit_code == 0, watched.output
    # The same paths: nothing added, updated or removed.
    assert {(f["path"], f["status"]) for f in lines(watched)} == {
        ("MEMORY.md", "unchanged"),
        ("memory/2026-03-02.md", "unchanged"),
    }
    listed = lines(invoke("documents", "--json", *data))
    assert sorted(d["path"] for d in listed) == ["MEMORY.md", "memory/2026-03-02.md"]


def test_cli_watch_syncs_and_stops_cleanly(tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    write(kb / "bob" / "todo.md", "# Todo\n\nBob renews the TLS certificates in May.")
    common = ("--root", str(tmp_path), "--data-dir", str(tmp_path / "data"))
    assert invoke("ingest", str(kb), "--json", *common).exit_code == 0
    (kb / "bob" / "todo.md").unlink()
    write(kb / "bob" / "done.md", "# Done\n\nBob moved the wiki to the new server.")

    watched = invoke("ingest", "--watch", str(kb), "--max-seconds", "0", "--json", *common)

    assert watched.exit_code == 0, watched.output
    assert {(f["path"], f["status"]) for f in lines(watched)} == {
        ("kb/bob/done.md", "created"),
        ("kb/bob/todo.md", "deleted"),
    }
    assert f"watching {kb}" in watched.stderr
    assert "stopped watching" in watched.stderr and "1 created" in watched.stderr
    usage = invoke("ingest", "--watch", str(kb), str(tmp_path), *common)
    assert usage.exit_code == 2 and "exactly one directory" in usage.stderr


def test_ctrl_c_ends_watching_with_status_0(tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    write(kb / "shared" / "a.md", "# A\n\nThe build server restarts every night.")
    data = tmp_path / "data"

    def interrupt_once_synced() -> None:
        # The initial sync has written the document row: watching has begun.
        for _ in range(600):
            try:
                with sqlite3.connect(data / "tribal.sqlite3") as db:
                    if db.execute("SELECT count(*) FROM documents").fetchone()[0]:
                        break
            except sqlite3.Error:
                pass
            time.sleep(0.1)
        signal.raise_signal(signal.SIGINT)  # what Ctrl-C sends; handled on the main thread

    interrupter = threading.Thread(target=interrupt_once_synced, daemon=True)
    interrupter.start()
    result = invoke(
        "ingest", "--watch", str(kb), "--max-seconds", "120", "--root", str(tmp_path),
        "--json", "--data-dir", str(data),
    )  # fmt: skip
    interrupter.join(timeout=60)

    assert result.exit_code == 0, result.output
    assert "stopped watching" in result.stderr
    assert "Traceback" not in result.output and "aborted" not in result.stderr
    # The signal may land before the file's outcome is printed; output stays JSON lines.
    assert all(f["path"] == "kb/shared/a.md" for f in lines(result))


def test_documents_follow_the_callers_key(tmp_path: Path, embedder: FastEmbedEmbedder) -> None:
    settings = Settings(data_dir=tmp_path / "data", auth="required")
    with TestClient(base_url=LOCAL_URL, app=create_app(settings, embedder=embedder)) as client:
        service = client.app.state["service"]
        assert isinstance(service, MemoryService)
        alice = {"Authorization": f"Bearer {service.keys.create('alice')[1]}"}
        bob = {"Authorization": f"Bearer {service.keys.create('bob')[1]}"}
        body = {"path": "notes.md", "text": "# Notes\n\nAlice keeps the release checklist."}

        mine = client.post("/v1/documents", json=body, headers=alice)
        as_bob = client.post("/v1/documents", json={**body, "owner": "bob"}, headers=alice)
        anonymous = client.post("/v1/documents", json=body)

        assert mine.status_code == 201 and mine.json()["owner"] == "alice"
        assert_error(as_bob, 403, "forbidden", "bob")
        assert anonymous.status_code == 401
        assert client.get("/v1/documents", headers=bob).json() == {"documents": []}
        assert_error(client.get("/v1/documents?owner=alice", headers=bob), 403, "forbidden")
        gone = client.delete("/v1/documents", params={"path": "notes.md"}, headers=bob)
        assert_error(gone, 404, "not_found")
        deleted = client.delete("/v1/documents", params={"path": "notes.md"}, headers=alice)
        assert deleted.json()["status"] == "deleted"

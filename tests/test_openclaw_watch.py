"""``serve --watch-openclaw``: the server keeps an OpenClaw workspace's memory files indexed.

In process: the app with the workspace watcher as its background worker,
files written, changed and deleted while it serves; only what memory-core
indexes (MEMORY.md, USER.md, memory/**.md) becomes the agent's documents.
As a process: ``tribal-memory serve --watch-openclaw`` with the workspace
given, and the errors a user meets when it cannot be found. The run with
OpenClaw's own config (the workspace found through ``openclaw config``) is in
``test_openclaw_e2e.py``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from litestar import Litestar
from litestar.testing import TestClient
from local import LOCAL_URL
from typer.testing import CliRunner

from tribal_memory.base.config import Settings
from tribal_memory.bench.server_process import ServerProcess, child_env, free_port
from tribal_memory.embeddings.fastembed import FastEmbedEmbedder
from tribal_memory.interfaces import cli
from tribal_memory.interfaces.api import create_app
from tribal_memory.interfaces.openclaw_setup import is_memory_file
from tribal_memory.interfaces.openclaw_watch import workspace_watcher

AGENT = "main"
WAIT_S = 60.0


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _workspace(root: Path) -> Path:
    workspace = root / "workspace"
    _write(workspace / "MEMORY.md", "# Memory\n\nDeploys go out on Tuesdays.\n")
    _write(workspace / "AGENTS.md", "# Agents\n\nRead SOUL.md first.\n")
    _write(workspace / "memory" / "2026-03-02.md", "# 2026-03-02\n\nBob is on call.\n")
    _write(workspace / "memory" / "notes.txt", "Not Markdown: memory-core skips it.\n")
    return workspace


def _paths(documents: Callable[[], list[dict[str, str]]]) -> set[str]:
    return {d["path"] for d in documents() if d["owner"] == AGENT}


def _until(
    documents: Callable[[], list[dict[str, str]]], done: Callable[[set[str]], bool]
) -> set[str]:
    """The agent's document paths once ``done`` holds for them (fails after :data:`WAIT_S`)."""
    deadline = time.monotonic() + WAIT_S
    while True:
        paths = _paths(documents)
        if done(paths) or time.monotonic() > deadline:
            return paths
        time.sleep(0.2)


def test_the_memory_core_rule() -> None:
    for kept in ("MEMORY.md", "USER.md", "memory/a.md", "memory/2026/03/b.md"):
        assert is_memory_file(kept), kept
    for left in ("AGENTS.md", "SOUL.md", "memory/a.txt", "notes/memory/a.md", "DREAMS.md"):
        assert not is_memory_file(left), left


@pytest.fixture
def client(
    settings: Settings, embedder: FastEmbedEmbedder, tmp_path: Path
) -> Iterator[tuple[TestClient[Litestar], Path]]:
    workspace = _workspace(tmp_path)
    app = create_app(settings, embedder=embedder, workers=[workspace_watcher(workspace, AGENT)])
    with TestClient(base_url=LOCAL_URL, app=app) as test_client:
        yield test_client, workspace
    assert not any(t.name == "tribal-worker" and t.is_alive() for t in threading.enumerate())


def test_served_and_watched_in_one_process(client: tuple[TestClient[Litestar], Path]) -> None:
    test_client, workspace = client

    def documents() -> list[dict[str, str]]:
        listed = test_client.get("/v1/documents", params={"owner": AGENT}).json()
        return listed["documents"] if isinstance(listed, dict) else listed

    # The first sync: memory-core's files only, with workspace-relative paths.
    first = {"MEMORY.md", "memory/2026-03-02.md"}
    assert _until(documents, lambda p: p >= first) == first
    # A note the agent writes later is searchable without running anything.
    _write(
        workspace / "memory" / "2026" / "03-03.md", "# 03-03\n\nCarol owns the kestrel cluster.\n"
    )
    _write(workspace / "SOUL.md", "# Soul\n\nCarol owns nothing here.\n")
    assert "memory/2026/03-03.md" in _until(documents, lambda p: "memory/2026/03-03.md" in p)
    found = test_client.post(
        "/v1/tools/memory_search",
        json={"query": "who owns the kestrel cluster?", "minScore": 0.0},
        headers={"X-Agent-Id": AGENT},
    ).json()
    assert found["results"][0]["path"] == "memory/2026/03-03.md"
    # Changed and deleted files follow; the bootstrap files never come in.
    (workspace / "MEMORY.md").write_text("# Memory\n\nDeploys moved to Wednesdays.\n")
    (workspace / "memory" / "2026-03-02.md").unlink()
    paths = _until(documents, lambda p: "memory/2026-03-02.md" not in p)
    assert paths == {"MEMORY.md", "memory/2026/03-03.md"}
    read = test_client.post(
        "/v1/tools/memory_get", json={"path": "MEMORY.md"}, headers={"X-Agent-Id": AGENT}
    ).json()
    deadline = time.monotonic() + WAIT_S
    while "Wednesdays" not in read["text"] and time.monotonic() < deadline:
        time.sleep(0.2)
        read = test_client.post(
            "/v1/tools/memory_get", json={"path": "MEMORY.md"}, headers={"X-Agent-Id": AGENT}
        ).json()
    assert "Wednesdays" in read["text"]
    assert not {"AGENTS.md", "SOUL.md", "memory/notes.txt"} & _paths(documents)


def test_a_document_ingested_by_hand_is_not_the_watchers_to_forget(
    settings: Settings, embedder: FastEmbedEmbedder, tmp_path: Path
) -> None:
    workspace = _workspace(tmp_path)
    app = create_app(settings, embedder=embedder, workers=[workspace_watcher(workspace, AGENT)])
    with TestClient(base_url=LOCAL_URL, app=app) as test_client:
        added = test_client.post(
            "/v1/documents", json={"path": "runbooks/deploy.md", "text": "# Deploy\n\nRun it.\n",
                                   "owner": AGENT},
        )  # fmt: skip
        assert added.status_code == 201, added.text

        def documents() -> list[dict[str, str]]:
            listed = test_client.get("/v1/documents", params={"owner": AGENT}).json()
            return listed["documents"] if isinstance(listed, dict) else listed

        (workspace / "memory" / "gone.md").write_text("# Gone\n\nSoon deleted.\n")
        assert "memory/gone.md" in _until(documents, lambda p: "memory/gone.md" in p)
        (workspace / "memory" / "gone.md").unlink()
        paths = _until(documents, lambda p: "memory/gone.md" not in p)
        assert "runbooks/deploy.md" in paths and "memory/gone.md" not in paths


@pytest.mark.slow
def test_serve_watch_openclaw_as_a_process(tmp_path: Path) -> None:
    workspace = _workspace(tmp_path)
    port = free_port()
    log = tmp_path / "serve.log"
    args = ["-m", "tribal_memory", "serve", "--port", str(port), "--watch-openclaw",
            "--openclaw-workspace", str(workspace), "--openclaw-agent", AGENT,
            "--data-dir", str(tmp_path / "data")]  # fmt: skip
    process = ServerProcess(args, log_path=log, port=port, env=child_env({}))
    process.start()
    try:
        url = f"http://127.0.0.1:{port}/v1/documents"

        def documents() -> list[dict[str, str]]:
            listed = httpx.get(url, params={"owner": AGENT}, timeout=30).json()
            return listed["documents"] if isinstance(listed, dict) else listed

        expected = {"MEMORY.md", "memory/2026-03-02.md"}
        assert _until(documents, lambda p: p >= expected) == expected
        _write(workspace / "USER.md", "# User\n\nThe user is called Dana.\n")
        assert "USER.md" in _until(documents, lambda p: "USER.md" in p)
    finally:
        process.stop()
    text = log.read_text(errors="replace")
    assert f"watching OpenClaw workspace {workspace}" in text and "Traceback" not in text
    assert "USER.md created for main" in text


def test_watch_openclaw_errors_say_what_to_do(tmp_path: Path) -> None:
    runner = CliRunner()
    missing = runner.invoke(
        cli.app,
        ["serve", "--watch-openclaw", "--openclaw-workspace", str(tmp_path / "nowhere"),
         "--data-dir", str(tmp_path / "d")],
    )  # fmt: skip
    assert missing.exit_code == 1 and "does not exist" in missing.output
    no_openclaw = runner.invoke(
        cli.app,
        ["serve", "--watch-openclaw", "--openclaw", str(tmp_path / "no-openclaw"),
         "--data-dir", str(tmp_path / "d")],
    )  # fmt: skip
    assert no_openclaw.exit_code == 1 and "not found" in no_openclaw.output
    without = runner.invoke(
        cli.app, ["serve", "--openclaw-agent", "main", "--data-dir", str(tmp_path / "d")]
    )
    assert without.exit_code == 2 and "--watch-openclaw" in without.output
    assert "Traceback" not in missing.output + no_openclaw.output + without.output

"""The dashboard in a real browser: headless Chromium (Debian's) driven by Playwright.

A real ``tribal-memory serve`` on 127.0.0.1 with keys required, over a data
dir seeded beforehand. The test signs in with a key, loads each page, filters
the list, runs a search and opens a hit's graph neighbourhood, edits and
deletes a memory, opens a document's tree, and checks screenshots are not blank.

Skipped, with the reason, when Playwright or a Chromium binary is missing
(``.ci/run`` installs both: ``chromium`` from apt, ``playwright`` from PyPI;
Playwright's own browser download is never used).
"""

from __future__ import annotations

import io
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tribal_memory.base.config import Settings
from tribal_memory.base.models import MemoryInput, SearchFilters
from tribal_memory.bench.server_process import ServerProcess, ServerStartError, free_port
from tribal_memory.embeddings.fastembed import FastEmbedEmbedder
from tribal_memory.service.memory_service import MemoryService

pytestmark = [
    pytest.mark.slow,
    pytest.mark.sqlite_only(reason="the server process opens its own SQLite data dir"),
]

sync_api = pytest.importorskip(
    "playwright.sync_api", reason="playwright is not installed (pip install playwright)"
)
Image = pytest.importorskip("PIL.Image", reason="Pillow is needed to look at screenshots")

GUIDE = b"""# Deploy guide

How we ship the service.

## Keys

The deploy key rotates every month.

## Rollback

Roll back with the previous image tag.
"""


def _chromium() -> str | None:
    for candidate in (os.environ.get("TRIBAL_TEST_CHROMIUM"), "chromium", "chromium-browser"):
        if candidate and (found := shutil.which(candidate)):
            return found
    return None


@dataclass(frozen=True)
class Server:
    url: str
    key: str
    ids: dict[str, str]


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedEmbedder
) -> Iterator[Server]:
    """A server with keys required over a seeded data dir; an admin key to sign in with."""
    root = tmp_path_factory.mktemp("dashboard")
    data = root / "data"
    with MemoryService(Settings(data_dir=data, auth="required"), embedder=embedder) as service:
        items = [
            MemoryInput("The deploy key rotates monthly", owner="alice", tags=("ops",)),
            MemoryInput("Alice prefers dark roast coffee", owner="alice", tags=("personal",)),
            MemoryInput("Production runs on three replicas", owner="shared", source="wiki"),
        ]
        ids = [r.memory.memory_id for r in service.capture_batch(items)]
        names = dict(zip(("key", "coffee", "replicas"), ids, strict=True))
        service.relate(names["key"], names["replicas"], "related_to")
        service.ingest_document("guide.md", GUIDE, owner="alice")
        found = service.recall_with_feedback(
            "when does the key rotate", k=3, filters=SearchFilters(owner="alice")
        )
        service.record_usage_feedback(found.retrieval_id or "", [found.hits[0].memory.memory_id])
        _, token = service.keys.create("ops", admin=True)
    port = free_port()
    process = ServerProcess(
        ["-m", "tribal_memory", "serve", "--data-dir", str(data), "--port", str(port)],
        log_path=root / "server.log",
        port=port,
        env={"TRIBAL_AUTH": "required"},
    )
    try:
        process.start()
    except ServerStartError as exc:
        pytest.fail(f"{exc.detail}:\n{process.log_text()}")
    try:
        yield Server(process.base_url, token, names)
    finally:
        process.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    executable = _chromium()
    if executable is None:
        pytest.skip("no Chromium binary (apt-get install chromium); the browser tests need one")
    with sync_api.sync_playwright() as playwright:
        try:
            launched = playwright.chromium.launch(
                executable_path=executable,
                args=["--no-sandbox", "--disable-background-networking", "--disable-gpu"],
            )
        except sync_api.Error as exc:
            pytest.skip(f"Playwright could not start {executable}: {exc.message.splitlines()[0]}")
        try:
            yield launched
        finally:
            launched.close()


def _not_blank(png: bytes, path: Path) -> None:
    """Fails unless the screenshot has text and colour: many colours, a good share off-white.

    The screenshot is kept at ``path`` (under the test's temp dir) to look at.
    """
    path.write_bytes(png)
    image = Image.open(io.BytesIO(png)).convert("RGB")
    colours = image.getcolors(maxcolors=1 << 20) or []
    assert len(colours) > 50, f"only {len(colours)} colours: a blank page?"
    background = max(colours)[0]
    assert background < 0.97 * image.width * image.height, "one colour covers the page"


def test_dashboard_flows_in_chromium(server: Server, browser: object, tmp_path: Path) -> None:
    context = browser.new_context(viewport={"width": 1280, "height": 900})  # type: ignore[attr-defined]
    page = context.new_page()
    requests_elsewhere: list[str] = []
    page.on(
        "request",
        lambda r: requests_elsewhere.append(r.url) if not r.url.startswith(server.url) else None,
    )
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))

    # Sign in once: the key form, then every page without asking again.
    page.goto(f"{server.url}/ui/memories")
    assert page.url.endswith("/ui/login")
    page.fill("input[name=key]", "tm_wrong")
    page.click("button[type=submit]")
    assert "unknown or revoked" in page.inner_text("main")
    page.fill("input[name=key]", server.key)
    page.click("button[type=submit]")
    page.wait_for_url("**/ui/memories")
    assert "dark roast" in page.inner_text("#memory-rows")
    assert page.evaluate("typeof htmx") == "object"  # the vendored htmx loaded
    _not_blank(page.screenshot(full_page=True), tmp_path / "memories.png")

    # Filter by tag: htmx swaps the rows and pushes the URL.
    page.fill("#filters input[name=tag]", "ops")
    page.click("#filters button[type=submit]")
    page.wait_for_url("**tag=ops**")
    page.wait_for_function(
        "!document.querySelector('#memory-rows').innerText.includes('dark roast')"
    )
    assert "deploy key" in page.inner_text("#memory-rows")
    assert page.locator("header.top").count() == 1  # a fragment was swapped, not a page

    # Search as alice: learned and plain side by side, then a hit's neighbourhood.
    page.goto(f"{server.url}/ui/search")
    page.fill("input[name=q]", "how often does the deploy key rotate")
    page.fill("#search-form input[name=owner]", "alice")
    page.click("#search-form button[type=submit]")
    page.wait_for_selector("#results h2:has-text('Plain')")
    learned = page.locator(".result-col").first
    assert learned.locator("tr.hit").count() >= 3
    first = learned.locator("tr.hit", has_text="rotates monthly")
    first.locator("button:has-text('graph')").click()
    first.locator(".neighbors").wait_for()
    assert "three replicas" in first.locator(".neighbors").inner_text()
    _not_blank(page.screenshot(full_page=True), tmp_path / "search.png")

    # Edit a memory, then delete it after confirming.
    page.goto(f"{server.url}/ui/memories/{server.ids['coffee']}")
    page.click("#edit")
    page.wait_for_selector("#edit-form")
    page.fill("#edit-form textarea[name=content]", "Alice switched to green tea")
    page.fill("#edit-form input[name=tags]", "personal, drinks")
    page.click("#save")
    page.wait_for_selector("pre.content:has-text('green tea')")
    assert "drinks" in page.inner_text("#memory")
    page.click("#delete")
    page.wait_for_selector("#delete-form")
    assert "cannot be undone" in page.inner_text("#delete-form")
    page.click("#confirm-delete")
    page.wait_for_url("**/ui/memories")
    assert "green tea" not in page.inner_text("#memory-rows")
    assert "deploy key" in page.inner_text("#memory-rows")

    # Learning: server-drawn SVG. Documents: a tree opened by htmx, and store health.
    page.goto(f"{server.url}/ui/learning")
    assert page.locator("svg").count() == 3 and page.locator("svg polyline").count() == 3
    _not_blank(page.screenshot(full_page=True), tmp_path / "learning.png")
    page.goto(f"{server.url}/ui/documents")
    page.click("summary:has-text('guide.md')")
    page.wait_for_selector(".doc-tree:has-text('Rollback')")
    assert "rotates every month" in page.inner_text(".doc-tree")
    page.click("#optimize")
    page.wait_for_selector("text=Optimized.")
    _not_blank(page.screenshot(full_page=True), tmp_path / "documents.png")

    assert errors == []
    assert requests_elsewhere == []  # nothing from a CDN
    context.close()

"""The web dashboard at /ui, in process: every page and fragment, escaping, auth and owner scoping.

The browser flows (htmx swaps, screenshots) are in test_dashboard_browser.py.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from litestar import Litestar
from litestar.testing import TestClient
from local import LOCAL_URL

from tribal_memory.base.config import Settings
from tribal_memory.base.models import MemoryInput, SearchFilters
from tribal_memory.embeddings.fastembed import FastEmbedEmbedder
from tribal_memory.interfaces.api.app import create_app
from tribal_memory.service.memory_service import MemoryService

FORM = {"Content-Type": "application/x-www-form-urlencoded"}
GUIDE = b"""# Deploy guide

How we ship the service.

## Keys

The deploy key rotates every month. Ask the platform team for a new one.

## Rollback

Roll back with the previous image tag and re-run the smoke checks.
"""


def _service(client: TestClient[Litestar]) -> MemoryService:
    service = client.app.state["service"]
    assert isinstance(service, MemoryService)
    return service


def _seed(service: MemoryService) -> dict[str, str]:
    """Memories of alice, bob and shared; a relation, an anchor and one feedback round."""
    items = [
        MemoryInput(
            "The deploy key <script>alert(1)</script> rotates monthly",
            owner="alice",
            tags=("ops",),
            source="runbook",
        ),
        MemoryInput(
            "Alice prefers dark roast coffee",
            owner="alice",
            tags=("personal",),
            event_time=datetime(2024, 3, 1, tzinfo=UTC),
        ),
        MemoryInput("Bob's staging password hint is the cat's name", owner="bob", tags=("ops",)),
        MemoryInput(
            "Production runs on three replicas behind the load balancer",
            owner="shared",
            kind="fact",
            source="wiki",
        ),
    ]
    ids = [r.memory.memory_id for r in service.capture_batch(items)]
    names = dict(zip(("key", "coffee", "bob", "replicas"), ids, strict=True))
    service.relate(names["key"], names["replicas"], "related_to")
    service.add_anchor(names["key"], "how often do credentials change")
    found = service.recall_with_feedback(
        "when does the deploy key rotate", k=3, filters=SearchFilters(owner="alice")
    )
    service.record_usage_feedback(found.retrieval_id or "", [names["key"]])
    return names


@pytest.fixture
def open_client(tmp_path: Path, embedder: FastEmbedEmbedder) -> Iterator[TestClient[Litestar]]:
    settings = Settings(data_dir=tmp_path / "data", auth="off")
    with TestClient(base_url=LOCAL_URL, app=create_app(settings, embedder=embedder)) as client:
        yield client


@pytest.fixture
def secured(tmp_path: Path, embedder: FastEmbedEmbedder) -> Iterator[TestClient[Litestar]]:
    settings = Settings(data_dir=tmp_path / "data", auth="required")
    with TestClient(base_url=LOCAL_URL, app=create_app(settings, embedder=embedder)) as client:
        yield client


def _login(client: TestClient[Litestar], owner: str, *, admin: bool = False) -> tuple[str, str]:
    """Sign in with a new key of ``owner``; its (key id, token)."""
    key, token = _service(client).keys.create(owner, admin=admin)
    answer = client.post("/ui/login", data={"key": token}, headers=FORM, follow_redirects=False)
    assert answer.status_code == 303 and answer.headers["location"] == "/ui/memories"
    return key.key_id, token


def test_every_page_renders_with_data_and_escapes_memory_text(
    open_client: TestClient[Litestar],
) -> None:
    names = _seed(_service(open_client))
    _service(open_client).ingest_document("guide.md", GUIDE, owner="alice")
    pages = [
        "/ui/memories",
        f"/ui/memories/{names['key']}",
        f"/ui/memories/{names['key']}/edit",
        f"/ui/memories/{names['key']}/delete",
        f"/ui/memories/{names['key']}/neighbors",
        "/ui/search?q=deploy+key&owner=alice",
        "/ui/learning",
        "/ui/documents",
        "/ui/documents/tree?path=guide.md",
    ]
    for page in pages:
        answer = open_client.get(page)
        assert answer.status_code == 200, page
        assert answer.headers["content-type"].startswith("text/html"), page
        assert "<script>alert(1)</script>" not in answer.text, page
    listing = open_client.get("/ui/memories").text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in listing
    assert open_client.get("/ui", follow_redirects=False).headers["location"] == "/ui/memories"


def test_htmx_requests_get_only_the_fragment(open_client: TestClient[Litestar]) -> None:
    _seed(_service(open_client))
    full = open_client.get("/ui/memories?kind=fact")
    part = open_client.get("/ui/memories?kind=fact", headers={"HX-Request": "true"})
    assert "<html" in full.text and "<html" not in part.text
    assert "<table" in part.text and "dark roast" in part.text
    search = open_client.get("/ui/search?q=coffee", headers={"HX-Request": "true"})
    assert "<html" not in search.text and "Learned" in search.text and "Plain" in search.text


def test_list_filters_by_owner_kind_tag_source_and_time(open_client: TestClient[Litestar]) -> None:
    _seed(_service(open_client))

    def shown(query: str) -> set[str]:
        text = open_client.get(f"/ui/memories?{query}").text
        return {
            word
            for word in ("deploy key", "dark roast", "staging password", "three replicas")
            if word in text
        }

    assert shown("") == {"deploy key", "dark roast", "staging password", "three replicas"}
    assert shown("owner=bob") == {"staging password", "three replicas"}
    assert shown("tag=ops") == {"deploy key", "staging password"}
    # The filter form sends every field; empty ones filter nothing.
    assert shown("owner=&kind=&tag=ops&source=&since=&until=") == {"deploy key", "staging password"}
    assert shown("source=wiki") == {"three replicas"}
    assert shown("owner=alice&tag=personal") == {"dark roast"}
    assert shown("until=2024-03-01") == {"dark roast"}
    assert "dark roast" not in shown("since=2025-01-01")
    assert shown("kind=chunk") == set()
    bad = open_client.get("/ui/memories?since=yesterday")
    assert bad.status_code == 400 and "invalid_input" in bad.text and "<html" in bad.text


def test_memory_page_shows_relations_anchors_and_feedback(
    open_client: TestClient[Litestar],
) -> None:
    names = _seed(_service(open_client))
    page = open_client.get(f"/ui/memories/{names['key']}").text
    assert "related_to" in page and names["replicas"][:8] in page
    assert "how often do credentials change" in page  # the manual anchor
    assert "when does the deploy key rotate" in page  # the retrieval and its feedback
    assert "used" in page and "+0." in page  # a positive weight
    neighbours = open_client.get(f"/ui/memories/{names['key']}/neighbors").text
    assert "three replicas" in neighbours and "related_to" in neighbours
    missing = open_client.get("/ui/memories/00000000-0000-0000-0000-000000000000")
    assert missing.status_code == 404 and "not_found" in missing.text


def test_edit_and_delete_through_the_forms(open_client: TestClient[Litestar]) -> None:
    names = _seed(_service(open_client))
    service = _service(open_client)
    answer = open_client.post(
        f"/ui/memories/{names['coffee']}/edit",
        data={
            "content": "Alice now drinks green tea",
            "kind": "fact",
            "tags": "personal, drinks",
            "source": "chat",
        },
        headers=FORM,
        follow_redirects=False,
    )
    assert answer.status_code == 303
    new_id = answer.headers["location"].rsplit("/", 1)[-1]
    edited = service.get(new_id)
    assert edited.content == "Alice now drinks green tea"
    assert edited.tags == ("personal", "drinks") and edited.source == "chat"
    htmx = open_client.post(
        f"/ui/memories/{new_id}/delete",
        data={},
        headers={**FORM, "HX-Request": "true"},
    )
    assert htmx.status_code == 200 and htmx.headers["hx-redirect"] == "/ui/memories"
    assert "green tea" not in open_client.get("/ui/memories").text
    again = open_client.post(f"/ui/memories/{new_id}/delete", data={}, headers=FORM)
    assert again.status_code == 404


def test_playground_shows_learned_parts_beside_plain(open_client: TestClient[Litestar]) -> None:
    names = _seed(_service(open_client))
    text = open_client.get("/ui/search?q=how+often+do+credentials+change&owner=alice").text
    learned, plain = text.split("<h2>Plain</h2>")
    # The anchor matches in the learned column only; the plain one has no learned columns.
    key_row = learned.split(names["key"], 1)[1].split("</tr>", 1)[0]
    numbers = re.findall(r'<td class="num[^"]*">([^<]*)</td>', key_row)
    assert numbers[3] == "1.000"  # anchor match of the memory whose anchor it is
    assert "Anchor" in learned and "Anchor" not in plain
    assert "staging password" not in text  # bob's memory is outside alice's view
    unknown = open_client.get("/ui/search?q=x&mode=nonsense")
    assert unknown.status_code == 400 and "mode must be one of" in unknown.text


def test_learning_page_counts_and_draws_the_curve(open_client: TestClient[Litestar]) -> None:
    _seed(_service(open_client))
    text = open_client.get("/ui/learning?owner=alice").text
    assert re.search(r'<span class="big">1</span> retrievals logged', text)
    assert "<polyline" in text and "<svg" in text
    assert open_client.get("/ui/learning?bucket=month").status_code == 400


def test_documents_tree_health_and_optimize(open_client: TestClient[Litestar]) -> None:
    _service(open_client).ingest_document("guide.md", GUIDE, owner="alice")
    page = open_client.get("/ui/documents").text
    assert "guide.md" in page and "unindexed rows" in page and 'id="optimize"' in page
    tree = open_client.get("/ui/documents/tree?path=guide.md&doc_owner=alice").text
    assert "Keys" in tree and "Rollback" in tree and "rotates every month" in tree
    assert open_client.get("/ui/documents/tree?path=nope.md").status_code == 404
    done = open_client.post("/ui/optimize", data={"run": "1"}, headers=FORM)
    assert done.status_code == 200 and "Optimized." in done.text


def test_locked_dashboard_asks_for_the_key_once_per_session(secured: TestClient[Litestar]) -> None:
    plain = secured.get("/ui/memories", follow_redirects=False)
    assert plain.status_code == 303 and plain.headers["location"] == "/ui/login"
    htmx = secured.get("/ui/memories", headers={"HX-Request": "true"})
    assert htmx.headers["hx-redirect"] == "/ui/login"
    assert secured.get("/ui/login").status_code == 200
    assert secured.get("/ui/static/vendor/htmx-2.0.11.min.js").status_code == 200
    wrong = secured.post("/ui/login", data={"key": "tm_nope"}, headers=FORM)
    assert wrong.status_code == 401 and "unknown or revoked" in wrong.text
    key_id, token = _login(secured, "alice")
    cookie = secured.cookies.get("tribal_key")
    assert cookie == token
    assert secured.get("/ui/memories").status_code == 200
    # The JSON API is unchanged: no header, no answer (the cookie's path is /ui).
    assert secured.get("/v1/memories").status_code == 401
    assert _service(secured).keys.revoke(key_id)
    assert secured.get("/ui/memories", follow_redirects=False).status_code == 303
    secured.post("/ui/logout", headers=FORM)
    assert secured.cookies.get("tribal_key") in (None, "")


def test_login_cookie_is_httponly_strict_and_scoped_to_ui(secured: TestClient[Litestar]) -> None:
    _, token = _service(secured).keys.create("alice")
    answer = secured.post("/ui/login", data={"key": token}, headers=FORM, follow_redirects=False)
    header = answer.headers["set-cookie"].lower()
    assert "httponly" in header and "samesite=strict" in header and "path=/ui" in header
    assert "secure" not in header.replace("samesite", "")  # plain http on loopback


def test_a_non_admin_key_sees_only_its_owner(secured: TestClient[Litestar]) -> None:
    names = _seed(_service(secured))
    _login(secured, "alice")
    listing = secured.get("/ui/memories").text
    assert "deploy key" in listing and "three replicas" in listing
    assert "staging password" not in listing
    assert secured.get("/ui/memories?owner=bob").status_code == 403
    assert secured.get(f"/ui/memories/{names['bob']}").status_code == 404
    assert secured.get("/ui/search?q=password&owner=bob").status_code == 403
    assert secured.get("/ui/learning?owner=bob").status_code == 403
    page = secured.get("/ui/documents").text
    assert 'id="optimize"' not in page
    assert secured.post("/ui/optimize", data={"run": "1"}, headers=FORM).status_code == 403
    # Alice cannot delete bob's memory by id.
    assert (
        secured.post(f"/ui/memories/{names['bob']}/delete", data={}, headers=FORM).status_code
        == 404
    )
    assert _service(secured).get(names["bob"]).owner == "bob"


def test_admin_key_sees_every_owner(secured: TestClient[Litestar]) -> None:
    _seed(_service(secured))
    _login(secured, "ops", admin=True)
    assert "staging password" in secured.get("/ui/memories?owner=bob").text
    assert 'id="optimize"' in secured.get("/ui/documents").text


def test_forms_from_a_foreign_origin_are_refused(open_client: TestClient[Litestar]) -> None:
    names = _seed(_service(open_client))
    answer = open_client.post(
        f"/ui/memories/{names['coffee']}/delete",
        data={},
        headers={**FORM, "Origin": "https://evil.example"},
    )
    assert answer.status_code == 403
    cross_site = open_client.post(
        f"/ui/memories/{names['coffee']}/delete",
        data={},
        headers={**FORM, "Sec-Fetch-Site": "cross-site"},
    )
    assert cross_site.status_code == 403 and "own pages" in cross_site.text
    assert _service(open_client).get(names["coffee"])
    json_body = open_client.post(
        f"/ui/memories/{names['coffee']}/delete",
        content=b"{}",
        headers={"Content-Type": "application/json"},
    )
    assert json_body.status_code == 415


def test_errors_of_htmx_requests_are_fragments_and_stale_forms_are_refused(
    open_client: TestClient[Litestar],
) -> None:
    names = _seed(_service(open_client))
    missing = open_client.get(
        "/ui/memories/00000000-0000-0000-0000-000000000000/edit", headers={"HX-Request": "true"}
    )
    assert missing.status_code == 404
    assert "<html" not in missing.text and "not_found" in missing.text
    form = open_client.get(f"/ui/memories/{names['coffee']}/edit").text
    version = re.search(r'name="version" value="([0-9a-f]+)"', form)
    assert version is not None
    _service(open_client).add_anchor(names["coffee"], "what does alice drink")  # no new version
    first = {"content": "Alice drinks tea", "kind": "fact", "tags": "", "version": version[1]}
    assert (
        open_client.post(
            f"/ui/memories/{names['coffee']}/edit", data=first, headers=FORM, follow_redirects=False
        ).status_code
        == 303
    )
    listed = _service(open_client).list_page(
        SearchFilters(owner="alice", include_shared=False, tags=()), limit=10
    )
    tea = next(m for m in listed.memories if m.content == "Alice drinks tea")
    stale = open_client.post(
        f"/ui/memories/{tea.memory_id}/delete", data={"version": version[1]}, headers=FORM
    )
    assert stale.status_code == 412 and "precondition" in stale.text.lower()
    assert _service(open_client).get(tea.memory_id)


def test_memory_history_is_scoped_to_the_viewer(secured: TestClient[Litestar]) -> None:
    names = _seed(_service(secured))
    service = _service(secured)
    found = service.recall_with_feedback(
        "how many replicas does production run", k=4, filters=SearchFilters(owner="bob")
    )
    service.record_usage_feedback(found.retrieval_id or "", [names["replicas"]])
    _login(secured, "alice")
    alice_view = secured.get(f"/ui/memories/{names['replicas']}").text
    assert "how many replicas" not in alice_view  # bob's question stays bob's
    _login(secured, "ops", admin=True)
    admin_view = secured.get(f"/ui/memories/{names['replicas']}").text
    assert "how many replicas does production run" in admin_view


def test_agent_feedback_moves_a_memory_up_in_the_learned_column(
    open_client: TestClient[Litestar],
) -> None:
    service = _service(open_client)
    texts = [
        "Deploys run from the release pipeline on merge",
        "The deploy key rotates monthly",
        "Staging deploys need a manual approval",
        "Rollbacks use the previous image tag",
        "Deploy windows are Tuesday and Thursday",
    ]
    ids = [
        r.memory.memory_id
        for r in service.capture_batch([MemoryInput(t, owner="alice") for t in texts])
    ]
    url = "/ui/search?q=how+do+we+deploy&owner=alice"
    before = open_client.get(url).text
    assert "▲" not in before and "▼" not in before  # nothing learned: the columns agree
    for _ in range(3):  # an agent keeps using the rollback memory for this question
        found = service.recall_with_feedback(
            "how do we deploy", k=5, filters=SearchFilters(owner="alice")
        )
        service.record_usage_feedback(found.retrieval_id or "", [ids[3]])
    learned, plain = open_client.get(url).text.split("<h2>Plain</h2>")
    first_learned = learned.split('<tr class="hit">', 1)[1].split("</tr>", 1)[0]
    assert "Rollbacks use the previous image tag" in first_learned
    assert re.search(r"▲\d", first_learned)
    first_plain = plain.split('<tr class="hit">', 1)[1].split("</tr>", 1)[0]
    assert "Rollbacks" not in first_plain


def test_the_dashboard_can_be_switched_off(tmp_path: Path, embedder: FastEmbedEmbedder) -> None:
    settings = Settings(data_dir=tmp_path / "data", auth="off", dashboard=False)
    with TestClient(base_url=LOCAL_URL, app=create_app(settings, embedder=embedder)) as client:
        answer = client.get("/ui/memories")
        assert answer.status_code == 404 and answer.json()["error"] == "not_found"
        assert client.get("/v1/memories").status_code == 200

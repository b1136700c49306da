"""One suite of scenarios over the library and the HTTP client (``MemoryAPI``'s contract).

``memory_api`` is parametrised over ``library`` (a :class:`MemoryService` over
a temp data dir), ``http`` (:class:`TribalMemoryClient` against a real
``tribal-memory serve`` process on 127.0.0.1, authentication on, an admin
key) and ``http-async`` (:class:`AsyncTribalMemoryClient` against the same
server, driven through an anyio blocking portal). Each scenario uses owners of
its own, so the module shares one service and one server. The clients decode
strictly: a field renamed on the wire fails here.
"""

from __future__ import annotations

import dataclasses
import inspect
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio.from_thread
import pytest

from tribal_memory import (
    Conflict,
    InvalidInput,
    MemoryInput,
    MemoryPatch,
    NotFound,
    RelationInput,
    SearchFilters,
    TooLarge,
)
from tribal_memory.auth.keys import open_api_keys
from tribal_memory.base.api import LOCAL_ONLY, MemoryAPI
from tribal_memory.base.config import Settings
from tribal_memory.base.errors import Forbidden, PreconditionFailed, TribalError, Unauthorized
from tribal_memory.base.graph import Near, Traversal
from tribal_memory.base.models import version_of
from tribal_memory.base.results import LearnedParts
from tribal_memory.bench.server_process import ServerProcess, ServerStartError, tribal_server
from tribal_memory.client import AsyncTribalMemoryClient, TribalMemoryClient
from tribal_memory.embeddings.base import Embedder
from tribal_memory.service.memory_service import MemoryService

pytestmark = pytest.mark.slow  # starts a real server process

STARTUP_TIMEOUT_S = 90.0


@dataclasses.dataclass(frozen=True)
class Server:
    process: ServerProcess
    admin_key: str
    user_key: str  # a non-admin key of owner "keyed-user"
    data_dir: Path


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A real server over a temp data dir with authentication required."""
    root = tmp_path_factory.mktemp("client-server")
    data_dir = root / "data"
    with open_api_keys(Settings(data_dir=data_dir)) as keys:
        _, admin = keys.create("admin", admin=True, label="contract tests")
        _, user = keys.create("keyed-user", label="contract tests")
    process = tribal_server(
        root / "server.log",
        data_dir=data_dir,
        env={"TRIBAL_AUTH": "required"},
        startup_timeout_s=STARTUP_TIMEOUT_S,
    )
    try:
        process.start()
    except ServerStartError as exc:
        pytest.fail(f"{exc.detail}:\n{process.log_text()}")
    try:
        yield Server(process, admin, user, data_dir)
    finally:
        process.stop()
    assert "Traceback" not in process.log_text()


@pytest.fixture(scope="module")
def library(
    tmp_path_factory: pytest.TempPathFactory, embedder: Embedder
) -> Iterator[MemoryService]:
    data_dir = tmp_path_factory.mktemp("client-library")
    with MemoryService(Settings(data_dir=data_dir), embedder=embedder) as service:
        yield service


class _BlockingAsync:
    """The async client's methods, called from this thread through an anyio portal."""

    def __init__(self, client: AsyncTribalMemoryClient, portal: anyio.from_thread.BlockingPortal):
        self._client, self._portal = client, portal

    def __getattr__(self, name: str) -> Callable[..., Any]:
        method = getattr(self._client, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            if name == "export_jsonl":
                return iter(self._portal.call(lambda: _collect(method(*args, **kwargs))))
            return self._portal.call(lambda: method(*args, **kwargs))

        return call


async def _collect(started: Any) -> list[str]:
    return [line async for line in await started]


@pytest.fixture(params=["library", "http", "http-async"])
def memory_api(request: pytest.FixtureRequest) -> Iterator[MemoryAPI]:
    if request.param == "library":
        yield request.getfixturevalue("library")
        return
    server: Server = request.getfixturevalue("server")
    url = server.process.base_url
    if request.param == "http":
        with TribalMemoryClient(url, api_key=server.admin_key, strict=True) as client:
            yield client
        return
    with anyio.from_thread.start_blocking_portal() as portal:
        client = AsyncTribalMemoryClient(url, api_key=server.admin_key, strict=True)
        try:
            yield _BlockingAsync(client, portal)  # type: ignore[misc]
        finally:
            portal.call(client.aclose)


def _owner() -> str:
    return f"agent-{uuid.uuid4().hex[:10]}"


FACTS = [
    "The VPN gateway for the Berlin office is vpn-berlin.example.org",
    "Alice prefers green tea over coffee in the afternoon",
    "The quarterly report is due on the first Monday of April",
    "Backups of the billing database run every night at 02:00 UTC",
]


def _capture_facts(api: MemoryAPI, owner: str) -> list[str]:
    results = api.capture_batch([MemoryInput(fact, owner=owner, tags=("t",)) for fact in FACTS])
    return [r.memory.memory_id for r in results]


# -- memories ----------------------------------------------------------------------------


def test_capture_is_idempotent_and_get_returns_the_memory(memory_api: MemoryAPI) -> None:
    owner = _owner()
    when = datetime(2026, 3, 1, 12, 30, tzinfo=UTC)
    item = MemoryInput(
        "Deploys freeze on Fridays",
        owner=owner,
        tags=("ops", "policy"),
        source="wiki/deploys",
        event_time=when,
        metadata={"team": "sre", "n": 3},
    )
    first = memory_api.capture(item)
    again = memory_api.capture(item)
    assert (first.status, again.status) == ("created", "exists")
    assert again.memory.memory_id == first.memory.memory_id
    got = memory_api.get(first.memory.memory_id, owner=owner)
    assert got == first.memory
    assert got.tags == ("ops", "policy") and got.event_time == when
    assert got.metadata == {"team": "sre", "n": 3}


def test_batch_capture_keeps_order_and_owners_are_scoped(memory_api: MemoryAPI) -> None:
    owner, other = _owner(), _owner()
    ids = _capture_facts(memory_api, owner)
    assert len(set(ids)) == len(FACTS)
    assert [memory_api.get(i).content for i in ids] == FACTS
    with pytest.raises(NotFound):
        memory_api.get(ids[0], owner=other)
    hits = memory_api.search("VPN gateway", filters=SearchFilters(owner=other)).hits
    assert all(h.memory.owner != owner for h in hits)


def test_missing_and_bad_input_raise_the_library_errors(memory_api: MemoryAPI) -> None:
    with pytest.raises(NotFound):
        memory_api.get(str(uuid.uuid4()))
    with pytest.raises(InvalidInput):
        memory_api.search("   ")
    with pytest.raises(InvalidInput):
        memory_api.capture(MemoryInput("   ", owner=_owner()))
    with pytest.raises(TooLarge):
        memory_api.search("anything", k=10_000)


def test_update_checks_the_version_and_delete_removes(memory_api: MemoryAPI) -> None:
    owner = _owner()
    memory = memory_api.capture(MemoryInput("Lunch is at noon", owner=owner)).memory
    changed = memory_api.update(memory.memory_id, MemoryPatch(tags=("food",)), owner=owner)
    assert changed.tags == ("food",) and changed.content == memory.content
    stale = version_of(memory)  # the version before the update
    with pytest.raises(PreconditionFailed):
        memory_api.update(memory.memory_id, MemoryPatch(tags=("x",)), owner=owner, if_version=stale)
    memory_api.delete(memory.memory_id, owner=owner)
    with pytest.raises(NotFound):
        memory_api.get(memory.memory_id)


def test_list_page_pages_through_an_owner(memory_api: MemoryAPI) -> None:
    owner = _owner()
    ids = _capture_facts(memory_api, owner)
    filters = SearchFilters(owner=owner, include_shared=False)
    first = memory_api.list_page(filters, limit=3)
    assert len(first.memories) == 3 and first.next_after is not None
    rest = memory_api.list_page(filters, limit=3, after=first.next_after)
    assert rest.next_after is None
    assert sorted(m.memory_id for m in first.memories + rest.memories) == sorted(ids)
    # Time filters need a zone, in process and over HTTP alike.
    naive = dataclasses.replace(filters, since=datetime(2000, 1, 1))
    with pytest.raises(InvalidInput, match="timezone"):
        memory_api.list_page(naive)
    with pytest.raises(InvalidInput, match="timezone"):
        memory_api.search("tea", filters=naive)
    since = dataclasses.replace(filters, since=datetime(2000, 1, 1, tzinfo=UTC))
    assert len(memory_api.search("tea", filters=since, k=10).hits) == len(FACTS)
    # An event time without a zone is taken as UTC.
    noon = datetime(2026, 5, 1, 12, 0)
    dated = memory_api.capture(MemoryInput("Standup moved to 9:30", owner=owner, event_time=noon))
    assert dated.memory.event_time == noon.replace(tzinfo=UTC)
    stats = memory_api.retrieval_stats(owner=owner, since=datetime(2000, 1, 1))
    assert stats.overall.retrievals == 0


# -- retrieval and feedback --------------------------------------------------------------


def test_search_and_recall_rank_the_relevant_memory_first(memory_api: MemoryAPI) -> None:
    owner = _owner()
    ids = _capture_facts(memory_api, owner)
    filters = SearchFilters(owner=owner, include_shared=False)
    for result in (
        memory_api.search("which host is the Berlin VPN?", filters=filters, k=3),
        memory_api.recall("which host is the Berlin VPN?", filters=filters, k=3),
    ):
        assert result.hits[0].memory.memory_id == ids[0]
        assert [h.rank for h in result.hits] == [1, 2, 3]
        assert all(0.0 <= h.score <= 1.0 for h in result.hits)
        assert result.retrieval_id is None
    assert memory_api.recall("VPN", filters=filters).mode == "vector"
    vector_hits = memory_api.search("tea", filters=filters, mode="text", k=2).hits
    assert vector_hits[0].memory.memory_id == ids[1]


def test_search_near_a_memory_and_by_vector(memory_api: MemoryAPI) -> None:
    owner = _owner()
    ids = _capture_facts(memory_api, owner)
    memory_api.relate(ids[0], ids[3], "same-team", owner=owner)
    near = Near(ids[0], Traversal(steps=1))
    found = memory_api.search("database backups", filters=SearchFilters(owner=owner), near=near)
    assert {h.memory.memory_id for h in found.hits} == {ids[0], ids[3]}
    assert found.hits[0].memory.memory_id == ids[3]
    dim = memory_api.owner_stats(owner).embedding_dim
    with pytest.raises(InvalidInput):
        memory_api.search_vector([0.5] * (dim + 1))


def test_feedback_on_a_logged_retrieval(memory_api: MemoryAPI) -> None:
    owner = _owner()
    ids = _capture_facts(memory_api, owner)
    filters = SearchFilters(owner=owner)
    result = memory_api.recall_with_feedback(
        "when are the billing backups?",
        filters=filters,
        k=3,
        learned=LearnedParts.none(),
        session_id="task-1",
    )
    assert result.retrieval_id is not None and result.variant == "baseline"
    used = memory_api.record_usage_feedback(result.retrieval_id, [ids[3]], owner=owner)
    assert used.used == (ids[3],) and ids[3] not in used.unused and not used.duplicate
    again = memory_api.record_usage_feedback(result.retrieval_id, [ids[3]], owner=owner)
    assert again.duplicate
    with pytest.raises(Conflict):
        memory_api.record_usage_feedback(result.retrieval_id, [], owner=owner)
    with pytest.raises(NotFound):
        memory_api.record_usage_feedback(str(uuid.uuid4()), [], owner=owner)
    stats = memory_api.retrieval_stats(owner=owner)
    assert (stats.overall.retrievals, stats.overall.with_feedback) == (1, 1)
    assert stats.overall.usage_rate == 1.0


def test_anchors_and_variants(memory_api: MemoryAPI) -> None:
    owner = _owner()
    ids = _capture_facts(memory_api, owner)
    anchor = memory_api.add_anchor(ids[2], "deadline for the finance numbers", owner=owner)
    assert (anchor.source, anchor.active, anchor.owner) == ("manual", True, owner)
    assert [a.text for a in memory_api.anchors(ids[2], owner=owner)] == [anchor.text]
    memory_api.remove_anchor(ids[2], anchor.text, owner=owner)
    assert memory_api.anchors(ids[2], owner=owner) == []
    with pytest.raises(NotFound):
        memory_api.remove_anchor(ids[2], anchor.text, owner=owner)
    memory_api.pin_variant(owner, "baseline")
    assert memory_api.variant_for(owner) == "baseline"
    memory_api.pin_variant(owner, None)
    assert memory_api.variant_for(owner) == "learned"


# -- graph -------------------------------------------------------------------------------


def test_relations_neighbours_and_intersection(memory_api: MemoryAPI) -> None:
    owner = _owner()
    a, b, c, d = _capture_facts(memory_api, owner)
    edge = memory_api.relate(a, b, "supports", weight=0.5, owner=owner)
    assert (edge.source_id, edge.target_id, edge.type, edge.weight) == (a, b, "supports", 0.5)
    stored = memory_api.relate_batch(
        [RelationInput(c, b, "supports"), RelationInput(c, d, "cites", 2.0)], owner=owner
    )
    assert [(r.source_id, r.target_id) for r in stored] == [(c, b), (c, d)]
    assert {r.target_id for r in memory_api.relations(c, owner=owner)} == {b, d}
    near = memory_api.neighbors(a, steps=2, owner=owner)
    assert [(n.memory.memory_id, n.steps) for n in near] == [(b, 1), (c, 2)]
    assert [n.memory.memory_id for n in memory_api.neighbors(c, types=["cites"])] == [d]
    common = memory_api.intersection([a, c], owner=owner)
    assert [(x.memory.memory_id, x.steps) for x in common] == [(b, (1, 1))]
    memory_api.unrelate(a, b, "supports", owner=owner)
    assert memory_api.neighbors(a, owner=owner) == []
    with pytest.raises(NotFound):
        memory_api.unrelate(a, b, "supports", owner=owner)
    with pytest.raises(InvalidInput):
        memory_api.relate(a, a, "self", owner=owner)


# -- documents, export and import, stats -------------------------------------------------

DOCUMENT = """# Runbook

## Restarting the queue

Drain the workers first, then restart the broker with `systemctl restart rabbit`.

## Rotating keys

Keys rotate every 90 days; the vault holds the new ones.
"""


def test_documents_are_ingested_listed_searched_and_deleted(memory_api: MemoryAPI) -> None:
    owner = _owner()
    created = memory_api.ingest_document("ops/runbook.md", DOCUMENT, owner=owner)
    assert (created.status, created.owner) == ("created", owner) and created.chunks >= 1
    same = memory_api.ingest_document("ops/runbook.md", DOCUMENT.encode(), owner=owner)
    assert same.status == "unchanged"
    listed = [d for d in memory_api.documents(owner=owner) if d.owner == owner]
    assert [(d.path, d.format) for d in listed] == [("ops/runbook.md", "markdown")]
    hits = memory_api.search(
        "how often do keys rotate", filters=SearchFilters(owner=owner, include_shared=False)
    ).hits
    assert hits and "90 days" in hits[0].memory.content
    deleted = memory_api.delete_document("ops/runbook.md", owner=owner)
    assert deleted.status == "deleted" and deleted.removed >= 1
    with pytest.raises(NotFound):
        memory_api.delete_document("ops/runbook.md", owner=owner)


def test_export_clear_and_import_bring_an_owner_back(memory_api: MemoryAPI) -> None:
    owner = _owner()
    ids = _capture_facts(memory_api, owner)
    memory_api.relate(ids[0], ids[1], "supports", owner=owner)
    progressed: list[int] = []
    lines = list(memory_api.export_jsonl(owner=owner, progress=progressed.append))
    assert all(line.endswith("\n") for line in lines)
    assert sum(progressed) == len(lines) - 2  # records: all but the header and end lines
    with pytest.raises(InvalidInput):
        memory_api.clear_owner(owner, confirm="someone-else")
    cleared = memory_api.clear_owner(owner, confirm=owner)
    assert cleared.memories == len(FACTS)
    assert memory_api.owner_stats(owner).memories == 0
    counts: list[tuple[int, int]] = []
    export = "".join(lines).encode()
    result = memory_api.import_jsonl(export, progress=lambda d, t: counts.append((d, t)))
    assert result.memories.created >= len(FACTS) and result.relations.created == 1
    assert counts and counts[-1][0] == counts[-1][1]
    assert memory_api.get(ids[0], owner=owner).content == FACTS[0]
    again = memory_api.import_jsonl(export)
    assert again.memories.created == 0 and again.relations.skipped == 1
    with pytest.raises(InvalidInput):
        memory_api.import_jsonl(b'{"not": "an export"}\n')


def test_stats_count_what_was_captured(memory_api: MemoryAPI) -> None:
    owner = _owner()
    before = memory_api.stats()
    _capture_facts(memory_api, owner)
    after = memory_api.stats()
    assert after.memories == before.memories + len(FACTS)
    assert after.owners[owner] == len(FACTS)
    assert after.embedding_dim > 0 and after.embedding_model
    mine = memory_api.owner_stats(owner)
    assert (mine.owner, mine.memories) == (owner, len(FACTS))


def test_library_and_client_agree_on_the_same_data(library: MemoryService, server: Server) -> None:
    """Congruence: the same captures give the same ranking and scores in process and over HTTP."""
    owner = _owner()
    with TribalMemoryClient(server.process.base_url, api_key=server.admin_key) as client:
        for api in (library, client):
            _capture_facts(api, owner)
        filters = SearchFilters(owner=owner, include_shared=False)
        for query in ("who drinks tea?", "nightly database job", "office network access"):
            here = library.search(
                query, filters=filters, mode="vector", learned=LearnedParts.none()
            )
            there = client.search(
                query, filters=filters, mode="vector", learned=LearnedParts.none()
            )
            assert [h.memory.memory_id for h in there.hits] == [
                h.memory.memory_id for h in here.hits
            ]
            assert [h.score for h in there.hits] == pytest.approx(
                [h.score for h in here.hits], abs=1e-5
            )
            mine, theirs = here.hits[0].memory, there.hits[0].memory
            times = {"created_at": mine.created_at, "updated_at": mine.updated_at}
            assert dataclasses.replace(theirs, **times) == mine  # all but when it was stored


# -- the surface itself, and what only HTTP has ------------------------------------------


def test_every_public_service_method_is_mirrored_or_local_only() -> None:
    public = {
        name
        for name, member in inspect.getmembers(MemoryService, inspect.isfunction)
        if not name.startswith("_")
    }
    mirrored = {name for name in dir(MemoryAPI) if not name.startswith("_")}
    assert public - mirrored - LOCAL_ONLY == set(), "add it to MemoryAPI or LOCAL_ONLY"
    assert mirrored - public == set()
    assert all(hasattr(TribalMemoryClient, n) for n in mirrored)
    assert all(inspect.iscoroutinefunction(getattr(AsyncTribalMemoryClient, n)) for n in mirrored)


def test_keys_are_checked_and_errors_come_back_typed(server: Server) -> None:
    url = server.process.base_url
    with TribalMemoryClient(url, api_key="tm_not-a-key") as client, pytest.raises(Unauthorized):
        client.stats()
    with TribalMemoryClient(url, api_key=server.user_key, strict=True) as client:
        with pytest.raises(Forbidden):
            client.stats()  # store-wide counts need an admin key
        with pytest.raises(Forbidden):
            client.capture(MemoryInput("not mine to write", owner="someone-else"))
        own = client.capture(MemoryInput("written with a user key", owner="keyed-user"))
        assert own.memory.owner == "keyed-user"
        assert client.owner_stats(None).owner == "keyed-user"


def test_the_environment_names_the_server_and_key(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRIBAL_URL", server.process.base_url)
    monkeypatch.setenv("TRIBAL_API_KEY", server.admin_key)
    with TribalMemoryClient() as client:
        assert client.health()["status"] == "ok"
        assert client.stats().embedding_dim > 0


def test_an_unreachable_server_is_store_unavailable() -> None:
    from tribal_memory.base.errors import StoreUnavailable
    from tribal_memory.bench.server_process import free_port

    url = f"http://127.0.0.1:{free_port()}"
    with TribalMemoryClient(url, timeout=5) as client, pytest.raises(StoreUnavailable):
        client.stats()
    assert issubclass(StoreUnavailable, TribalError)

"""Team learning: feedback on shared memories helps every owner; private signals stay put."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from tribal_memory.base.config import Settings
from tribal_memory.base.errors import InvalidInput
from tribal_memory.base.models import SHARED_OWNER, MemoryInput, SearchFilters
from tribal_memory.base.results import LearnedParts
from tribal_memory.base.tables import QueryCacheRow, QueryFactWeightRow
from tribal_memory.embeddings.fastembed import FastEmbedEmbedder
from tribal_memory.learned.anchors import TEAM
from tribal_memory.service.memory_service import MemoryService

SHARED_FACTS = (
    "Billing runs on PostgreSQL 15 in the eu-west cluster",
    "The billing database is backed up every night at 02:00",
    "Billing invoices are rendered with WeasyPrint",
    "The billing service is owned by the payments team",
)
PRIVATE_FACTS = (
    "My billing notes: ask Priya about the invoice template",
    "I keep the billing runbook draft in my home folder",
)
QUESTION = "When is the billing database backed up?"
REWORDED = "is there a copy of the payments data?"


def _store(service: MemoryService) -> tuple[list[str], list[str]]:
    shared = service.capture_batch([MemoryInput(f, owner=SHARED_OWNER) for f in SHARED_FACTS])
    private = service.capture_batch([MemoryInput(f, owner="alice") for f in PRIVATE_FACTS])
    return [r.memory.memory_id for r in shared], [r.memory.memory_id for r in private]


def _feedback(service: MemoryService, owner: str, query: str, used: str) -> None:
    result = service.recall_with_feedback(query, k=6, filters=SearchFilters(owner=owner))
    shown = [h.memory.memory_id for h in result.hits]
    assert used in shown
    service.record_usage_feedback(str(result.retrieval_id), [used], owner=owner)


def test_one_agents_feedback_on_a_shared_memory_lifts_it_for_another(
    tmp_path: Path, embedder: FastEmbedEmbedder
) -> None:
    # The team's usage prior carries it (off by default since the query adapter: on here).
    pooled = Settings(data_dir=tmp_path / "d", usage_prior_weight=0.3)
    with MemoryService(pooled, embedder=embedder) as service:
        shared, _ = _store(service)
        backup = shared[1]
        bob = SearchFilters(owner="bob")
        before = service.search(REWORDED, k=4, filters=bob)
        assert all(h.boost == 0.0 for h in before.hits)  # nothing learned yet
        for _ in range(2):
            _feedback(service, "alice", QUESTION, backup)
        after = service.search(REWORDED, k=4, filters=bob)
        plain = service.search(REWORDED, k=4, filters=bob, learned=LearnedParts.none())
        off = Settings(data_dir=tmp_path / "d", team_learning=False, usage_prior_weight=0.3)
    boosted = {h.memory.memory_id: h.boost for h in after.hits}
    assert boosted[backup] > 0.0
    plain_score = {h.memory.memory_id: h.score for h in plain.hits}[backup]
    assert {h.memory.memory_id: h.score for h in after.hits}[backup] > plain_score
    # With team learning off, bob's search knows nothing of alice's feedback.
    with MemoryService(off, embedder=embedder) as service:
        unpooled = service.search(REWORDED, k=4, filters=bob)
    assert all(h.boost == 0.0 for h in unpooled.hits)


def test_owners_starting_with_a_star_are_reserved(
    tmp_path: Path, embedder: FastEmbedEmbedder
) -> None:
    with MemoryService(Settings(data_dir=tmp_path / "d"), embedder=embedder) as service:
        with pytest.raises(InvalidInput, match="reserved"):
            service.capture(MemoryInput("x", owner="*team*"))
        assert service.stats().memories == 0


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    events=st.lists(
        st.tuples(
            st.sampled_from(["alice", "bob"]),
            st.integers(0, len(SHARED_FACTS) + len(PRIVATE_FACTS) - 1),
            st.sampled_from([QUESTION, REWORDED, "who owns billing?", "billing notes"]),
        ),
        min_size=1,
        max_size=6,
    )
)
def test_no_signal_from_a_private_memory_reaches_another_owner(
    embedder: FastEmbedEmbedder, events: list[tuple[str, int, str]]
) -> None:
    with (
        tempfile.TemporaryDirectory() as tmp,
        MemoryService(Settings(data_dir=Path(tmp)), embedder=embedder) as service,
    ):
        shared, private = _store(service)
        everything = shared + private
        for owner, index, query in events:
            memory_id = everything[index]
            if memory_id in private and owner != "alice":
                continue  # bob cannot see it, so cannot report it used
            result = service.recall_with_feedback(query, k=6, filters=SearchFilters(owner=owner))
            shown = [h.memory.memory_id for h in result.hits]
            used = [memory_id] if memory_id in shown else []
            service.record_usage_feedback(str(result.retrieval_id), used, owner=owner)
        with service.db.session() as session:
            weights = session.execute(
                select(QueryFactWeightRow.owner, QueryFactWeightRow.memory_id)
            ).all()
            cached = session.execute(select(QueryCacheRow.owner, QueryCacheRow.memory_ids)).all()
        # Alice's private memories appear only in alice's own learned rows.
        assert all(owner == "alice" for owner, m in weights if m in private), weights
        assert all(owner == "alice" for owner, ids in cached if set(ids or ()) & set(private))
        for query in (QUESTION, REWORDED, "billing notes"):
            hits = service.search(query, k=6, filters=SearchFilters(owner="bob")).hits
            assert all(h.memory.memory_id in shared for h in hits)


def test_deleting_a_shared_memory_leaves_no_team_signal_behind(
    tmp_path: Path, embedder: FastEmbedEmbedder
) -> None:
    with MemoryService(Settings(data_dir=tmp_path / "d"), embedder=embedder) as service:
        shared, _ = _store(service)
        backup = shared[1]
        _feedback(service, "alice", QUESTION, backup)
        with service.db.session() as session:
            owners = set(session.scalars(select(QueryFactWeightRow.owner)).all())
        assert owners == {"alice", TEAM}
        service.delete(backup)
        with service.db.session() as session:
            left = session.execute(
                select(QueryFactWeightRow.owner).where(QueryFactWeightRow.memory_id == backup)
            ).all()
            cached = session.scalars(select(QueryCacheRow.memory_ids)).all()
        hits = service.search(REWORDED, k=4, filters=SearchFilters(owner="bob")).hits
    assert left == [] and all(backup not in (ids or ()) for ids in cached)
    assert all(h.memory.memory_id != backup for h in hits)


def test_a_reserved_owner_is_a_400_over_http(tmp_path: Path, embedder: FastEmbedEmbedder) -> None:
    from litestar.testing import TestClient
    from local import LOCAL_URL

    from tribal_memory.interfaces.api import create_app

    app = create_app(Settings(data_dir=tmp_path / "d"), embedder=embedder)
    with TestClient(base_url=LOCAL_URL, app=app) as client:
        response = client.post("/v1/memories", json={"content": "x", "owner": "*team*"})
        assert response.status_code == 400
        assert response.json()["error"] == "invalid_input"
        assert client.get("/v1/stats").json()["memories"] == 0

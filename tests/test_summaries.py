"""Section and document summaries (issue 18): creation, links, sync, modes, LLM fallback.

Real model, LanceDB and SQLite in tmp dirs; the LLM is a stub HTTP server on
127.0.0.1 (``FakeChat`` of the LLM expansion tests).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from test_learned_llm import FakeChat, fake_llm  # noqa: F401 (fake_llm: a fixture)

from tribal_memory.base.config import Settings
from tribal_memory.base.models import Memory, SearchFilters
from tribal_memory.documents.summaries import Summarizer, sentences
from tribal_memory.embeddings.fastembed import FastEmbedEmbedder
from tribal_memory.retrieval.automatic import choose_mode
from tribal_memory.service.memory_service import MemoryService

GUIDE = """# Ops guide

This guide covers how the team runs services in production. It explains deployment,
monitoring and incident response for every service we own.

## Deployment

Deploys run on Tuesdays after the standup. Every deploy is tagged with a release number.
The release manager announces each deploy in the ops channel. Staging gets the build an
hour before production does.

### Rollbacks

To roll back a deploy, run ./rewind.sh with the release tag. Rollbacks take about five
minutes. After a rollback, file an incident report. Never roll back database migrations
by hand.

## Monitoring

Dashboards live in Grafana. Alerts page the on-call engineer through PagerDuty.
"""
PATH = "runbooks/ops.md"
SUMMARY_ONLY = SearchFilters(kinds=("summary",))


def _summaries(service: MemoryService) -> dict[str, Memory]:
    """Summary memories by heading path (``""``: the document's)."""
    found = [m for batch, _ in service.store.scan(SUMMARY_ONLY) for m in batch]
    return {str(m.metadata["heading"]): m for m in found}


def _edges(service: MemoryService, kind: str) -> set[tuple[str, str]]:
    ids = [m.memory_id for batch, _ in service.store.scan() for m in batch]
    return {(r.source_id, r.target_id) for r in service.core.graph.edges_of(ids) if r.type == kind}


def _no_orphans(service: MemoryService) -> None:
    """Every relation's two ends are stored, and every stored summary is in a document row."""
    ids = {m.memory_id for batch, _ in service.store.scan() for m in batch}
    with service.db.session() as session:
        from sqlalchemy import select

        from tribal_memory.base.tables import DocumentRow, RelationRow

        for relation in session.scalars(select(RelationRow)).all():
            assert relation.source_id in ids and relation.target_id in ids
        recorded = {
            item["memory_id"]
            for row in session.scalars(select(DocumentRow)).all()
            for item in row.summaries
        }
    assert set(_ids(_summaries(service))) <= recorded


def _ids(summaries: dict[str, Memory]) -> list[str]:
    return [m.memory_id for m in summaries.values()]


def _chunks_by_heading(service: MemoryService) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for batch, _ in service.store.scan(SearchFilters(kinds=("chunk",))):
        for memory in batch:
            found.setdefault(str(memory.metadata["heading"]), []).append(memory.memory_id)
    return found


def test_ingest_makes_linked_section_and_document_summaries(service: MemoryService) -> None:
    service.ingest_document(PATH, GUIDE)
    summaries = _summaries(service)
    headings = ["Ops guide", "Ops guide > Deployment", "Ops guide > Deployment > Rollbacks"]
    assert sorted(summaries) == sorted(["", *headings, "Ops guide > Monitoring"])
    rollbacks = summaries["Ops guide > Deployment > Rollbacks"]
    assert rollbacks.kind == "summary" and rollbacks.source == PATH
    assert rollbacks.content.startswith(f"{PATH} § Ops guide > Deployment > Rollbacks\n")
    assert "./rewind.sh" in rollbacks.content
    assert rollbacks.metadata["summary_of"] == "section"
    assert rollbacks.metadata["title"] == "Rollbacks"
    assert rollbacks.metadata["method"] == "extractive"
    assert summaries[""].metadata["summary_of"] == "document"
    assert summaries[""].doc_id == rollbacks.doc_id

    chunks = _chunks_by_heading(service)
    summarizes = _edges(service, "summarizes")
    assert summarizes == {
        (summaries[heading].memory_id, chunk) for heading, ids in chunks.items() for chunk in ids
    }
    subsections = _edges(service, "has_subsection")
    by = {h: m.memory_id for h, m in summaries.items()}
    assert subsections == {
        (by[""], by["Ops guide"]),
        (by["Ops guide"], by["Ops guide > Deployment"]),
        (by["Ops guide"], by["Ops guide > Monitoring"]),
        (by["Ops guide > Deployment"], by["Ops guide > Deployment > Rollbacks"]),
    }
    _no_orphans(service)


def test_reingest_keeps_unchanged_summaries_and_drops_changed_ones(
    service: MemoryService,
) -> None:
    service.ingest_document(PATH, GUIDE)
    before = _summaries(service)
    old_monitoring = before["Ops guide > Monitoring"].memory_id
    changed = GUIDE.replace(
        "Dashboards live in Grafana.",
        "Dashboards live in Grafana and logs are searched in Kibana by the on-call engineer.",
    )
    result = service.ingest_document(PATH, changed)
    assert result.status == "updated"
    after = _summaries(service)
    for heading in ("Ops guide", "Ops guide > Deployment", "Ops guide > Deployment > Rollbacks"):
        assert after[heading].memory_id == before[heading].memory_id
    assert after["Ops guide > Monitoring"].memory_id != old_monitoring
    assert "Kibana" in after["Ops guide > Monitoring"].content
    assert service.store.get([old_monitoring]) == {}
    assert not [r for r in service.core.graph.edges_of([old_monitoring])]
    chunks = _chunks_by_heading(service)
    assert {
        c
        for s, c in _edges(service, "summarizes")
        if s == after["Ops guide > Monitoring"].memory_id
    } == set(chunks["Ops guide > Monitoring"])
    _no_orphans(service)

    service.delete_document(PATH)
    assert _summaries(service) == {}
    assert service.core.graph.count() == 0


def test_summaries_off_makes_none_and_switching_off_removes_them(
    tmp_path: Path, embedder: FastEmbedEmbedder
) -> None:
    data = tmp_path / "data"
    with MemoryService(Settings(data_dir=data, summaries="off"), embedder=embedder) as service:
        service.ingest_document(PATH, GUIDE)
        assert _summaries(service) == {} and service.core.graph.count() == 0
    with MemoryService(Settings(data_dir=data), embedder=embedder) as service:
        assert service.ingest_document(PATH, GUIDE).status == "updated"  # method changed
        assert len(_summaries(service)) == 5
    with MemoryService(Settings(data_dir=data, summaries="off"), embedder=embedder) as service:
        service.ingest_document(PATH, GUIDE)
        assert _summaries(service) == {} and service.core.graph.count() == 0
        _no_orphans(service)


def test_extractive_summary_keeps_the_most_central_sentences_in_order(
    settings: Settings, embedder: FastEmbedEmbedder
) -> None:
    text = (
        "Backups run every night at two. Backups are kept for thirty days in the bucket. "
        "The office plant needs water on Fridays. Restoring a backup takes one command. "
        "Backup failures page the on-call engineer."
    )
    assert len(sentences(text)) == 5
    summarizer = Summarizer(settings, embedder)
    summary = summarizer.extractive([text, "```\ncode only\n```", ""])
    kept = sentences(summary[0].text)
    assert len(kept) == 3 and "office plant" not in summary[0].text
    assert kept == [s for s in sentences(text) if s in kept]  # document order
    assert summary[1].text == "``` code only ```" and summary[2].text == ""
    assert all(len(s.text) <= settings.summary_max_chars for s in summary)


def _llm_settings(tmp_path: Path, url: str, **extra: object) -> Settings:
    return Settings(
        data_dir=tmp_path / "data", summaries="llm", llm_url=url, llm_model="stub", **extra
    )


def test_llm_summaries_come_from_the_endpoint(
    tmp_path: Path,
    embedder: FastEmbedEmbedder,
    fake_llm: tuple[FakeChat, str],  # noqa: F811 (the fixture imported above)
) -> None:
    fake, url = fake_llm
    fake.content = "The section in one sentence."
    with MemoryService(Settings(data_dir=tmp_path / "data"), embedder=embedder) as service:
        service.ingest_document(PATH, GUIDE)  # extractive first: switching re-summarises
        extractive = set(_ids(_summaries(service)))
    with MemoryService(_llm_settings(tmp_path, url), embedder=embedder) as service:
        assert service.ingest_document(PATH, GUIDE).status == "updated"
        summaries = _summaries(service)
        assert not extractive & set(_ids(summaries))
        _no_orphans(service)
    assert {m.metadata["method"] for m in summaries.values()} == {"llm"}
    assert summaries["Ops guide > Monitoring"].content.endswith("\nThe section in one sentence.")
    assert len(fake.requests) == 5  # four sections and the document
    asked = fake.requests[0]["body"]
    assert asked["model"] == "stub" and "Ops guide" in asked["messages"][1]["content"]


@pytest.mark.parametrize("failure", ["error", "timeout"])
def test_llm_failure_falls_back_to_extractive(
    tmp_path: Path,
    embedder: FastEmbedEmbedder,
    fake_llm: tuple[FakeChat, str],  # noqa: F811 (the fixture imported above)
    failure: str,
) -> None:
    fake, url = fake_llm
    if failure == "error":
        fake.status = 500
    else:
        fake.stall = True
    settings = _llm_settings(tmp_path, url, summary_llm_timeout_s=0.5)
    with MemoryService(settings, embedder=embedder) as service:
        service.ingest_document(PATH, GUIDE)
        summaries = _summaries(service)
    fake.stopping.set()
    assert len(summaries) == 5
    assert {m.metadata["method"] for m in summaries.values()} == {"extractive"}
    assert len(fake.requests) == 1  # after one failure the document is summarised extractively


@pytest.fixture
def guide(service: MemoryService) -> Iterator[MemoryService]:
    service.ingest_document(PATH, GUIDE)
    service.ingest_document(
        "notes/lunch.md",
        "# Lunch\n\nThe cafeteria serves soup on Mondays and pasta on Thursdays.\n",
    )
    yield service


def test_plain_modes_leave_summaries_out_unless_kinds_names_them(guide: MemoryService) -> None:
    for mode in ("hybrid", "vector", "text", "hybrid_expanded"):
        hits = guide.search("how do I roll back a deploy?", k=20, mode=mode).hits  # type: ignore[arg-type]
        assert hits and all(h.memory.kind == "chunk" for h in hits), mode
    named = guide.search("roll back a deploy", k=20, filters=SearchFilters(kinds=("summary",)))
    assert named.hits and all(h.memory.kind == "summary" for h in named.hits)


def test_summary_mode_searches_summaries_only(guide: MemoryService) -> None:
    result = guide.search("overview of running services in production", k=5, mode="summary")
    assert result.mode == "summary" and result.mode_reason is None
    assert result.hits and all(h.memory.kind == "summary" for h in result.hits)
    assert all(0.0 <= h.score <= 1.0 for h in result.hits)


def test_title_mode_returns_the_section_summary_then_its_chunks(guide: MemoryService) -> None:
    result = guide.search("what does the deployment section say about rollbacks?", mode="title")
    assert result.mode == "title"
    first = result.hits[0].memory
    assert first.kind == "summary" and first.metadata["heading"].endswith("Rollbacks")
    chunk = next(h.memory for h in result.hits if h.memory.kind == "chunk")
    assert "./rewind.sh" in chunk.content
    assert [h.rank for h in result.hits] == list(range(1, len(result.hits) + 1))
    assert [h.score for h in result.hits] == sorted((h.score for h in result.hits), reverse=True)

    missed = guide.search("what is the meaning of zebras?", mode="title")
    assert missed.mode == "hybrid" and "no section title matches" in (missed.mode_reason or "")


@pytest.mark.parametrize(
    ("query", "mode", "reason"),
    [
        ("what does the deployment section say about rollbacks?", "title", "section"),
        ("In the chapter on classes, what are odds and ends?", "title", "section"),
        ("give me an overview of the ops guide", "summary", "overview"),
        ("what is the logging HOWTO about?", "summary", "overview"),
        ("how do I roll back a deploy?", "hybrid", "no rule matched"),
    ],
)
def test_automatic_mode_says_which_mode_ran_and_why(
    guide: MemoryService, query: str, mode: str, reason: str
) -> None:
    assert choose_mode(query)[0] == mode
    result = guide.search(query, mode="automatic")
    assert result.mode == mode or (mode == "title" and result.mode == "hybrid")
    assert result.mode_reason is not None and result.mode_reason.startswith("automatic: ")
    assert reason in result.mode_reason


def test_a_document_of_one_section_has_one_summary_for_both(service: MemoryService) -> None:
    text = (
        "Alice owns the billing service and its on-call rota. The invoices are exported "
        "every night at two. Refunds over a thousand euros need a second approval. "
        "The exporter writes CSV files to the finance bucket.\n"
    )
    service.ingest_document("alice/notes.txt", text, owner="alice")
    summaries = [m for batch, _ in service.store.scan(SUMMARY_ONLY) for m in batch]
    assert len(summaries) == 1  # the section's summary is the document's
    (summary,) = summaries
    assert summary.content.startswith("alice/notes.txt\n") and summary.owner == "alice"
    chunks = _chunks_by_heading(service)[""]
    assert _edges(service, "summarizes") == {(summary.memory_id, c) for c in chunks}
    assert _edges(service, "has_subsection") == set()
    _no_orphans(service)
    service.delete_document("alice/notes.txt", owner="alice")
    assert not [m for batch, _ in service.store.scan(SUMMARY_ONLY) for m in batch]

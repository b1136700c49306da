"""Documents: token chunking, PDF, heading hierarchy, the document index, context, folders, watch.

Real tokenizer, real model, real LanceDB and SQLite in tmp dirs. PDFs are
written by hand in the test (``make_pdf``), no binary fixture.
"""

from __future__ import annotations

import queue
import shutil
import threading
from collections.abc import Iterator
from io import BytesIO
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError
from pypdf import PdfReader, PdfWriter
from sqlalchemy import select

from tribal_memory.base.config import Settings
from tribal_memory.base.errors import InvalidInput, NotFound, TooLarge
from tribal_memory.base.models import (
    SHARED_OWNER,
    Memory,
    MemoryInput,
    SearchFilters,
    memory_id_for,
)
from tribal_memory.base.tables import QueryCacheRow, QueryFactWeightRow
from tribal_memory.documents.ingest import plan_ingest
from tribal_memory.documents.parsing import doc_id_for, parse_document
from tribal_memory.documents.sync import (
    FileOutcome,
    document_files,
    sync_directory,
    watch_directory,
)
from tribal_memory.documents.tokens import EMBEDDED_TEXT_TOKENS, count_tokens, token_offsets
from tribal_memory.embeddings.fastembed import FastEmbedEmbedder
from tribal_memory.service.memory_service import MemoryService

# -- helpers ----------------------------------------------------------------------------


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def make_pdf(pages: list[list[str]]) -> bytes:
    """A minimal PDF 1.4: one Helvetica text line per entry, one page per list."""
    objects = {
        1: b"<< /Type /Catalog /Pages 2 0 R >>",
        3: b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    }
    kids = []
    for n, lines in enumerate(pages):
        page, content = 4 + 2 * n, 5 + 2 * n
        kids.append(f"{page} 0 R")
        ops = ["BT", "/F1 12 Tf", "14 TL", "72 720 Td"]
        ops += [f"({_escape(line)}) Tj T*" for line in lines]
        stream = "\n".join([*ops, "ET"]).encode("latin-1")
        objects[page] = (
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
            f"/Resources << /Font << /F1 3 0 R >> >> /Contents {content} 0 R >>"
        ).encode()
        objects[content] = b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream)
    objects[2] = f"<< /Type /Pages /Kids [{' '.join(kids)}] /Count {len(pages)} >>".encode()
    out = bytearray(b"%PDF-1.4\n")
    offsets = {}
    for number in sorted(objects):
        offsets[number] = len(out)
        out += b"%d 0 obj\n%s\nendobj\n" % (number, objects[number])
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offsets[number] for number in sorted(objects))
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(out)


def encrypted(pdf: bytes, user_password: str) -> bytes:
    writer = PdfWriter(clone_from=PdfReader(BytesIO(pdf)))
    writer.encrypt(user_password=user_password, owner_password="owner", algorithm="RC4-128")
    buffer = BytesIO()
    writer.write(buffer)
    return buffer.getvalue()


SENTENCES = [
    "The billing service runs on PostgreSQL and is deployed every Tuesday.",
    "Invoices are generated at midnight UTC by the nightly batch job.",
    "Refunds above five hundred euros need approval from the finance lead.",
    "The payment gateway retries failed charges three times over two days.",
    "Customer data is encrypted at rest with keys rotated every quarter.",
    "Support engineers can read invoices but never change them.",
]

HANDBOOK = "\n".join(
    [
        "# Billing handbook",
        "",
        "This handbook explains how billing works at the company.",
        "",
        "## Operations",
        "",
        *[f"{sentence} Rule {n}." for n, sentence in enumerate(SENTENCES * 3)],
        "",
        "## Policies",
        "",
        "### Refunds",
        "",
        "Refunds are paid back to the original card within ten working days.",
        "",
        "## Empty heading",
        "",
        "### Under an empty heading",
        "",
        "Nested text under a heading that has no text of its own.",
        "",
    ]
)


def stored(service: MemoryService, ids: list[str]) -> dict[str, Memory]:
    return service.store.get(ids)


def chunk_memories(service: MemoryService, owner: str, path: str) -> list[Memory]:
    (info,) = [d for d in service.documents(owner=owner) if (d.owner, d.path) == (owner, path)]
    found = stored(service, list(info.chunk_ids))
    return [found[memory_id] for memory_id in info.chunk_ids]


def assert_parents_resolve(service: MemoryService, memories: list[Memory]) -> None:
    """Every parent_id names a stored memory of the same owner; chains end (no cycles)."""
    for memory in memories:
        seen = {memory.memory_id}
        current = memory
        while current.parent_id is not None:
            parent = stored(service, [current.parent_id]).get(current.parent_id)
            assert parent is not None, f"dangling parent of {current.memory_id}"
            assert parent.owner == memory.owner
            assert parent.memory_id not in seen
            seen.add(parent.memory_id)
            current = parent


# -- tokens and chunking (no model) ------------------------------------------------------


def test_chunks_fit_the_token_budget_and_overlap_by_real_tokens() -> None:
    text = "\n".join(f"{sentence} Item {n}." for n, sentence in enumerate(SENTENCES * 6))

    chunks = parse_document(
        "notes.txt", text.encode(), owner="me", max_tokens=60, overlap_tokens=12
    )

    assert len(chunks) > 5
    for chunk in chunks:
        assert count_tokens(chunk.content) == chunk.metadata["tokens"] <= 60
    for before, after in zip(chunks, chunks[1:], strict=False):
        shared = next(
            size
            for size in range(min(len(before.content), len(after.content)), -1, -1)
            if before.content.endswith(after.content[:size])
        )
        repeated = after.content[:shared]
        assert repeated, "consecutive chunks should overlap"
        assert count_tokens(repeated) <= 12
    # A default-sized document stays whole.
    (whole,) = parse_document("notes.txt", text.encode()[:2000], owner="me")
    assert whole.metadata["tokens"] == count_tokens(whole.content) <= 512


def test_chunk_settings_default_to_512_and_20_and_are_checked(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path)
    assert (settings.chunk_tokens, settings.chunk_overlap_tokens) == (512, 20)
    with pytest.raises(ValidationError, match="chunk_overlap_tokens"):
        Settings(data_dir=tmp_path, chunk_tokens=64, chunk_overlap_tokens=64)


def test_the_embedding_reads_only_the_first_254_tokens(embedder: FastEmbedEmbedder) -> None:
    text = " ".join(SENTENCES * 8)  # about 450 tokens
    offsets = token_offsets(text)
    assert len(offsets) > EMBEDDED_TEXT_TOKENS + 50

    def cut(tokens: int) -> str:
        return text[: offsets[tokens - 1][1]]

    full, at_limit, shorter = embedder.embed_batch([text, cut(EMBEDDED_TEXT_TOKENS), cut(200)])
    assert float(np.dot(full, at_limit)) > 0.9999
    assert float(np.dot(full, shorter)) < float(np.dot(full, at_limit))


def test_headings_form_a_parent_hierarchy() -> None:
    chunks = parse_document(
        "handbook.md", HANDBOOK.encode(), owner="team", max_tokens=80, overlap_tokens=10
    )

    ids = [memory_id_for(c.owner, c.content) for c in chunks]
    by_heading: dict[str, list[int]] = {}
    for n, chunk in enumerate(chunks):
        by_heading.setdefault(chunk.metadata["heading"], []).append(n)
    top = by_heading["Billing handbook"]
    operations = by_heading["Billing handbook > Operations"]
    refunds = by_heading["Billing handbook > Policies > Refunds"]
    nested = by_heading["Billing handbook > Empty heading > Under an empty heading"]
    assert len(operations) > 2
    # A section's first chunk holds its heading line; the others point at it.
    assert chunks[operations[0]].content.startswith("## Operations")
    assert {chunks[n].parent_id for n in operations[1:]} == {ids[operations[0]]}
    # First chunks point at the first chunk of the enclosing section that has one.
    assert chunks[top[0]].parent_id is None
    assert chunks[operations[0]].parent_id == ids[top[0]]
    assert chunks[refunds[0]].parent_id == ids[top[0]]  # "Policies" holds only its heading
    assert chunks[nested[0]].parent_id == ids[top[0]]
    # Heading-only sections are no chunk, and every parent is a chunk of this document.
    assert "Billing handbook > Policies" not in by_heading
    assert {c.parent_id for c in chunks} - {None} <= set(ids)
    doc_id = doc_id_for("handbook.md")
    assert [c.metadata["fragment_id"] for c in chunks] == [
        f"{doc_id}-chunk-{n}" for n in range(len(chunks))
    ]


# -- PDF ---------------------------------------------------------------------------------


def test_pdf_text_is_chunked_with_lines_and_pages() -> None:
    pages = [
        ["Quarterly report (Q3).", "Revenue grew by twelve percent."],
        ["Costs stayed flat.", "Headcount rose to forty."],
        ["Outlook: steady growth."],
    ]
    # Document lines run on across pages: line n of the extracted text and its page.
    lines = [(text, number) for number, page in enumerate(pages, start=1) for text in page]

    chunks = parse_document(
        "reports/q3.pdf", make_pdf(pages), owner="team", max_tokens=12, overlap_tokens=0
    )

    assert len(chunks) > 1
    assert " ".join(" ".join(c.content.split()) for c in chunks) == " ".join(
        text for text, _ in lines
    )
    for chunk in chunks:
        meta = chunk.metadata
        assert meta["tokens"] <= 12
        first_text, first_page = lines[meta["start_line"] - 1]
        last_text, last_page = lines[meta["end_line"] - 1]
        assert (meta["page_start"], meta["page_end"]) == (first_page, last_page)
        assert first_text.endswith(chunk.content.splitlines()[0])
        assert last_text.startswith(chunk.content.splitlines()[-1])
    assert chunks[-1].metadata["page_end"] == 3


def test_a_pdf_without_a_user_password_opens() -> None:
    pdf = encrypted(make_pdf([["Readable despite owner restrictions."]]), user_password="")

    (chunk,) = parse_document("open.pdf", pdf, owner="team")

    assert chunk.content == "Readable despite owner restrictions."


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (encrypted(make_pdf([["Top secret plans."]]), user_password="hunter2"), "encrypted"),
        (make_pdf([["Cut short."]])[:60], "not a readable PDF"),
        (b"just some bytes", "not a readable PDF"),
        (make_pdf([[], []]), "no extractable text"),
    ],
    ids=["password", "truncated", "garbage", "text-less"],
)
def test_unreadable_pdfs_are_invalid_input(data: bytes, message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        parse_document("bad.pdf", data, owner="team")


# -- folders -----------------------------------------------------------------------------


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_folders_map_to_owners(tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    write(kb / "shared" / "faq.md", "# FAQ\n\nAsk in the team channel.")
    write(kb / "alice" / "notes.txt", "Alice's notes")
    write(kb / "bob" / "deep" / "plan.md", "Bob's plan")
    write(kb / "top.md", "At the top")
    write(kb / "alice" / "image.png", "not text")
    write(kb / ".git" / "x.md", "hidden")
    single = write(tmp_path / "single.md", "named on its own")

    mapped, skipped = document_files([kb, single], owner=None, root=tmp_path)
    explicit, _ = document_files([kb], owner="ops", root=tmp_path)

    assert {(d.path, d.owner) for d in mapped} == {
        ("kb/shared/faq.md", SHARED_OWNER),
        ("kb/alice/notes.txt", "alice"),
        ("kb/bob/deep/plan.md", "bob"),
        ("kb/top.md", SHARED_OWNER),
        ("single.md", SHARED_OWNER),
    }
    assert skipped == [kb / "alice" / "image.png"]
    assert {d.owner for d in explicit} == {"ops"}


def test_plan_ingest_paths_are_relative_to_each_directory_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kb = write(tmp_path / "kb" / "alice" / "notes.md", "Alice's notes").parent.parent
    write(kb / "logo.png", "not text")
    single = write(tmp_path / "elsewhere" / "one.md", "named on its own")
    monkeypatch.chdir(tmp_path)

    plan = plan_ingest([kb, single], owner=None, root=None, fmt="auto")
    rooted = plan_ingest([kb], owner="ops", root=tmp_path, fmt="auto")

    assert [(d.path, d.owner) for d in plan.documents] == [
        ("alice/notes.md", "alice"),
        ("elsewhere/one.md", SHARED_OWNER),  # a file on its own: relative to the cwd
    ]
    assert plan.skipped == [kb / "logo.png"]
    assert (plan.conversations, plan.turns) == ([], [])
    assert [(d.path, d.owner) for d in rooted.documents] == [("kb/alice/notes.md", "ops")]


def test_plan_ingest_reads_locomo_files_named_unless_text(tmp_path: Path) -> None:
    talk = write(tmp_path / "talk.json", "{}")

    with pytest.raises(InvalidInput, match="not in LoCoMo format"):
        plan_ingest([talk], owner=None, root=None, fmt="auto")
    assert plan_ingest([talk], owner=None, root=None, fmt="text").skipped == [talk]


# -- the document index ------------------------------------------------------------------


@pytest.fixture
def small_chunks(tmp_path: Path, embedder: FastEmbedEmbedder) -> Iterator[MemoryService]:
    """A service cutting 80-token chunks, so a short document has several."""
    settings = Settings(data_dir=tmp_path / "data", chunk_tokens=80, chunk_overlap_tokens=10)
    with MemoryService(settings, embedder=embedder) as service:
        yield service


def test_ingest_creates_then_skips_an_unchanged_document(small_chunks: MemoryService) -> None:
    service = small_chunks

    created = service.ingest_document("kb/handbook.md", HANDBOOK, owner="team")
    again = service.ingest_document("kb/handbook.md", HANDBOOK.encode(), owner="team")

    assert (created.status, again.status) == ("created", "unchanged")
    assert created.chunks == again.chunks == created.added > 3
    assert (again.added, again.removed) == (0, 0)
    assert created.doc_id == doc_id_for("kb/handbook.md")
    memories = chunk_memories(service, "team", "kb/handbook.md")
    assert [m.chunk_index for m in memories] == list(range(len(memories)))
    assert {m.source for m in memories} == {"kb/handbook.md"}
    assert_parents_resolve(service, memories)
    (info,) = service.documents(owner="team")
    assert (info.format, info.byte_size) == ("markdown", len(HANDBOOK.encode()))


def test_a_changed_document_replaces_its_chunks_and_their_learned_data(
    small_chunks: MemoryService,
) -> None:
    service = small_chunks
    service.ingest_document("kb/handbook.md", HANDBOOK, owner="team")
    before = chunk_memories(service, "team", "kb/handbook.md")
    refunds = next(m for m in before if "original card" in m.content)
    # Usage feedback on the refunds chunk: a cache entry and a query weight point at it.
    owner = SearchFilters(owner="team")
    result = service.recall_with_feedback("how are refunds paid back?", filters=owner, k=3)
    assert refunds.memory_id in {hit.memory.memory_id for hit in result.hits}
    assert result.retrieval_id is not None
    service.record_usage_feedback(result.retrieval_id, [refunds.memory_id])
    assert learned_rows(service, refunds.memory_id) > 0

    changed = "# Changelog\n\nNew intro line.\n\n" + HANDBOOK.replace(
        "within ten working days", "within three working days"
    )
    updated = service.ingest_document("kb/handbook.md", changed, owner="team")

    after = chunk_memories(service, "team", "kb/handbook.md")
    assert updated.status == "updated"
    assert updated.removed >= 1 and updated.added >= 2
    assert refunds.memory_id not in stored(service, [refunds.memory_id])
    assert learned_rows(service, refunds.memory_id) == 0
    # Unchanged chunks keep their ids, and their lines follow the edit.
    kept = {m.memory_id for m in before} & {m.memory_id for m in after}
    assert kept
    moved = {m.memory_id: m for m in after}
    for memory_id in kept:
        old, new = next(m for m in before if m.memory_id == memory_id), moved[memory_id]
        assert new.metadata["start_line"] == old.metadata["start_line"] + 4
    assert [m.chunk_index for m in after] == list(range(len(after)))
    assert {m.metadata["fragment_id"] for m in after} == {
        f"{updated.doc_id}-chunk-{n}" for n in range(len(after))
    }
    assert_parents_resolve(service, after)
    assert service.store.count(
        SearchFilters(owner="team", include_shared=False, kinds=("chunk",))
    ) == len(after)


def learned_rows(service: MemoryService, memory_id: str) -> int:
    with service.db.session() as session:
        weights = session.scalars(
            select(QueryFactWeightRow).where(QueryFactWeightRow.memory_id == memory_id)
        ).all()
        cached = [
            row for row in session.scalars(select(QueryCacheRow)) if memory_id in row.memory_ids
        ]
    return len(weights) + len(cached)


def test_deleting_a_document_keeps_chunks_another_document_holds(
    small_chunks: MemoryService,
) -> None:
    service = small_chunks
    service.ingest_document("a/handbook.md", HANDBOOK, owner="team")
    service.ingest_document("b/handbook.md", HANDBOOK, owner="team")  # same text: same chunks
    service.ingest_document("c/other.md", "# Other\n\nSomething else entirely.", owner="team")

    result = service.delete_document("a/handbook.md", owner="team")

    assert (result.status, result.removed) == ("deleted", 0)
    survivors = chunk_memories(service, "team", "b/handbook.md")
    assert {m.source for m in survivors} == {"b/handbook.md"}
    assert {m.doc_id for m in survivors} == {doc_id_for("b/handbook.md")}
    assert_parents_resolve(service, survivors)
    gone = service.delete_document("b/handbook.md", owner="team")
    assert gone.removed == len({m.memory_id for m in survivors})
    with pytest.raises(NotFound):
        service.delete_document("b/handbook.md", owner="team")
    assert [d.path for d in service.documents(owner="team")] == ["c/other.md"]


def test_document_errors(small_chunks: MemoryService) -> None:
    service = small_chunks
    service.ingest_document("same.md", "Alice's copy.", owner="alice")
    service.ingest_document("same.md", "Bob's copy.", owner="bob")

    with pytest.raises(InvalidInput, match="several owners"):
        service.delete_document("same.md")
    with pytest.raises(NotFound):
        service.delete_document("same.md", owner="carol")
    with pytest.raises(InvalidInput, match="not a document"):
        service.ingest_document("notes.docx", "text", owner="alice")
    with pytest.raises(InvalidInput, match="not UTF-8"):
        service.ingest_document("latin.txt", "café".encode("latin-1"), owner="alice")
    with pytest.raises(InvalidInput, match="path"):
        service.ingest_document("  ", "text", owner="alice")
    assert [d.owner for d in service.documents(owner="alice")] == ["alice"]
    assert [d.owner for d in service.documents()] == ["alice", "bob"]


def test_limits_on_documents(tmp_path: Path, embedder: FastEmbedEmbedder) -> None:
    settings = Settings(data_dir=tmp_path / "d", max_document_bytes=100, max_content_chars=50)
    with MemoryService(settings, embedder=embedder) as service:
        with pytest.raises(TooLarge, match="TRIBAL_MAX_DOCUMENT_BYTES"):
            service.ingest_document("big.txt", "x " * 60, owner="me")
        with pytest.raises(TooLarge, match="lines 1-1"):
            service.ingest_document("wide.txt", "word " * 15, owner="me")
        assert service.documents() == []


# -- search context ------------------------------------------------------------------------


def test_context_returns_parent_and_siblings_of_the_same_owner(
    small_chunks: MemoryService,
) -> None:
    service = small_chunks
    service.ingest_document("kb/handbook.md", HANDBOOK, owner="team")
    # Another owner with the same document: its chunks are other memories.
    service.ingest_document("kb/handbook.md", HANDBOOK, owner="rival")
    chunks = chunk_memories(service, "team", "kb/handbook.md")
    operations = [m for m in chunks if m.metadata["heading"].endswith("Operations")]
    middle = operations[1]
    query = "refunds above five hundred euros finance lead approval"
    team = SearchFilters(owner="team", include_shared=False)

    plain = service.search(query, filters=team, k=5)
    result = service.search(query, filters=team, k=5, context=True)

    assert [(h.memory.memory_id, h.score) for h in result.hits] == [
        (h.memory.memory_id, h.score) for h in plain.hits
    ]
    assert plain.context == ()
    entries = {entry.memory_id: entry for entry in result.context}
    assert entries, "some hit is a chunk with context"
    for entry in result.context:
        for memory in (entry.parent, entry.previous, entry.next):
            assert memory is None or memory.owner == "team"
    # The middle chunk of "Operations": its heading chunk and both neighbours.
    by_id = service.search(middle.content[:200], filters=team, k=10, context=True)
    entry = next(e for e in by_id.context if e.memory_id == middle.memory_id)
    assert entry.parent is not None and entry.parent.memory_id == operations[0].memory_id
    assert entry.previous is not None and entry.previous.memory_id == operations[0].memory_id
    assert entry.next is not None and entry.next.memory_id == operations[2].memory_id
    # A section's last chunk has no next sibling across the section boundary.
    last = operations[-1]
    tail = service.search(last.content[:200], filters=team, k=10, context=True)
    last_entry = next(e for e in tail.context if e.memory_id == last.memory_id)
    assert last_entry.next is None


def test_context_never_shows_another_owners_memory(small_chunks: MemoryService) -> None:
    service = small_chunks
    service.ingest_document("kb/handbook.md", HANDBOOK, owner="alice")
    alice_chunk = chunk_memories(service, "alice", "kb/handbook.md")[0]
    # Bob captures a chunk by hand whose parent_id names Alice's chunk.
    service.capture(
        MemoryInput(
            "Bob's refund approvals go through the finance lead.",
            owner="bob",
            kind="chunk",
            doc_id=alice_chunk.doc_id,
            chunk_index=0,
            parent_id=alice_chunk.memory_id,
        )
    )

    result = service.search(
        "refund approvals finance lead", filters=SearchFilters(owner="bob"), k=5, context=True
    )

    assert {hit.memory.owner for hit in result.hits} == {"bob"}
    assert result.context == ()
    unscoped = service.search("refund approvals finance lead", k=10, context=True)
    for entry in unscoped.context:
        owner = next(h.memory.owner for h in unscoped.hits if h.memory.memory_id == entry.memory_id)
        for memory in (entry.parent, entry.previous, entry.next):
            assert memory is None or memory.owner == owner


def test_context_is_also_on_recall_and_recall_with_feedback(small_chunks: MemoryService) -> None:
    service = small_chunks
    service.ingest_document("kb/handbook.md", HANDBOOK, owner="team")
    team = SearchFilters(owner="team")

    recalled = service.recall("refund approval", filters=team, k=3, context=True)
    logged = service.recall_with_feedback("refund approval", filters=team, k=3, context=True)

    assert recalled.context and logged.context
    assert logged.retrieval_id is not None


# -- sync and watch ------------------------------------------------------------------------


def test_sync_directory_forgets_documents_whose_files_are_gone(
    small_chunks: MemoryService, tmp_path: Path
) -> None:
    service = small_chunks
    kb = tmp_path / "kb"
    write(kb / "alice" / "a.md", "# A\n\nAlice's first note.")
    write(kb / "alice" / "b.md", "# B\n\nAlice's second note.")
    outcomes: list[FileOutcome] = []

    sync_directory(service.document_index, kb, owner=None, root=tmp_path, report=outcomes.append)
    (kb / "alice" / "b.md").unlink()
    sync_directory(service.document_index, kb, owner=None, root=tmp_path, report=outcomes.append)

    statuses = [(o.file.path, o.result.status) for o in outcomes if o.result is not None]
    assert statuses == [
        ("kb/alice/a.md", "created"),
        ("kb/alice/b.md", "created"),
        ("kb/alice/a.md", "unchanged"),
        ("kb/alice/b.md", "deleted"),
    ]
    assert [(d.path, d.owner) for d in service.documents()] == [("kb/alice/a.md", "alice")]


def test_watch_mode_syncs_an_add_a_change_and_a_delete(
    small_chunks: MemoryService, tmp_path: Path
) -> None:
    service = small_chunks
    kb = tmp_path / "kb"
    write(kb / "shared" / "start.md", "# Start\n\nThere before watching began.")
    outcomes: queue.Queue[FileOutcome] = queue.Queue()
    ready, stop = threading.Event(), threading.Event()
    failures: list[BaseException] = []

    def run() -> None:
        try:
            watch_directory(
                service.document_index,
                kb,
                owner=None,
                root=tmp_path,
                report=outcomes.put,
                stop=stop,
                ready=ready.set,
            )
        except BaseException as exc:  # noqa: BLE001 - surfaced by the assertions below
            failures.append(exc)

    pending: dict[str, list[str]] = {}  # statuses reported but not yet asked for, per path

    def next_change(path: str) -> str:
        """The next status other than unchanged reported for ``path`` (waits up to a minute)."""
        while not pending.get(path):
            outcome = outcomes.get(timeout=60)
            assert outcome.result is not None, outcome.error
            if outcome.result.status != "unchanged":
                pending.setdefault(outcome.file.path, []).append(outcome.result.status)
        return pending[path].pop(0)

    watcher = threading.Thread(target=run, daemon=True)
    watcher.start()
    try:
        assert ready.wait(timeout=60), failures
        assert next_change("kb/shared/start.md") == "created"

        note = write(kb / "alice" / "note.md", "# Note\n\nAlice watches the deploys.")
        assert next_change("kb/alice/note.md") == "created"
        note.write_text("# Note\n\nAlice now watches the rollbacks too.", encoding="utf-8")
        assert next_change("kb/alice/note.md") == "updated"
        note.unlink()
        assert next_change("kb/alice/note.md") == "deleted"
        # A whole folder copied in, then moved away.
        incoming = tmp_path / "incoming"
        write(incoming / "one.md", "# One\n\nBob rotates the API keys.")
        write(incoming / "two.txt", "Bob archives old tickets on Fridays.")
        shutil.copytree(incoming, kb / "bob")
        assert next_change("kb/bob/one.md") == "created"
        assert next_change("kb/bob/two.txt") == "created"
        (kb / "bob").rename(tmp_path / "bob-away")
        assert {next_change("kb/bob/one.md"), next_change("kb/bob/two.txt")} == {"deleted"}
    finally:
        stop.set()
        watcher.join(timeout=60)
    assert not watcher.is_alive()
    assert failures == []
    assert [(d.path, d.owner) for d in service.documents()] == [
        ("kb/shared/start.md", SHARED_OWNER)
    ]
    hits = service.search("rollbacks", filters=SearchFilters(owner="alice"), k=5).hits
    assert all("rollbacks" not in hit.memory.content for hit in hits)

"""Export and import: round trips, re-embedding, idempotence, bad files, owner scope, CLI, HTTP.

Instance A (module fixture) holds memories of several owners, relations, a
pinned variant and enough usage feedback that every learned table has rows
and one question is answered from the query cache. Each test imports into a
fresh instance B over real LanceDB and SQLite.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from litestar.testing import TestClient
from local import LOCAL_URL
from sqlalchemy import func, select
from typer.testing import CliRunner

from tribal_memory.base.config import Settings
from tribal_memory.base.errors import EmbeddingError, InvalidInput, TooLarge
from tribal_memory.base.models import MemoryInput, MemoryPatch, SearchFilters, memory_id_for
from tribal_memory.base.tables import QueryCacheRow
from tribal_memory.embeddings.base import Embedder, Vector
from tribal_memory.embeddings.fastembed import FastEmbedEmbedder
from tribal_memory.interfaces import cli
from tribal_memory.interfaces.api import create_app
from tribal_memory.ops.transfer import EXCLUDED_TABLES, MEDIA_TYPE
from tribal_memory.ops.transfer.records import table_refs, transfer_tables
from tribal_memory.service.memory_service import MemoryService

QUESTION = "What tea does Alice drink?"
QUERIES = [QUESTION, "billing database", "Bob's bike", "launch date", "coffee"]
FACTS = [
    ("Alice drinks green tea every morning", "alice"),
    ("Alice's team chose PostgreSQL for the billing database", "alice"),
    ("Alice moved the launch to March", "alice"),
    ("Bob rides a red bike to work", "bob"),
    ("Bob's billing service is written in Go", "bob"),
    ("Bob prefers coffee over tea", "bob"),
    ("The office kitchen has green tea and coffee", "shared"),
    ("The company launch party is on a Friday", "shared"),
    ("Carol keeps the release calendar", "carol"),
]


def _open(root: Path, embedder: Embedder, **overrides: Any) -> MemoryService:
    settings = Settings(data_dir=root, transfer_batch_rows=4, **overrides)
    return MemoryService(settings, embedder=embedder)


MEMORY_COUNT = len(FACTS) + 4
"""The facts, a captured chunk, one ingested document's chunk and its section and document
summaries."""
RELATION_COUNT = 5
"""Three made by hand, and the summaries' ``summarizes`` and ``has_subsection``."""


@dataclass
class Source:
    """Instance A, open, and its export (lines) written to ``path``."""

    service: MemoryService
    path: Path
    lines: list[str]
    ids: dict[str, str]


def _populate(a: MemoryService) -> dict[str, str]:
    event = datetime(2024, 3, 1, 9, 30, tzinfo=UTC)
    items = [MemoryInput(content, owner=owner, tags=(owner, "t")) for content, owner in FACTS]
    items.append(
        MemoryInput(
            "Release notes: the search API is stable",
            owner="alice",
            kind="chunk",
            source="docs/release.md",
            doc_id="doc-1",
            chunk_index=2,
            parent_id="doc-1#release-notes",
            event_time=event,
            metadata={"page": 3, "headings": ["Release", "Notes"]},
        )
    )
    results = a.capture_batch(items)
    ids = {r.memory.content: r.memory.memory_id for r in results}
    # An update moves the memory in storage order and makes updated_at differ.
    a.update(ids["Carol keeps the release calendar"], MemoryPatch(tags=("calendar",)))
    a.relate(ids[FACTS[0][0]], ids[FACTS[6][0]], "mentions", weight=0.5)
    a.relate(ids[FACTS[3][0]], ids[FACTS[5][0]], "same_person")
    a.relate(ids[FACTS[1][0]], ids[FACTS[4][0]], "contrast")  # alice -> bob
    a.add_anchor(ids[FACTS[2][0]], "when is the launch?")
    a.pin_variant("bob", "baseline")
    note = "# Ops\n\nThe pager rota changes on Mondays.\n"
    a.ingest_document("notes/ops.md", note, owner="alice")
    document = SearchFilters(owner="alice", sources=("notes/ops.md",))
    ids.update({m.content: m.memory_id for m in a.list_memories(document, limit=10)})
    alice = SearchFilters(owner="alice")
    for _ in range(3):
        result = a.recall_with_feedback(QUESTION, filters=alice)
        used = [h.memory.memory_id for h in result.hits if "green tea every" in h.memory.content]
        a.record_usage_feedback(result.retrieval_id or "", used)
    result = a.recall_with_feedback("Which bike does Bob ride?", filters=SearchFilters(owner="bob"))
    a.record_usage_feedback(result.retrieval_id or "", [])
    assert a.search(QUESTION, filters=alice).cached  # the cache answers in A
    a.learner.adapters.wait()
    assert a.learner.adapters.train("alice")  # one question is enough in this store
    return ids


@pytest.fixture(scope="module")
def source(
    tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedEmbedder
) -> Iterator[Source]:
    root = tmp_path_factory.mktemp("transfer")
    with _open(root / "a", embedder, adapter_min_questions=1) as a:
        ids = _populate(a)
        a.optimize()  # full-text index up to date, as import leaves B (BM25 scores then agree)
        lines = list(a.export_jsonl())
        path = root / "a.jsonl"
        path.write_text("".join(lines), encoding="utf-8")
        yield Source(a, path, lines, ids)


def _records(lines: Sequence[str]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in lines]


def _write(tmp_path: Path, records: Sequence[dict[str, Any]], name: str = "x.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def _sql_counts(service: MemoryService) -> dict[str, int]:
    with service.db.session() as session:
        return {
            t.name: int(session.scalar(select(func.count()).select_from(t)) or 0)
            for t in transfer_tables()
        }


def _hits(service: MemoryService, query: str, owner: str | None) -> list[tuple[str, bool]]:
    result = service.search(query, k=5, filters=SearchFilters(owner=owner))
    return [(h.memory.memory_id, h.cached) for h in result.hits]


def _scores(service: MemoryService, query: str, owner: str | None) -> list[float]:
    return [h.score for h in service.search(query, k=5, filters=SearchFilters(owner=owner)).hits]


def _without_time(lines: Sequence[str]) -> list[dict[str, Any]]:
    records = _records(lines)
    records[0].pop("exported_at")
    return records


# -- round trip ------------------------------------------------------------------


def test_round_trip_reproduces_the_export_and_the_search(
    source: Source, tmp_path: Path, embedder: FastEmbedEmbedder
) -> None:
    records = _records(source.lines)
    # Every learned table of A has rows, so the round trip covers each of them.
    tables = {r["table"] for r in records if r["type"] == "row"}
    assert tables == {t.name for t in transfer_tables()} - {"relations"}
    assert records[-1]["counts"]["memory"] == MEMORY_COUNT

    with _open(tmp_path / "b", embedder) as b:
        result = b.import_jsonl(source.path)
        assert result.memories.created == MEMORY_COUNT
        assert result.reembedded == 0
        assert result.relations.created == RELATION_COUNT
        assert _without_time(b.export_jsonl()) == _without_time(source.lines)

        a = source.service
        for owner in ("alice", "bob", None):
            for query in QUERIES:
                assert _hits(b, query, owner) == _hits(a, query, owner), (query, owner)
                expected = pytest.approx(_scores(a, query, owner), abs=1e-4)
                assert _scores(b, query, owner) == expected, (query, owner)
        assert _hits(b, QUESTION, "alice")[0][1]  # B answers from the cache too
        assert b.variant_for("bob") == "baseline"
        anchored = source.ids[FACTS[2][0]]
        assert b.anchors(anchored) == a.anchors(anchored)
        assert b.get(anchored) == a.get(anchored)


def test_a_small_import_into_a_large_store_leaves_its_rows_to_the_automatic_optimize(
    source: Source, tmp_path: Path, embedder: FastEmbedEmbedder
) -> None:
    # An import of a tenth of the table or more ends in optimize(); a smaller one
    # does not force a rewrite of the whole table (a bulk load in small imports).
    big = [MemoryInput(f"Desk {i} has locker code {i * 7919 % 10000}", "dana") for i in range(200)]
    # No automatic optimize() within the test (rows, quiet time, or the prune an hour on).
    quiet = {"optimize_every_rows": 10_000, "keep_versions_s": 3600}
    with _open(tmp_path / "b", embedder, **quiet) as b:
        b.capture_batch(big)
        b.optimize()
        result = b.import_jsonl(source.path)
        assert result.memories.created == MEMORY_COUNT  # 13 memories: 6.5% of the table
        health = b.table_health()
        hits = b.search(FACTS[0][0], k=1, filters=SearchFilters(owner="alice")).hits
    assert health["unindexed_rows"] == MEMORY_COUNT, health
    assert hits and hits[0].memory.content == FACTS[0][0]  # found before it is indexed
    with _open(tmp_path / "c", embedder, **quiet) as c:
        c.import_jsonl(source.path)  # the whole table: indexed when the import returns
        assert c.table_health()["unindexed_rows"] == 0


def test_vectors_round_trip_bit_for_bit(source: Source, tmp_path: Path, embedder: Embedder) -> None:
    with _open(tmp_path / "b", embedder) as b:
        b.import_jsonl(source.path.read_bytes())
        stored = {
            m.memory_id: v
            for memories, vectors in b.store.scan(batch_size=3)
            for m, v in zip(memories, vectors, strict=True)
        }
    for memories, vectors in source.service.store.scan():
        for memory, vector in zip(memories, vectors, strict=True):
            assert stored[memory.memory_id].tobytes() == vector.tobytes()


def test_second_import_changes_nothing(
    source: Source, tmp_path: Path, embedder: FastEmbedEmbedder
) -> None:
    with _open(tmp_path / "b", embedder) as b:
        first = b.import_jsonl(source.path)
        before = _without_time(b.export_jsonl())
        again = b.import_jsonl(source.path)
        assert again.memories.created == 0
        assert again.memories.skipped == first.memories.created
        assert again.relations.created == 0 and again.relations.skipped == RELATION_COUNT
        assert {name: c.created for name, c in again.rows.items()} == dict.fromkeys(first.rows, 0)
        assert {name: c.skipped for name, c in again.rows.items()} == {
            name: c.created for name, c in first.rows.items()
        }
        assert _without_time(b.export_jsonl()) == before


def test_existing_memories_are_kept_and_rows_still_import(
    source: Source, tmp_path: Path, embedder: FastEmbedEmbedder
) -> None:
    with _open(tmp_path / "b", embedder) as b:
        content, owner = FACTS[0]
        mine = b.capture(MemoryInput(content, owner=owner, tags=("mine",))).memory
        result = b.import_jsonl(source.path)
        assert result.memories.skipped == 1
        kept = b.get(mine.memory_id)
        assert kept.tags == ("mine",)  # B's own copy wins
        # with the anchor A learned for it
        assert QUESTION in [anchor.text for anchor in b.anchors(mine.memory_id)]
        assert [r.type for r in b.relations(mine.memory_id)] == ["mentions"]


# -- another embedding model ---------------------------------------------------------


def test_another_model_is_reembedded(
    source: Source, tmp_path: Path, embedder: FastEmbedEmbedder
) -> None:
    records = _records(source.lines)
    records[0]["embedding_model"] = "another/model-v2"
    junk = base64.b64encode(np.full(embedder.dim, 0.05, dtype="<f4").tobytes()).decode()
    for record in records:
        if record["type"] == "memory":
            record["vector"] = junk  # the other model's vectors must not be used
    path = _write(tmp_path, records)
    with _open(tmp_path / "b", embedder) as b:
        result = b.import_jsonl(path)
        assert result.embedding_model == "another/model-v2"
        assert result.reembedded == MEMORY_COUNT
        for memories, vectors in b.store.scan():
            fresh = embedder.embed_batch([m.content for m in memories])
            np.testing.assert_allclose(vectors, fresh, atol=1e-6)
        with b.db.session() as session:
            cached = session.scalars(select(QueryCacheRow)).all()
            assert cached
            for row in cached:
                assert row.query_vector is not None
                expected = embedder.embed(row.query_text, query=True)
                np.testing.assert_allclose(
                    np.frombuffer(row.query_vector, "<f4"), expected, atol=1e-6
                )
        assert _hits(b, QUESTION, "alice") == _hits(source.service, QUESTION, "alice")


def test_another_dimension_is_reembedded(tmp_path: Path, embedder: FastEmbedEmbedder) -> None:
    header = {
        "type": "header",
        "format": "tribal-memory-export",
        "version": 1,
        "embedding_model": "tiny/8d",
        "embedding_dim": 8,
        "exported_at": "2025-01-01T00:00:00+00:00",
        "owner": None,
    }
    now = "2025-01-01T00:00:00+00:00"
    memory = {
        "memory_id": memory_id_for("dave", "Dave collects vinyl records"),
        "content": "Dave collects vinyl records",
        "owner": "dave",
        "kind": "fact",
        "tags": [],
        "source": None,
        "doc_id": None,
        "chunk_index": None,
        "parent_id": None,
        "created_at": now,
        "updated_at": now,
        "event_time": None,
        "anchor_text": "",
        "metadata": {},
    }
    vector = base64.b64encode(np.ones(8, dtype="<f4").tobytes()).decode()
    path = _write(
        tmp_path,
        [
            header,
            {"type": "memory", "memory": memory, "vector": vector},
            {"type": "end", "counts": {"memory": 1, "relation": 0, "row": 0}},
        ],
    )
    with _open(tmp_path / "b", embedder) as b:
        assert b.import_jsonl(path).reembedded == 1
        hit = b.recall("who collects records?", k=1).hits[0]
        assert hit.memory.memory_id == memory["memory_id"] and hit.vector_score is not None
        assert hit.vector_score > 0.5


class FailsOn(Embedder):
    """The real model, except that content containing ``marker`` raises EmbeddingError."""

    def __init__(self, real: Embedder, marker: str) -> None:
        self.real, self.marker = real, marker
        self.model_id, self.dim = real.model_id, real.dim

    def embed_batch(self, texts: Sequence[str], *, query: bool = False) -> Vector:
        if any(self.marker in t for t in texts):
            raise EmbeddingError("the model cannot embed this")
        return self.real.embed_batch(texts, query=query)


@pytest.mark.parametrize("stage", ["memories", "rows"])
def test_a_failure_while_writing_undoes_the_import(
    source: Source, tmp_path: Path, embedder: FastEmbedEmbedder, stage: str
) -> None:
    records = _records(source.lines)
    records[0]["embedding_model"] = "another/model-v2"  # so that import embeds
    if stage == "memories":  # the last batch of memories fails, after others were written
        last = max(i for i, r in enumerate(records) if r["type"] == "memory")
        marker = records[last]["memory"]["content"]
    else:  # every memory and relation is written, then re-embedding a cached query fails
        marker = QUESTION
    path = _write(tmp_path, records)
    with _open(tmp_path / "b", FailsOn(embedder, marker)) as b:
        with pytest.raises(EmbeddingError):
            b.import_jsonl(path)
        assert b.store.count() == 0
        assert set(_sql_counts(b).values()) == {0}


# -- bad files --------------------------------------------------------------------


def _kinds(records: list[dict[str, Any]], kind: str) -> list[int]:
    return [i for i, r in enumerate(records) if r["type"] == kind]


def _drop_end(r: list[dict[str, Any]]) -> int | None:
    r.pop()
    return None


def _unknown_type(r: list[dict[str, Any]]) -> int:
    i = _kinds(r, "relation")[0]
    r[i]["type"] = "edge"
    return i


def _missing_content(r: list[dict[str, Any]]) -> int:
    i = _kinds(r, "memory")[2]
    del r[i]["memory"]["content"]
    return i


def _tags_not_a_list(r: list[dict[str, Any]]) -> int:
    i = _kinds(r, "memory")[1]
    r[i]["memory"]["tags"] = "tea"
    return i


def _short_vector(r: list[dict[str, Any]]) -> int:
    i = _kinds(r, "memory")[-1]
    r[i]["vector"] = base64.b64encode(np.ones(3, dtype="<f4").tobytes()).decode()
    return i


def _not_an_export(r: list[dict[str, Any]]) -> int:
    r[0]["format"] = "some-other-tool"
    return 0


def _newer_version(r: list[dict[str, Any]]) -> int:
    r[0]["version"] = 2
    return 0


def _unknown_table(r: list[dict[str, Any]]) -> int:
    i = _kinds(r, "row")[0]
    r[i]["table"] = "nope"
    return i


def _secret_table(r: list[dict[str, Any]]) -> int:
    i = _kinds(r, "row")[0]
    r[i]["table"] = "api_keys"
    return i


def _unknown_column(r: list[dict[str, Any]]) -> int:
    i = _kinds(r, "row")[-1]
    r[i]["row"]["colour"] = "blue"
    return i


def _bad_time(r: list[dict[str, Any]]) -> int:
    i = _kinds(r, "relation")[-1]
    r[i]["relation"]["created_at"] = "yesterday"
    return i


def _memory_after_rows(r: list[dict[str, Any]]) -> int:
    memory = r.pop(_kinds(r, "memory")[0])
    i = _kinds(r, "row")[0] + 1
    r.insert(i, memory)
    return i


def _wrong_counts(r: list[dict[str, Any]]) -> int:
    r[-1]["counts"]["memory"] += 1
    return len(r) - 1


def _after_end(r: list[dict[str, Any]]) -> int:
    r.append(r[1])
    return len(r) - 1


BAD_FILES: list[tuple[Callable[[list[dict[str, Any]]], int | None], str]] = [
    (_drop_end, "without its end record"),
    (_unknown_type, "unknown record type 'edge'"),
    (_missing_content, "missing field 'content'"),
    (_tags_not_a_list, "field 'tags' must be list"),
    (_short_vector, "vector has 3 values; the header says 384"),
    (_not_an_export, "not a tribal-memory-export file"),
    (_newer_version, "unsupported export version 2"),
    (_unknown_table, "table 'nope' is not known here"),
    (_secret_table, "table 'api_keys' is never imported"),
    (_unknown_column, "has no column 'colour'"),
    (_bad_time, "not an ISO 8601 time"),
    (_memory_after_rows, "a memory record after row records"),
    (_wrong_counts, "the end record counts"),
    (_after_end, "content after the end record"),
]


@pytest.mark.parametrize(("mutate", "message"), BAD_FILES, ids=[f.__name__ for f, _ in BAD_FILES])
def test_a_bad_file_imports_nothing(
    source: Source,
    tmp_path: Path,
    embedder: FastEmbedEmbedder,
    mutate: Callable[[list[dict[str, Any]]], int | None],
    message: str,
) -> None:
    records = _records(source.lines)
    index = mutate(records)
    path = _write(tmp_path, records)
    with _open(tmp_path / "b", embedder) as b:
        with pytest.raises(InvalidInput) as error:
            b.import_jsonl(path)
        assert message in error.value.detail
        if index is not None:
            assert error.value.detail.startswith(f"line {index + 1}: ")
        assert error.value.detail.endswith("nothing was imported")
        assert b.store.count() == 0
        assert set(_sql_counts(b).values()) == {0}


def test_a_file_cut_mid_line_imports_nothing(
    source: Source, tmp_path: Path, embedder: FastEmbedEmbedder
) -> None:
    data = "".join(source.lines).encode()
    cut = len("".join(source.lines[:4]).encode()) + 40  # 40 bytes into line 5
    with _open(tmp_path / "b", embedder) as b:
        with pytest.raises(InvalidInput, match=r"^line 5: not JSON"):
            b.import_jsonl(data[:cut])
        with pytest.raises(InvalidInput, match="empty"):
            b.import_jsonl(b"")
        with pytest.raises(InvalidInput, match="cannot read"):
            b.import_jsonl(tmp_path / "missing.jsonl")
        assert b.store.count() == 0


def test_content_over_the_limit_imports_nothing(
    source: Source, tmp_path: Path, embedder: FastEmbedEmbedder
) -> None:
    longest = max(len(content) for content, _ in FACTS)
    with _open(tmp_path / "b", embedder, max_content_chars=longest - 1) as b:
        with pytest.raises(TooLarge, match=r"^line \d+: a memory has \d+ characters"):
            b.import_jsonl(source.path)
        assert b.store.count() == 0


def test_rows_of_missing_memories_are_left_out(
    source: Source, tmp_path: Path, embedder: FastEmbedEmbedder
) -> None:
    gone = source.ids[FACTS[0][0]]  # related, anchored by feedback, in the cache
    records = [r for r in _records(source.lines) if r.get("memory", {}).get("memory_id") != gone]
    records[-1]["counts"]["memory"] -= 1
    with _open(tmp_path / "b", embedder) as b:
        result = b.import_jsonl(_write(tmp_path, records))
        assert result.relations.orphaned == 1
        assert result.rows["fact_anchors"].orphaned >= 1
        assert result.rows["query_cache"].orphaned >= 1
        exported = _records(b.export_jsonl())
        assert gone not in json.dumps([r for r in exported if r["type"] != "row"])
        for record in exported:
            if record["type"] == "row" and record["table"] != "retrieval_events":
                assert gone not in json.dumps(record)


# -- owner scope ---------------------------------------------------------------------


@pytest.mark.parametrize("owner", ["alice", "bob", "shared"])
def test_owner_export_holds_what_the_owner_sees(
    source: Source, tmp_path: Path, embedder: FastEmbedEmbedder, owner: str
) -> None:
    records = _records(source.service.export_jsonl(owner=owner))
    assert records[0]["owner"] == owner
    memories = {
        r["memory"]["memory_id"]: r["memory"]["owner"]
        for r in records[1:-1]
        if r["type"] == "memory"
    }
    expected = {
        i for c, i in source.ids.items() if dict(FACTS).get(c, "alice") in (owner, "shared")
    }
    assert set(memories) == expected
    relations = [r["relation"] for r in records if r["type"] == "relation"]
    assert all({r["source_id"], r["target_id"]} <= set(memories) for r in relations)
    tables = {t.name: t for t in transfer_tables()}
    for record in records:
        if record["type"] == "row":
            refs = table_refs(tables[record["table"]])
            if refs.owner:
                assert record["row"][refs.owner] in (owner, "shared")
            assert refs.memory_ids(record["row"]) <= set(memories)
    everything = _records(source.lines)
    assert len(records) < len(everything)

    path = _write(tmp_path, records)
    with _open(tmp_path / "b", embedder) as b:
        b.import_jsonl(path)
        assert b.store.count() == len(expected)
        assert (
            _without_time(b.export_jsonl(owner=owner))[1:]
            == _without_time([json.dumps(r) for r in records])[1:]
        )


def test_owner_export_of_alice_keeps_her_learned_data(source: Source) -> None:
    records = _records(source.service.export_jsonl(owner="alice"))
    tables = {r["table"] for r in records if r["type"] == "row"}
    assert {"query_cache", "retrieval_events", "fact_anchors", "query_fact_weights"} <= tables
    assert not any(r.get("table") == "owner_variants" for r in records)  # bob's pin stays


def test_bad_owner_is_refused_before_streaming(source: Source) -> None:
    with pytest.raises(InvalidInput, match="owner"):
        source.service.export_jsonl(owner="  ")


def test_secret_tables_are_excluded() -> None:
    assert "api_keys" in EXCLUDED_TABLES
    assert not {t.name for t in transfer_tables()} & EXCLUDED_TABLES


# -- CLI ---------------------------------------------------------------------------------


@pytest.mark.sqlite_only(reason="instance A (module-scoped) outlives the per-test database")
def test_cli_export_and_import(source: Source, tmp_path: Path) -> None:
    runner = CliRunner()
    a_dir = str(source.service.settings.data_dir)
    out = tmp_path / "out.jsonl"
    exported = runner.invoke(cli.app, ["export", str(out), "--data-dir", a_dir])
    assert exported.exit_code == 0, exported.output
    summary = json.loads(exported.stdout)
    assert summary == {"file": str(out), **_records(source.lines)[-1]["counts"]}
    assert not list(tmp_path.glob("*.partial"))

    piped = runner.invoke(cli.app, ["export", "-", "--owner", "bob", "--data-dir", a_dir])
    assert piped.exit_code == 0, piped.output
    assert _without_time(piped.stdout.splitlines(keepends=True)) == _without_time(
        list(source.service.export_jsonl(owner="bob"))
    )

    b_dir = str(tmp_path / "b")
    imported = runner.invoke(cli.app, ["import", str(out), "--data-dir", b_dir])
    assert imported.exit_code == 0, imported.output
    counts = json.loads(imported.stdout)
    assert counts["memories"]["created"] == MEMORY_COUNT
    assert counts["relations"]["created"] == RELATION_COUNT and counts["reembedded"] == 0

    again = runner.invoke(cli.app, ["import", "-", "--data-dir", b_dir], input=out.read_text())
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["memories"] == {
        "created": 0,
        "skipped": MEMORY_COUNT,
        "orphaned": 0,
    }

    cut = "".join(source.lines[:-1])  # no end record
    truncated = runner.invoke(cli.app, ["import", "-", "--data-dir", b_dir], input=cut)
    assert truncated.exit_code == 1
    assert truncated.stdout == ""
    assert truncated.stderr.startswith("error: ") and "without its end record" in truncated.stderr
    assert "Traceback" not in truncated.output


# -- HTTP ----------------------------------------------------------------------------------


def test_http_export_and_import(
    source: Source, tmp_path: Path, embedder: FastEmbedEmbedder
) -> None:
    a_settings = source.service.settings
    with TestClient(base_url=LOCAL_URL, app=create_app(a_settings, embedder=embedder)) as a_client:
        response = a_client.get("/v1/export")
        assert response.status_code == 200
        assert response.headers["content-type"].startswith(MEDIA_TYPE)
        body = response.content
        assert _without_time(response.text.splitlines(keepends=True)) == _without_time(source.lines)
        alice = a_client.get("/v1/export", params={"owner": "alice"}).text.splitlines()
        assert _without_time(alice) == _without_time(
            list(source.service.export_jsonl(owner="alice"))
        )
        bad_owner = a_client.get("/v1/export", params={"owner": " "})
        assert bad_owner.status_code == 400 and bad_owner.json()["error"] == "invalid_input"

    b_settings = Settings(data_dir=tmp_path / "b", max_request_bytes=len(body) + 10)
    with TestClient(base_url=LOCAL_URL, app=create_app(b_settings, embedder=embedder)) as b_client:
        headers = {"content-type": MEDIA_TYPE}
        truncated = b_client.post(
            "/v1/import", content=body[: body.rindex(b'{"type":"end"')], headers=headers
        )
        assert truncated.status_code == 400
        assert truncated.json()["error"] == "invalid_input"
        assert "without its end record" in truncated.json()["detail"]
        assert b_client.get("/v1/stats").json()["memories"] == 0

        imported = b_client.post("/v1/import", content=body, headers=headers)
        assert imported.status_code == 200, imported.text
        counts = imported.json()
        assert counts["memories"] == {"created": MEMORY_COUNT, "skipped": 0, "orphaned": 0}
        assert counts["rows"]["query_cache"]["created"] >= 1
        again = b_client.post("/v1/import", content=body, headers=headers).json()
        assert again["memories"]["created"] == 0
        assert _without_time(b_client.get("/v1/export").text.splitlines()) == _without_time(
            source.lines
        )
        too_big = b_client.post("/v1/import", content=body + b" " * 20, headers=headers)
        assert too_big.status_code == 413 and too_big.json()["error"] == "too_large"
        spec = b_client.get("/schema/openapi.json").json()
        assert MEDIA_TYPE in spec["paths"]["/v1/import"]["post"]["requestBody"]["content"]

"""Graph and knowledge-management commands, in-process with typer's CliRunner over real stores.

The graph: ``C -about-> A -depends_on-> B -stored_in-> D`` (all of owner ann), plus
one memory of bob. Each command that opens the service loads the model, so the
tests share one data dir per test and keep invocations few.
"""

from __future__ import annotations

import json
from pathlib import Path

from test_cli import assert_clean_error, invoke, json_lines

from tribal_memory.base.config import Settings
from tribal_memory.base.models import MemoryInput
from tribal_memory.embeddings.fastembed import FastEmbedEmbedder
from tribal_memory.service.memory_service import MemoryService

TEXTS = (
    "The billing service runs on PostgreSQL",
    "PostgreSQL backups run nightly at 02:00 UTC",
    "The billing team meets on Tuesdays",
    "Backups are stored in the eu-west bucket",
)


def _seed(data_dir: Path, embedder: FastEmbedEmbedder) -> list[str]:
    with MemoryService(Settings(data_dir=data_dir), embedder=embedder) as service:
        items = [MemoryInput(text, owner="ann") for text in TEXTS]
        items.append(MemoryInput("Bob keeps the spare keys", owner="bob"))
        return [r.memory.memory_id for r in service.capture_batch(items)]


def test_graph_commands(tmp_path: Path, embedder: FastEmbedEmbedder) -> None:
    dd = ("--data-dir", str(tmp_path / "data"))
    a, b, c, d, bobs = _seed(tmp_path / "data", embedder)
    lines = "\n".join(
        json.dumps({"source_id": s, "target_id": t, "type": type_})
        for s, t, type_ in ((c, a, "about"), (a, b, "depends_on"), (b, d, "stored_in"))
    )
    stored = json_lines(invoke("relate-batch", "-", *dd, input=lines))
    assert [(e["source_id"], e["type"]) for e in stored] == [
        (c, "about"),
        (a, "depends_on"),
        (b, "stored_in"),
    ]
    bad = json.dumps([{"source_id": a, "target_id": b, "type": "x"}, {"source_id": a}])
    assert_clean_error(invoke("relate-batch", "-", *dd, input=bad), 1, "relations[1]")
    foreign = json.dumps([{"source_id": a, "target_id": bobs, "type": "x"}])
    assert_clean_error(
        invoke("relate-batch", "-", "--owner", "ann", *dd, input=foreign), 1, "relations[0]"
    )

    (common,) = json_lines(invoke("intersection", a, d, *dd))
    assert common["memory_id"] == b and common["steps"] == [1, 1]
    assert json_lines(invoke("intersection", a, d, "--steps", "3", "--block", "chunk", *dd))
    assert json_lines(invoke("intersection", a, d, "--block", "stored_in", *dd)) == []
    assert_clean_error(invoke("intersection", a, *dd), 1, "2 to 16")

    walked = json_lines(invoke("neighbors", a, "--steps", "3", "--type", "about", *dd))
    assert [n["memory_id"] for n in walked] == [c]

    hits = json_lines(invoke("search", "where are backups stored", "--near", a, *dd))
    assert {h["memory_id"] for h in hits} <= {a, b, c} and hits[0]["memory_id"] == b
    assert_clean_error(invoke("search", "backups", "--steps", "2", *dd), 1, "--near")
    assert_clean_error(invoke("recall", "backups", "--near", bobs, "--owner", "ann", *dd), 1, bobs)


def test_knowledge_commands(tmp_path: Path, embedder: FastEmbedEmbedder) -> None:
    dd = ("--data-dir", str(tmp_path / "data"))
    ids = _seed(tmp_path / "data", embedder)

    *listed, end = json_lines(
        invoke("memories", "--owner", "ann", "--no-shared", "--limit", "3", *dd)
    )
    assert len(listed) == 3 and end["next_after"] == listed[-1]["memory_id"]
    *every, end = json_lines(invoke("memories", "--limit", "2", "--all", *dd))
    assert [m["memory_id"] for m in every] == sorted(ids) and end == {"next_after": None}

    vector = json.dumps(embedder.embed(TEXTS[3]).tolist())
    hits = json_lines(invoke("search-vector", "-", "-k", "2", *dd, input=vector))
    assert hits[0]["memory_id"] == ids[3] and hits[0]["score"] > 0.99
    assert_clean_error(invoke("search-vector", "[0.5, 0.5]", *dd), 1, "384")
    assert_clean_error(invoke("search-vector", "not json", *dd), 1, "JSON array")

    assert_clean_error(invoke("clear-owner", "ann", *dd), 1, "confirm")
    (cleared,) = json_lines(invoke("clear-owner", "ann", "--confirm", "ann", *dd))
    assert cleared == {"owner": "ann", "memories": 4, "documents": 0, "learned_rows": 0}
    *left, _ = json_lines(invoke("memories", *dd))
    assert [m["memory_id"] for m in left] == [ids[4]]

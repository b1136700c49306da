"""The command line, run in-process with typer's CliRunner over real stores in tmp dirs.

Each command that opens the service loads the embedding model (the session
fixture cannot be passed through the CLI), so these tests keep the number of
such invocations small.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from tribal_memory.documents import doc_id_for
from tribal_memory.interfaces import cli

# A tiny LoCoMo-format conversation written for these tests (not from the dataset).
TINY_LOCOMO: list[dict[str, Any]] = [
    {
        "sample_id": "conv-test",
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Ben",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a beagle named Pixel."},
                {"speaker": "Ben", "dia_id": "D1:2", "text": "I am training for a marathon."},
            ],
            "session_2_date_time": "10:00 am on 20 June, 2023",
            "session_2": [
                {"speaker": "Ann", "dia_id": "D2:1", "text": "Pixel learned to fetch."},
                {
                    "speaker": "Ben",
                    "dia_id": "D2:2",
                    "text": "I ran the Lisbon marathon in four hours.",
                    "blip_caption": "a runner at a finish line",
                },
            ],
        },
        "qa": [
            {
                "question": "What is Ann's dog called?",
                "answer": "Pixel",
                "evidence": ["D1:1"],
                "category": 1,
            }
        ],
    }
]


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


def invoke(*args: str, input: str | None = None, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(cli.app, list(args), input=input, env=env)


def json_lines(result: Result) -> list[dict[str, Any]]:
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.stdout.splitlines() if line.strip()]


def assert_clean_error(result: Result, code: int, message: str) -> None:
    """One ``error: ...`` line on stderr, nothing on stdout, no traceback."""
    assert result.exit_code == code, result.output
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("error: ")
    assert message in result.stderr
    assert "Traceback" not in result.output


def test_capture_then_search_and_recall(data_dir: Path) -> None:
    dd = ("--data-dir", str(data_dir))
    fact = "Alice's favourite colour is teal"

    (created,) = json_lines(invoke("capture", fact, "--owner", "alice", "-t", "colour", *dd))
    (again,) = json_lines(invoke("--json", *dd, "capture", "-", "--owner", "alice", input=fact))
    json_lines(invoke("capture", "Bob drinks green tea every morning", "-o", "bob", *dd))

    assert created["status"] == "created"
    assert created["tags"] == ["colour"]
    assert again["status"] == "exists"
    assert again["memory_id"] == created["memory_id"]

    hits = json_lines(invoke("search", "which colour does Alice like", "-k", "2", *dd))
    assert hits[0]["memory_id"] == created["memory_id"]
    assert hits[0]["rank"] == 1
    assert 0.0 <= hits[0]["score"] <= 1.0
    assert {"vector_score", "text_score", "mode", "fallback"} <= hits[0].keys()

    wide = {"COLUMNS": "200"}
    table = invoke("recall", "teal colour", "--owner", "alice", "--no-json", *dd, env=wide)
    assert table.exit_code == 0, table.output
    assert "Alice's favourite colour is teal" in table.stdout
    assert created["memory_id"] in table.stdout
    assert "Bob drinks" not in table.stdout  # another owner's memory


def test_ingest_documents_then_search_finds_the_chunk(tmp_path: Path, data_dir: Path) -> None:
    docs = tmp_path / "docs"
    (docs / "ops").mkdir(parents=True)
    (docs / "ops" / "deploy.md").write_text(
        "# Deploy\n\nIntro line.\n\n## Rollback\n\n"
        "To roll back a release run the rewind script with the release tag.\n"
        "It restores the previous container image within two minutes.\n",
        encoding="utf-8",
    )
    (docs / "faq.txt").write_text("The office coffee machine is on floor three.\n")
    (docs / "script.py").write_text("print('skipped')\n")

    *files, summary = json_lines(
        invoke("ingest", str(docs), "--owner", "ops", "--root", str(tmp_path), "--json",
               "--data-dir", str(data_dir))
    )  # fmt: skip

    assert [(f["path"], f["owner"], f["status"]) for f in files] == [
        ("docs/faq.txt", "ops", "created"),
        ("docs/ops/deploy.md", "ops", "created"),
    ]
    assert summary["files"] == summary["created"] == 2
    assert summary["skipped"] == 1
    assert summary["chunks_added"] == sum(f["chunks"] for f in files) == 3
    assert summary["failed"] == summary["unchanged"] == 0
    assert summary["seconds"] > 0

    hits = json_lines(
        invoke("search", "how do I roll back a release", "--kind", "chunk", "--owner", "ops",
               "-k", "1", "--data-dir", str(data_dir))
    )  # fmt: skip
    (hit,) = hits
    assert hit["source"] == "docs/ops/deploy.md"
    assert hit["doc_id"] == doc_id_for("docs/ops/deploy.md")
    assert hit["kind"] == "chunk"
    assert hit["metadata"]["heading"] == "Deploy > Rollback"
    assert (hit["metadata"]["start_line"], hit["metadata"]["end_line"]) == (5, 8)
    assert hit["content"].startswith("## Rollback")


def test_ingest_locomo_then_stats(tmp_path: Path, data_dir: Path) -> None:
    path = tmp_path / "tiny-locomo.json"
    path.write_text(json.dumps(TINY_LOCOMO), encoding="utf-8")

    (summary,) = json_lines(
        invoke("ingest", str(path), "--format", "locomo", "--data-dir", str(data_dir))
    )
    (stats,) = json_lines(invoke("--data-dir", str(data_dir), "stats"))

    assert summary["files"] == 1
    assert summary["turns"] == summary["turns_created"] == 4
    assert stats["memories"] == 4
    assert stats["owners"] == {"conv-test": 4}
    assert stats["kinds"] == {"fact": 4}
    assert stats["embedding_dim"] == 384


@pytest.mark.sqlite_only(reason="checks that the SQLite file is created")
def test_migrate_does_not_need_the_model(data_dir: Path) -> None:
    env = {"TRIBAL_EMBEDDING_MODEL": "/no/such/model"}

    (report,) = json_lines(invoke("migrate", "--data-dir", str(data_dir), env=env))
    table = invoke("migrate", "--data-dir", str(data_dir), "--no-json", env=env)

    assert report["revision"] and report["revision"] == report["head"]
    assert (data_dir / "tribal.sqlite3").is_file()
    assert table.exit_code == 0
    assert f"at revision {report['revision']}" in table.stdout


def test_empty_capture_is_a_clean_error(data_dir: Path) -> None:
    result = invoke("capture", "   ", "--data-dir", str(data_dir))
    assert_clean_error(result, 1, "content must not be empty")


def test_unknown_id_is_a_clean_error(data_dir: Path) -> None:
    result = invoke("get", "no-such-id", "--data-dir", str(data_dir))
    assert_clean_error(result, 1, "no memory with id no-such-id")


def test_missing_ingest_path_is_a_clean_error(tmp_path: Path, data_dir: Path) -> None:
    result = invoke("ingest", str(tmp_path / "nowhere"), "--data-dir", str(data_dir))
    assert_clean_error(result, 1, "no such file or directory")
    assert not data_dir.exists()  # failed before opening the store


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("search", "q", "--since", "last week"), "not an ISO 8601 time"),
        (("search", "q", "--mode", "fuzzy"), "--mode"),
        (("search",), "Missing argument"),
        (("frobnicate",), "No such command"),
    ],
)
def test_usage_errors_exit_2_on_one_line(args: tuple[str, ...], message: str) -> None:
    assert_clean_error(invoke(*args), 2, message)


def test_invalid_setting_is_a_clean_error(data_dir: Path) -> None:
    result = invoke("migrate", "--data-dir", str(data_dir), env={"TRIBAL_PORT": "eighty"})
    assert_clean_error(result, 1, "invalid setting TRIBAL_PORT")


def test_unexpected_errors_are_one_line_unless_debugging(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(self: cli._Run, **overrides: object) -> None:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(cli._Run, "settings", broken)

    result = invoke("migrate", "--data-dir", str(data_dir))
    assert_clean_error(result, 1, "RuntimeError: disk on fire (set TRIBAL_DEBUG=1")

    debug = invoke("--debug", "migrate", "--data-dir", str(data_dir))
    assert isinstance(debug.exception, RuntimeError)


def test_relate_neighbors_delete(data_dir: Path) -> None:
    dd = ("--data-dir", str(data_dir))
    (first,) = json_lines(invoke("capture", "The API gateway runs on port 8443", *dd))
    (second,) = json_lines(invoke("capture", "Port 8443 is opened in the firewall", *dd))
    a, b = first["memory_id"], second["memory_id"]

    (edge,) = json_lines(invoke("relate", a, b, "depends_on", "--weight", "0.5", *dd))
    (neighbor,) = json_lines(invoke("neighbors", b, *dd))
    (deleted,) = json_lines(invoke("delete", a, *dd))
    after = invoke("neighbors", b, *dd)

    assert (
        edge.items()
        >= {"source_id": a, "target_id": b, "type": "depends_on", "weight": 0.5}.items()
    )
    assert neighbor["memory_id"] == a
    assert neighbor["steps"] == 1
    assert neighbor["via"]["type"] == "depends_on"
    assert deleted == {"deleted": a}
    assert after.exit_code == 0 and after.stdout == ""  # the edge went with the memory

"""The learned-layer commands, run in-process with typer's CliRunner over real stores.

Each invocation opens the service (the model loads once per process and is
then cheap), so the tests walk one data dir through several commands.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from tribal_memory.interfaces import cli

WIDE = {"COLUMNS": "200"}
QUESTION = "when can I ship to prod?"


@pytest.fixture
def dd(tmp_path: Path) -> tuple[str, str]:
    return ("--data-dir", str(tmp_path / "data"))


def invoke(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(cli.app, list(args), env=env)


def json_lines(result: Result) -> list[dict[str, Any]]:
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.stdout.splitlines() if line.strip()]


def assert_clean_error(result: Result, code: int, message: str) -> None:
    assert result.exit_code == code, result.output
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("error: ")
    assert message in result.stderr


def capture(dd: tuple[str, str], text: str) -> str:
    (created,) = json_lines(invoke("capture", text, "--owner", "agent-a", "--json", *dd))
    memory_id: str = created["memory_id"]
    return memory_id


def test_feedback_and_retrieval_stats(dd: tuple[str, str]) -> None:
    deploy = capture(dd, "Deploys to production happen on Tuesdays and Thursdays after 10am")
    capture(dd, "The on-call rotation changes every Monday at 9am")
    capture(dd, "API rate limits are 100 requests per minute per token")

    hits = json_lines(
        invoke("search", QUESTION, "-o", "agent-a", "-k", "2", "--feedback", "--json", *dd)
    )
    retrieval_id = hits[0]["retrieval_id"]
    assert retrieval_id and {hit["retrieval_id"] for hit in hits} == {retrieval_id}
    assert hits[0]["memory_id"] == deploy
    assert hits[0]["variant"] == "learned"
    assert {"cached", "expanded_from", "boost", "anchor_match"} <= hits[0].keys()

    (outcome,) = json_lines(invoke("feedback", retrieval_id, deploy, "--json", *dd))
    (again,) = json_lines(invoke("feedback", retrieval_id, deploy, "--json", *dd))
    conflict = invoke("feedback", retrieval_id, "--json", *dd)  # now: nothing used
    unknown = invoke("feedback", "no-such-retrieval", *dd)

    assert outcome["used"] == [deploy]
    assert outcome["unused"] == [hits[1]["memory_id"]]
    assert outcome["duplicate"] is False
    assert again["duplicate"] is True
    assert_clean_error(conflict, 1, "already has feedback")
    assert_clean_error(unknown, 1, "no retrieval with id no-such-retrieval")

    (stats,) = json_lines(invoke("stats", "--retrieval", "--owner", "agent-a", "--json", *dd))
    assert stats["overall"]["retrievals"] == 1
    assert stats["overall"]["with_feedback"] == 1
    assert stats["overall"]["usage_rate"] == 1.0
    assert stats["learning_curve"][0]["retrievals"] == 1
    assert set(stats["learning_curve"][0]) >= {"period", "usage_rate", "cache_hit_rate"}
    (weekly,) = json_lines(invoke("stats", "--retrieval", "--bucket", "week", *dd))
    assert weekly["overall"]["retrievals"] == 1

    table = invoke("stats", "--retrieval", "--no-json", *dd, env=WIDE)
    assert table.exit_code == 0, table.output
    assert "overall" in table.stdout and "learned" in table.stdout
    assert_clean_error(invoke("stats", "--owner", "agent-a", *dd), 2, "only with --retrieval")


def test_recall_feedback_on_a_terminal_prints_the_retrieval_id(dd: tuple[str, str]) -> None:
    capture(dd, "Deploys to production happen on Tuesdays and Thursdays after 10am")

    table = invoke("recall", QUESTION, "-o", "agent-a", "--feedback", "--no-json", *dd, env=WIDE)
    plain = invoke("recall", QUESTION, "-o", "agent-a", "--learned", "none", "--no-json", *dd)

    assert table.exit_code == 0, table.output
    assert "retrieval id " in table.stdout
    assert "Deploys to production" in table.stdout
    assert plain.exit_code == 0, plain.output
    assert "baseline" in plain.stdout
    assert "retrieval id" not in plain.stdout


def test_learned_parts_option(dd: tuple[str, str]) -> None:
    capture(dd, "Deploys to production happen on Tuesdays and Thursdays after 10am")

    (plain,) = json_lines(invoke("search", QUESTION, "--learned", "none", "--json", *dd))
    (some,) = json_lines(invoke("recall", QUESTION, "--learned", "cache, anchors", *dd))

    assert plain["variant"] == "baseline"
    assert plain["retrieval_id"] is None
    assert some["variant"] == "learned"
    assert_clean_error(invoke("search", "q", "--learned", "magic", *dd), 2, "magic")
    assert_clean_error(invoke("recall", "q", "--learned", ",", *dd), 2, "--learned")


def test_anchors_commands(dd: tuple[str, str]) -> None:
    memory_id = capture(dd, "API rate limits are 100 requests per minute per token")

    (added,) = json_lines(invoke("anchors", "add", memory_id, "how fast may I call it?", *dd))
    listed = json_lines(invoke("anchors", "list", memory_id, "--owner", "agent-a", *dd))
    table = invoke("anchors", "list", memory_id, "--no-json", *dd, env=WIDE)
    (removed,) = json_lines(invoke("anchors", "remove", memory_id, "how fast may I call it?", *dd))
    after = invoke("anchors", "list", memory_id, "--no-json", *dd)

    assert added["memory_id"] == memory_id
    assert (added["source"], added["active"], added["confidence"]) == ("manual", True, 1.0)
    assert listed == [added]
    assert "how fast may I call it?" in table.stdout and "manual" in table.stdout
    assert removed == {"removed": "how fast may I call it?", "memory_id": memory_id}
    assert after.exit_code == 0 and after.stdout.strip() == "no anchors"

    assert_clean_error(invoke("anchors", "add", memory_id, "  ", *dd), 1, "anchor text")
    assert_clean_error(invoke("anchors", "list", "no-such-id", *dd), 1, "no memory with id")
    assert_clean_error(invoke("anchors", "remove", memory_id, "gone", *dd), 1, "has no anchor")
    assert_clean_error(invoke("anchors", "add", memory_id, *dd), 2, "Missing argument")


def test_variant_command(dd: tuple[str, str]) -> None:
    (shown,) = json_lines(invoke("variant", "agent-a", "--json", *dd))
    (pinned,) = json_lines(invoke("variant", "agent-a", "baseline", "--json", *dd))
    (still,) = json_lines(invoke("variant", "agent-a", *dd))
    text = invoke("variant", "agent-a", "--no-json", *dd)
    (unpinned,) = json_lines(invoke("variant", "agent-a", "none", *dd))

    assert shown == {"owner": "agent-a", "variant": "learned"}
    assert pinned == {"owner": "agent-a", "variant": "baseline"}
    assert still == pinned
    assert text.exit_code == 0 and text.stdout.strip() == "agent-a: baseline"
    assert unpinned == {"owner": "agent-a", "variant": "learned"}
    assert_clean_error(invoke("variant", "agent-a", "fancy", *dd), 2, "fancy")

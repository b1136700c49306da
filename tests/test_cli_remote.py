"""The command line with ``--url``: the same commands acting on a running server over HTTP.

One real ``tribal-memory serve`` (127.0.0.1, temp data dir, authentication
on) serves the module; commands run in-process with typer's CliRunner and
reach it through :class:`~tribal_memory.client.TribalMemoryClient`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from tribal_memory.auth.keys import open_api_keys
from tribal_memory.base.config import Settings
from tribal_memory.bench.server_process import ServerProcess, ServerStartError, tribal_server
from tribal_memory.interfaces import cli

pytestmark = pytest.mark.slow  # starts a real server process


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, str]]:
    """A server with authentication required, and an admin key for it."""
    root = tmp_path_factory.mktemp("cli-remote")
    with open_api_keys(Settings(data_dir=root / "data")) as keys:
        _, key = keys.create("ops", admin=True)
    process = tribal_server(
        root / "server.log", data_dir=root / "data", env={"TRIBAL_AUTH": "required"}
    )
    try:
        process.start()
    except ServerStartError as exc:
        pytest.fail(f"{exc.detail}:\n{process.log_text()}")
    try:
        yield process, key
    finally:
        process.stop()


def invoke(*args: str, env: dict[str, str] | None = None, input: str | None = None) -> Result:
    return CliRunner().invoke(cli.app, list(args), env=env, input=input)


def lines(result: Result) -> list[dict[str, Any]]:
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.stdout.splitlines() if line.strip()]


def test_capture_search_feedback_and_stats_over_http(
    server: tuple[ServerProcess, str], tmp_path: Path
) -> None:
    process, key = server
    env = {"TRIBAL_API_KEY": key}
    url = process.base_url
    created = lines(
        invoke(
            "capture", "The staging DB is pg-stage-2", "-o", "ann", "--url", url, "--json", env=env
        )
    )
    assert created[0]["status"] == "created"
    memory_id = created[0]["memory_id"]
    invoke("capture", "Ann likes oat milk", "-o", "ann", "--url", url, env=env)
    # TRIBAL_URL alone, and the option before the command, work too.
    found = lines(
        invoke(
            "search",
            "staging database host",
            "-o",
            "ann",
            "--feedback",
            "--json",
            env={**env, "TRIBAL_URL": url},
        )
    )
    assert found[0]["memory_id"] == memory_id
    retrieval_id = found[0]["retrieval_id"]
    used = lines(invoke("--url", url, "feedback", retrieval_id, memory_id, "--json", env=env))
    assert used[0]["used"] == [memory_id]
    recalled = lines(invoke("recall", "oat milk", "-o", "ann", "--url", url, "--json", env=env))
    assert "oat milk" in recalled[0]["content"]
    stats = lines(invoke("stats", "--url", url, "--json", env=env))
    assert stats[0]["owners"]["ann"] == 2
    retrieval = lines(invoke("stats", "--retrieval", "-o", "ann", "--url", url, "--json", env=env))
    assert retrieval[0]["overall"]["with_feedback"] == 1

    export = tmp_path / "ann.jsonl"
    exported = lines(invoke("export", str(export), "-o", "ann", "--url", url, "--json", env=env))
    assert exported[0]["memory"] == 2 and export.read_text().count("\n") >= 4
    imported = lines(invoke("import", str(export), "--url", url, "--json", env=env))
    assert imported[0]["memories"]["skipped"] >= 2 and imported[0]["memories"]["created"] == 0


def test_server_errors_and_local_only_commands_are_clean_messages(
    server: tuple[ServerProcess, str], tmp_path: Path
) -> None:
    process, key = server
    url = process.base_url
    missing = invoke("get", "0" * 8, "--url", url, env={"TRIBAL_API_KEY": key})
    assert missing.exit_code == 1 and "no memory" in missing.stderr
    assert "Traceback" not in missing.output
    no_key = invoke("stats", "--url", url, env={"TRIBAL_API_KEY": ""})
    assert no_key.exit_code == 1 and "API key" in no_key.stderr
    local = invoke("--url", url, "check", env={"TRIBAL_API_KEY": key})
    assert local.exit_code == 1 and "works on a data dir" in local.stderr
    watch = invoke("ingest", "--watch", str(tmp_path), "--url", url, env={"TRIBAL_API_KEY": key})
    assert watch.exit_code == 1 and "without --url" in watch.stderr
    both = invoke("stats", "--url", url, "--data-dir", str(tmp_path), env={"TRIBAL_API_KEY": key})
    assert both.exit_code == 1 and "not both" in both.stderr


def test_ingest_over_http(server: tuple[ServerProcess, str], tmp_path: Path) -> None:
    process, key = server
    env = {"TRIBAL_API_KEY": key, "TRIBAL_URL": process.base_url}
    notes = tmp_path / "kb" / "bea"
    notes.mkdir(parents=True)
    (notes / "oncall.md").write_text("# On call\n\nThe pager rotates every Tuesday at noon.\n")
    (notes / "broken.md").write_bytes(b"\xff\xfe not utf-8")
    result = invoke("ingest", str(tmp_path / "kb"), "--json", env=env)
    assert result.exit_code == 1, result.output  # one file failed, the other went in
    outcomes = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
    by_path = {o["path"]: o for o in outcomes if "path" in o}
    assert by_path["bea/oncall.md"]["status"] == "created"
    assert by_path["bea/oncall.md"]["owner"] == "bea"
    assert by_path["bea/broken.md"]["status"] == "failed"
    assert "UTF-8" in result.stderr
    assert outcomes[-1]["created"] == 1 and outcomes[-1]["failed"] == 1
    listed = lines(invoke("documents", "-o", "bea", "--json", env=env))
    assert [d["path"] for d in listed if d["owner"] == "bea"] == ["bea/oncall.md"]
    again = invoke(
        "ingest",
        str(notes / "oncall.md"),
        "-o",
        "bea",
        "--root",
        str(tmp_path / "kb"),
        "--json",
        env=env,
    )
    assert json.loads(again.stdout.splitlines()[0])["status"] == "unchanged", again.output


def test_version() -> None:
    from tribal_memory import __version__

    result = invoke("--version")
    assert result.exit_code == 0 and result.stdout.strip() == f"tribal-memory {__version__}"

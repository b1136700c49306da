"""``tribal-memory openclaw setup``: its checks and what it would write.

The full run (ingest, install, the gateway using the result) is in
``test_openclaw_e2e.py``; here the parts a user meets when something is
missing, against the real OpenClaw CLI when it is installed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_openclaw_e2e import _find_openclaw
from typer.testing import CliRunner

from tribal_memory.interfaces import cli
from tribal_memory.interfaces.openclaw_setup import (
    _agent_workspace,
    config_patch,
    memory_files,
    node_supported,
)


def test_node_versions_openclaw_runs_on() -> None:
    assert node_supported("v24.16.0") and node_supported("v24.21.0") and node_supported("26.1.0")
    assert node_supported("v27.0.1")
    for old in ("v20.11.1", "v22.12.0", "v24.15.9", "v25.2.0", "v26.0.0", "not a version"):
        assert not node_supported(old), old


def test_the_agents_workspace_comes_from_openclaws_config(tmp_path: Path) -> None:
    agents = {
        "defaults": {"workspace": "/w/default"},
        "entries": {"main": {"workspace": "/w/main"}, "ops": {}},
        "list": [{"id": "bot", "default": True, "workspace": "/w/bot"}],
    }
    assert _agent_workspace(agents, "main") == ("main", Path("/w/main"))
    assert _agent_workspace(agents, "ops") == ("ops", Path("/w/default"))
    assert _agent_workspace(agents, None) == ("bot", Path("/w/bot"))  # the default agent
    assert _agent_workspace({}, None) == ("main", None)


def test_only_the_files_memory_core_indexes(tmp_path: Path) -> None:
    for name in ("AGENTS.md", "SOUL.md", "MEMORY.md", "USER.md", "memory/b.md", "memory/a/x.md",
                 "memory/notes.txt", "other/y.md"):  # fmt: skip
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("# x\n", encoding="utf-8")
    found = [p.relative_to(tmp_path).as_posix() for p in memory_files(tmp_path)]
    assert found == ["MEMORY.md", "USER.md", "memory/a/x.md", "memory/b.md"]
    assert memory_files(tmp_path / "missing") == []


def test_the_config_patch_takes_the_slot_and_allows_the_hooks() -> None:
    patch = config_patch("http://127.0.0.1:18960", None)
    entry = patch["plugins"]["entries"]["tribal-memory"]
    assert patch["plugins"]["slots"] == {"memory": "tribal-memory"}
    assert entry["enabled"] is True and entry["hooks"] == {"allowConversationAccess": True}
    assert entry["config"] == {"baseUrl": "http://127.0.0.1:18960"}
    assert config_patch("http://h:1", "tm_x")["plugins"]["entries"]["tribal-memory"]["config"] == {
        "baseUrl": "http://h:1",
        "apiKey": "tm_x",
    }


def test_a_missing_openclaw_is_a_clear_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli.app,
        ["openclaw", "setup", "--openclaw", str(tmp_path / "no-openclaw"),
         "--node", sys.executable.replace("python", "no-node"), "--data-dir", str(tmp_path)],
    )  # fmt: skip
    assert result.exit_code == 1
    assert "error:" in result.output and "Node" in result.output
    assert "Traceback" not in result.output


def test_openclaw_not_onboarded_says_what_to_run(tmp_path: Path) -> None:
    found = _find_openclaw()
    if found is None:
        pytest.skip("OpenClaw is not installed; run .ci/install-openclaw (needs npm)")
    node, script = found
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENCLAW_")}
    env.update(HOME=str(tmp_path), PATH=f"{node.parent}{os.pathsep}{env.get('PATH', '')}")
    done = subprocess.run(
        [sys.executable, "-m", "tribal_memory", "openclaw", "setup", "--dry-run", "--json",
         "--openclaw", f"{node} {script}", "--node", str(node), "--data-dir", str(tmp_path / "d")],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout
    assert "openclaw setup --baseline" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / ".openclaw" / "openclaw.json").exists()
    assert done.stdout == ""

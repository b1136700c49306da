"""Setting up the OpenClaw plugin: the checks and steps of ``tribal-memory openclaw setup``.

One command takes a machine with an onboarded OpenClaw to the plugin holding
its memory slot: it checks Node (OpenClaw needs 24.16+ below 25, or 26.1+),
that OpenClaw runs and has a config (``openclaw setup --baseline`` or
``openclaw onboard`` made one), finds the agent's workspace in OpenClaw's own
config (``openclaw config get agents``; ``--profile`` and
``OPENCLAW_STATE_DIR`` / ``OPENCLAW_CONFIG_PATH`` apply as they do for
``openclaw``), lists the files memory-core indexes there (``MEMORY.md``,
``USER.md`` and Markdown under ``memory/``), and writes the plugin's entry
(enabled, hook permission, server URL and key) and the memory slot with one
``openclaw config patch``. Ingesting the files and creating a key are the
CLI's part (:mod:`tribal_memory.interfaces.cli.openclaw`): this module only
talks to OpenClaw.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PLUGIN_ID = "tribal-memory"
MEMORY_FILES = ("MEMORY.md", "USER.md")
"""Files at the top of a workspace that memory-core indexes (with ``memory/``)."""
MEMORY_DIR = "memory"
OPENCLAW_TIMEOUT_S = 180.0
"""Longest wait for one ``openclaw`` command, in seconds (``plugins install`` is the slowest)."""


class SetupError(Exception):
    """A check failed or an ``openclaw`` command did not succeed; the message says what to do."""


def node_supported(version: str) -> bool:
    """Whether ``node --version`` output (``v24.21.0``) is one OpenClaw runs on.

    OpenClaw's rule: 24.16 or later below 25, or 26.1 or later.
    """
    match = re.match(r"v?(\d+)\.(\d+)", version.strip())
    if match is None:
        return False
    major, minor = int(match.group(1)), int(match.group(2))
    return (major == 24 and minor >= 16) or (major == 26 and minor >= 1) or major > 26


def default_plugin_dir() -> Path:
    """``integrations/openclaw`` of the checkout this package runs from."""
    return Path(__file__).resolve().parents[2] / "integrations" / "openclaw"


@dataclass(frozen=True)
class OpenClaw:
    """The ``openclaw`` command line, run with an optional ``--profile``.

    Attributes:
        command: The command's words (``["openclaw"]``, or ``[node, openclaw.mjs]``).
        profile: OpenClaw's ``--profile`` (its state in ``~/.openclaw-<profile>``).
    """

    command: tuple[str, ...]
    profile: str | None = None

    @classmethod
    def parse(cls, command: str, profile: str | None) -> OpenClaw:
        """From a command string as typed in a shell (``"node /x/openclaw.mjs"``)."""
        return cls(tuple(shlex.split(command)) or ("openclaw",), profile)

    def run(self, *args: str, stdin: str | None = None) -> str:
        """``openclaw [--profile P] ARGS``: its stdout.

        Raises:
            SetupError: it could not start, timed out, or exited non-zero (its output in
                the message).
        """
        profile = ("--profile", self.profile) if self.profile else ()
        argv = [*self.command, *profile, *args]
        try:
            done = subprocess.run(
                argv, input=stdin, capture_output=True, text=True,
                timeout=OPENCLAW_TIMEOUT_S, check=False,
            )  # fmt: skip
        except FileNotFoundError as exc:
            raise SetupError(
                f"{self.command[0]!r} not found: install OpenClaw (npm install -g openclaw) "
                "or name it with --openclaw"
            ) from exc
        except subprocess.TimeoutExpired as exc:
            raise SetupError(f"openclaw {' '.join(args)} took over {OPENCLAW_TIMEOUT_S} s") from exc
        if done.returncode != 0:
            output = (done.stderr.strip() or done.stdout.strip())[-800:]
            raise SetupError(f"openclaw {' '.join(args)} failed: {output}")
        return done.stdout

    def json(self, *args: str) -> Any:
        """``openclaw ARGS`` parsed as JSON (the first ``{`` on)."""
        out = self.run(*args)
        start = min((i for i in (out.find("{"), out.find("[")) if i >= 0), default=-1)
        if start < 0:
            raise SetupError(f"openclaw {' '.join(args)} printed no JSON: {out[-300:]}")
        try:
            return json.loads(out[start:])
        except ValueError as exc:
            raise SetupError(f"openclaw {' '.join(args)} printed no JSON: {out[-300:]}") from exc


@dataclass
class Found:
    """What the checks found: versions, OpenClaw's config file, the agent and its workspace."""

    node: str
    openclaw: str
    config_path: Path
    agent: str
    workspace: Path
    files: list[Path] = field(default_factory=list)


def check_node(node: str) -> str:
    """``node --version`` of ``node``.

    Raises:
        SetupError: no such command, or a version OpenClaw does not run on.
    """
    try:
        version = subprocess.run(
            [node, "--version"], capture_output=True, text=True, timeout=30, check=True
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        raise SetupError(
            f"Node.js ({node}) not found: OpenClaw needs Node 24.16+ or 26.1+"
        ) from exc
    if not node_supported(version):
        raise SetupError(
            f"Node {version} is too old or unsupported: OpenClaw needs Node 24.16+ "
            "(below 25) or 26.1+"
        )
    return version


def find(openclaw: OpenClaw, *, node: str, agent: str | None) -> Found:
    """Check Node, OpenClaw and its onboarding; find the agent's workspace and memory files.

    Args:
        openclaw: The OpenClaw command line.
        node: The ``node`` command OpenClaw runs on.
        agent: The agent id; None: OpenClaw's default agent (the one marked
            ``default``, else ``main``).

    Raises:
        SetupError: a check failed (the message says how to fix it).
    """
    node_version = check_node(node)
    version = openclaw.run("--version").strip().splitlines()[-1]
    config_path, chosen, workspace = locate(openclaw, agent=agent)
    found = Found(node_version, version, config_path, chosen, workspace)
    found.files = memory_files(found.workspace)
    return found


def locate(openclaw: OpenClaw, *, agent: str | None) -> tuple[Path, str, Path]:
    """OpenClaw's config file, the agent id and its workspace, from OpenClaw's own config.

    Args:
        openclaw: The OpenClaw command line.
        agent: The agent id; None: OpenClaw's default agent.

    Raises:
        SetupError: OpenClaw does not run or is not onboarded (no config file).
    """
    config_path = Path(openclaw.run("config", "file").strip().splitlines()[-1]).expanduser()
    if not config_path.is_file():
        raise SetupError(
            f"OpenClaw is not set up yet (no {config_path}): run `openclaw setup --baseline` "
            "or `openclaw onboard` first"
        )
    agents = openclaw.json("config", "get", "agents", "--json")
    chosen, workspace = _agent_workspace(agents if isinstance(agents, dict) else {}, agent)
    if workspace is None:
        workspace = config_path.parent / "workspace"
    return config_path, chosen, workspace.expanduser()


def _agent_workspace(agents: dict[str, Any], agent: str | None) -> tuple[str, Path | None]:
    """(agent id, its workspace or None) from OpenClaw's ``agents`` config."""
    listed: dict[str, dict[str, Any]] = {}
    entries = agents.get("entries")
    if isinstance(entries, dict):
        listed |= {str(k): v for k, v in entries.items() if isinstance(v, dict)}
    for entry in agents.get("list") or []:
        if isinstance(entry, dict) and isinstance(entry.get("id"), str):
            listed[entry["id"]] = entry
    if agent is None:
        marked = [k for k, v in listed.items() if v.get("default") is True]
        agent = marked[0] if marked else "main"
    entry = listed.get(agent, {})
    defaults = agents.get("defaults") if isinstance(agents.get("defaults"), dict) else {}
    workspace = entry.get("workspace") or (defaults or {}).get("workspace")
    return agent, Path(workspace) if isinstance(workspace, str) and workspace else None


def is_memory_file(path: str) -> bool:
    """Whether a workspace-relative POSIX path is one memory-core indexes.

    ``MEMORY.md``, ``USER.md``, or a Markdown file anywhere under ``memory/``.
    """
    return path in MEMORY_FILES or (path.startswith(f"{MEMORY_DIR}/") and path.endswith(".md"))


def memory_files(workspace: Path) -> list[Path]:
    """The files memory-core indexes in ``workspace``: MEMORY.md, USER.md, memory/**/*.md.

    Returns:
        Existing files, in that order (``memory/`` sorted); [] when there are none.
    """
    files = [workspace / name for name in MEMORY_FILES if (workspace / name).is_file()]
    notes = workspace / MEMORY_DIR
    if notes.is_dir():
        files += sorted(p for p in notes.rglob("*.md") if p.is_file())
    return files


def config_patch(server_url: str, api_key: str | None) -> dict[str, Any]:
    """The ``openclaw config patch``: the plugin enabled (hooks, server, key) and the slot."""
    config: dict[str, Any] = {"baseUrl": server_url}
    if api_key:
        config["apiKey"] = api_key
    return {
        "plugins": {
            "slots": {"memory": PLUGIN_ID},
            "entries": {
                PLUGIN_ID: {
                    "enabled": True,
                    # OpenClaw's rule for plugins not bundled with it: without this the
                    # start-of-turn recall and the end-of-run capture are blocked.
                    "hooks": {"allowConversationAccess": True},
                    "config": config,
                }
            },
        }
    }


def install(openclaw: OpenClaw, plugin_dir: Path, patch: dict[str, Any]) -> None:
    """Install (link) the plugin, apply ``patch`` and validate OpenClaw's config.

    Raises:
        SetupError: the plugin directory is missing, or an ``openclaw`` command failed.
    """
    if not (plugin_dir / "openclaw.plugin.json").is_file():
        raise SetupError(
            f"no OpenClaw plugin in {plugin_dir}: name the checkout's integrations/openclaw "
            "with --plugin-dir"
        )
    openclaw.run("plugins", "install", "-l", str(plugin_dir), "--force", "--accept-capabilities")
    openclaw.run("config", "patch", "--stdin", stdin=json.dumps(patch))
    openclaw.run("config", "validate")

"""``tribal-memory openclaw setup``: the OpenClaw plugin set up in one command.

The checks and the OpenClaw side are in
:mod:`tribal_memory.interfaces.openclaw_setup`; this command adds the
server's side: it ingests the files memory-core indexes (paths relative to
the workspace, owned by the agent) and, when the server requires API keys
(``TRIBAL_AUTH``, or a non-loopback ``TRIBAL_HOST``) and no ``--api-key`` is
given, creates a key for the agent and hands it to the plugin. It prints
each step (one JSON object with ``--json``); ``--dry-run`` checks and prints
the plan without writing anything.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from tribal_memory.auth.keys import open_api_keys
from tribal_memory.documents.ingest import IngestCounts, plan_ingest
from tribal_memory.documents.sync import FileOutcome
from tribal_memory.interfaces.cli.output import Output, fail
from tribal_memory.interfaces.cli.root import app as root_app
from tribal_memory.interfaces.cli.run import Run, with_run
from tribal_memory.interfaces.openclaw_setup import (
    PLUGIN_ID,
    Found,
    OpenClaw,
    SetupError,
    config_patch,
    default_plugin_dir,
    find,
    install,
)

app = typer.Typer(
    name="openclaw",
    help="OpenClaw: set up the tribal-memory plugin in OpenClaw's memory slot.",
    no_args_is_help=True,
)
root_app.add_typer(app)

DEFAULT_SERVER = "http://127.0.0.1:18960"


@app.command()
@with_run
def setup(
    run: Run,
    agent: Annotated[
        str | None,
        typer.Option(help="OpenClaw agent id (default: OpenClaw's default agent, else main)."),
    ] = None,
    profile: Annotated[
        str | None, typer.Option(help="OpenClaw --profile (its state in ~/.openclaw-<profile>).")
    ] = None,
    server_url: Annotated[
        str, typer.Option(help="The tribal-memory server the plugin talks to.")
    ] = DEFAULT_SERVER,
    api_key: Annotated[
        str | None,
        typer.Option(help="Key the plugin sends (default: a new one when the server needs keys)."),
    ] = None,
    openclaw_command: Annotated[
        str, typer.Option("--openclaw", help="The openclaw command (e.g. 'node /x/openclaw.mjs').")
    ] = "openclaw",
    node: Annotated[str, typer.Option(help="The node command OpenClaw runs on.")] = "node",
    plugin_dir: Annotated[
        Path | None,
        typer.Option(help="The plugin (default: integrations/openclaw of this checkout)."),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Check and print the plan; change nothing.")
    ] = False,
) -> Output:
    """Check Node and OpenClaw, ingest the agent's memory files, install and enable the plugin.

    Ingests MEMORY.md, USER.md and memory/**/*.md of the agent's workspace
    (what memory-core indexes), installs the plugin, gives it the memory slot,
    the hook permission, the server URL and (when the server needs one) a
    key, and validates OpenClaw's config. Exit status 1 with the reason when
    a check or step fails.
    """
    openclaw = OpenClaw.parse(openclaw_command, profile)
    try:
        found = find(openclaw, node=node, agent=agent)
    except SetupError as exc:
        fail(str(exc))
    plugin = (plugin_dir or default_plugin_dir()).resolve()
    needs_key = api_key is None and run.settings().auth_enabled
    summary: dict[str, Any] = {
        "dry_run": dry_run,
        "node": found.node,
        "openclaw": found.openclaw,
        "config": str(found.config_path),
        "agent": found.agent,
        "workspace": str(found.workspace),
        "files": [str(p.relative_to(found.workspace)) for p in found.files],
        "plugin_dir": str(plugin),
        "server_url": server_url,
        "key": "created" if needs_key else "given" if api_key else "none (server without keys)",
    }
    if dry_run:
        return Output([summary], _lines(summary, done=False), soft_wrap=True)
    summary["ingested"] = _ingest(run, found)
    if needs_key:
        with open_api_keys(run.settings()) as keys:
            key, api_key = keys.create(found.agent, label=f"openclaw {PLUGIN_ID} plugin")
        summary["key_id"] = key.key_id
    try:
        install(openclaw, plugin, config_patch(server_url, api_key))
    except SetupError as exc:
        fail(str(exc))
    return Output([summary], _lines(summary, done=True), soft_wrap=True)


def _ingest(run: Run, found: Found) -> dict[str, int]:
    """Ingest the found files for the agent; counts per outcome.

    Raises:
        typer.Exit: a file failed (its reason is printed).
    """
    counts = IngestCounts()
    errors: list[str] = []

    def report(outcome: FileOutcome) -> None:
        counts.add(outcome)
        if outcome.error is not None:
            errors.append(outcome.error)

    if found.files:
        plan = plan_ingest(found.files, owner=found.agent, root=found.workspace, fmt="auto")
        run.service().ingest_files(plan.documents, report=report)
    if errors:
        fail(f"ingesting {found.workspace} failed: {'; '.join(errors)}")
    return {
        "created": counts.created,
        "updated": counts.updated,
        "unchanged": counts.unchanged,
        "chunks_added": counts.chunks_added,
    }


def _agent_option(agent: str) -> str:
    """`` --openclaw-agent A`` for an agent other than ``main``, else nothing."""
    return "" if agent == "main" else f" --openclaw-agent {agent}"


def _lines(summary: dict[str, Any], *, done: bool) -> list[str]:
    """The steps, readable, for a terminal."""
    files = ", ".join(summary["files"]) or "none yet"
    lines = [
        f"Node {summary['node']}, OpenClaw {summary['openclaw']}, config {summary['config']}",
        f"agent {summary['agent']}, workspace {summary['workspace']}",
    ]
    if not done:
        return [
            *lines,
            f"would ingest (as {summary['agent']}): {files}",
            f"would install {summary['plugin_dir']}, take the memory slot, allow its hooks, "
            f"point it at {summary['server_url']} (key: {summary['key']})",
        ]
    ingested = summary["ingested"]
    return [
        *lines,
        f"ingested {files}: {ingested['created']} created, {ingested['updated']} updated, "
        f"{ingested['unchanged']} unchanged",
        f"installed {PLUGIN_ID} from {summary['plugin_dir']}: memory slot, hooks allowed, "
        f"server {summary['server_url']}, key {summary['key']}",
        f"next: tribal-memory serve --watch-openclaw{_agent_option(summary['agent'])}, then "
        "openclaw gateway run (or openclaw gateway restart)",
    ]

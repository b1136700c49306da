"""The memory commands: each parses its options, calls the service and returns its output.

``serve``, ``capture``, ``recall``, ``search``, ``get``, ``delete``,
``relate``, ``neighbors``, ``stats`` and ``migrate``.
"""

from __future__ import annotations

import dataclasses
import sys
import threading
from collections.abc import Callable
from datetime import datetime
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from tribal_memory.base.errors import TribalError
from tribal_memory.base.graph import Near, Neighbor
from tribal_memory.base.models import SHARED_OWNER, MemoryInput, SearchFilters
from tribal_memory.interfaces.cli.options import (
    BlockOption,
    ContextOption,
    FeedbackOption,
    IdArgument,
    Kind,
    KindsOption,
    KOption,
    LearnedOption,
    MinScoreOption,
    NearOption,
    OwnerOption,
    QueryArgument,
    SourcesOption,
    StepsOption,
    TypeOption,
    filters,
    near,
    parse_learned,
    parse_time,
)
from tribal_memory.interfaces.cli.output import (
    Output,
    capture_dict,
    capture_line,
    fail,
    fields_output,
    fields_table,
    hits_output,
    memories_table,
    memory_dict,
    neighbor_dict,
    retrieval_stats_output,
    snippet,
)
from tribal_memory.interfaces.cli.root import app
from tribal_memory.interfaces.cli.run import Run, with_run

if TYPE_CHECKING:
    from tribal_memory.base.results import SearchMode
    from tribal_memory.service.memory_service import MemoryService


class Mode(StrEnum):
    """Search modes, as ``--mode`` choices."""

    hybrid = "hybrid"
    vector = "vector"
    text = "text"
    hybrid_expanded = "hybrid_expanded"
    title_ = "title"  # the name "title" would shadow str.title
    summary = "summary"
    automatic = "automatic"


class Bucket(StrEnum):
    """Learning-curve periods of ``stats --retrieval``."""

    day = "day"
    week = "week"


@app.command()
@with_run
def serve(
    run: Run,
    host: Annotated[
        str | None, typer.Option(help="Interface to bind (default: 127.0.0.1).")
    ] = None,
    port: Annotated[
        int | None, typer.Option(min=0, max=65535, help="TCP port (default: 18960).")
    ] = None,
    watch_openclaw: Annotated[
        bool,
        typer.Option(
            "--watch-openclaw",
            help="Also keep the OpenClaw agent's MEMORY.md, USER.md and memory/ indexed.",
        ),
    ] = False,
    openclaw_agent: Annotated[
        str | None,
        typer.Option(help="With --watch-openclaw: the agent (default: OpenClaw's default)."),
    ] = None,
    openclaw_profile: Annotated[
        str | None, typer.Option(help="With --watch-openclaw: OpenClaw's --profile.")
    ] = None,
    openclaw_command: Annotated[
        str, typer.Option("--openclaw", help="With --watch-openclaw: the openclaw command.")
    ] = "openclaw",
    openclaw_workspace: Annotated[
        Path | None,
        typer.Option(help="With --watch-openclaw: this workspace, without asking OpenClaw."),
    ] = None,
) -> None:
    """Run the HTTP server (see /schema for the API) until interrupted.

    With --watch-openclaw the server also keeps the files OpenClaw's
    memory-core indexes (MEMORY.md, USER.md, memory/**/*.md of the agent's
    workspace, found in OpenClaw's config as `openclaw setup` finds it)
    ingested as the agent's documents while it runs.
    """
    overrides = {
        name: value for name, value in (("host", host), ("port", port)) if value is not None
    }
    settings = run.settings(**overrides)
    try:
        from tribal_memory.interfaces.api.server import run as run_server
    except ImportError as exc:
        raise TribalError(f"the HTTP server is not available: {exc}") from exc
    workers: list[Callable[[MemoryService, threading.Event], None]] = []
    if watch_openclaw:
        workers.append(
            _openclaw_watcher(
                openclaw_command, openclaw_profile, openclaw_agent, openclaw_workspace
            )
        )
    elif openclaw_agent or openclaw_profile or openclaw_workspace:
        raise typer.BadParameter("only with --watch-openclaw", param_hint="--openclaw-*")
    run_server(settings, workers=workers)


def _openclaw_watcher(
    command: str, profile: str | None, agent: str | None, workspace: Path | None
) -> Callable[[MemoryService, threading.Event], None]:
    """The worker of ``serve --watch-openclaw``, for the workspace OpenClaw's config names.

    Exits with status 1 (and the reason) when OpenClaw cannot be asked or the
    workspace is missing.
    """
    from tribal_memory.interfaces.openclaw_setup import OpenClaw, SetupError, locate
    from tribal_memory.interfaces.openclaw_watch import workspace_watcher

    if workspace is None:
        try:
            _, agent, workspace = locate(OpenClaw.parse(command, profile), agent=agent)
        except SetupError as exc:
            fail(str(exc))
    if not workspace.is_dir():
        fail(f"OpenClaw workspace {workspace} does not exist (run `openclaw setup --baseline`)")
    chosen = agent or "main"
    typer.echo(f"watching OpenClaw workspace {workspace} for agent {chosen}", err=True)
    return workspace_watcher(workspace.resolve(), chosen)


@app.command()
@with_run(remote=True)
def capture(
    run: Run,
    text: Annotated[str, typer.Argument(help="The memory's text; - reads it from stdin.")],
    owner: Annotated[str, typer.Option("--owner", "-o", help="Owner (agent or user id).")] = (
        SHARED_OWNER
    ),
    kind: Annotated[Kind, typer.Option(help="Kind of memory.")] = Kind.fact,
    tag: Annotated[
        list[str] | None, typer.Option("--tag", "-t", help="A tag (repeatable).")
    ] = None,
    source: Annotated[str | None, typer.Option(help="Where it came from (path or URI).")] = None,
) -> Output:
    """Store one memory (idempotent: the same text for the same owner is stored once)."""
    content = sys.stdin.read() if text == "-" else text
    item = MemoryInput(
        content=content, owner=owner, kind=kind.value, tags=tuple(tag or ()), source=source
    )
    result = run.api().capture(item)
    return Output([capture_dict(result)], [capture_line(result)])


@dataclasses.dataclass(frozen=True)
class _Ask:
    """One recall or search as the command line gave it."""

    query: str
    k: int
    filters: SearchFilters
    mode: SearchMode
    min_score: float
    learned: str | None  # --learned as given, e.g. "cache,feedback"
    context: bool
    near: Near | None = None


def _ask(run: Run, ask: _Ask, *, feedback: bool) -> Output:
    """Run ``ask`` (logged for feedback when asked); its hits."""
    parts = parse_learned(ask.learned)
    service = run.api()
    run_search = service.recall_with_feedback if feedback else service.search
    result = run_search(
        ask.query,
        k=ask.k,
        filters=ask.filters,
        mode=ask.mode,
        min_score=ask.min_score,
        learned=parts,
        context=ask.context,
        near=ask.near,
    )
    return hits_output(result, context=ask.context)


@app.command()
@with_run(remote=True)
def recall(
    run: Run,
    query: QueryArgument,
    k: KOption = 10,
    owner: OwnerOption = None,
    min_score: MinScoreOption = 0.0,
    feedback: FeedbackOption = False,
    learned: LearnedOption = None,
    context: ContextOption = False,
    near_id: NearOption = None,
    steps: StepsOption = None,
    type: TypeOption = None,
    block: BlockOption = None,
) -> Output:
    """Embedding-similarity recall; score = cosine similarity in [0, 1] plus learned boosts."""
    where = near(near_id, steps, type, block)
    ask = _Ask(query, k, SearchFilters(owner=owner), "vector", min_score, learned, context, where)
    return _ask(run, ask, feedback=feedback)


@app.command()
@with_run(remote=True)
def search(
    run: Run,
    query: QueryArgument,
    k: KOption = 10,
    owner: OwnerOption = None,
    mode: Annotated[
        Mode,
        typer.Option(
            help="Ranking: fused, embeddings, BM25, fused and graph-expanded, section titles, "
            "summaries only, or chosen from the query (automatic)."
        ),
    ] = Mode.hybrid,
    tag: Annotated[list[str] | None, typer.Option("--tag", "-t", help="Has this tag (any of).")] = (
        None
    ),
    kind: KindsOption = None,
    source: SourcesOption = None,
    since: Annotated[
        str | None, typer.Option(help="Not before this ISO 8601 time (UTC if no offset).")
    ] = None,
    until: Annotated[
        str | None, typer.Option(help="Not after this ISO 8601 time (UTC if no offset).")
    ] = None,
    min_score: MinScoreOption = 0.0,
    feedback: FeedbackOption = False,
    learned: LearnedOption = None,
    context: ContextOption = False,
    near_id: NearOption = None,
    steps: StepsOption = None,
    type: TypeOption = None,
    block: BlockOption = None,
) -> Output:
    """Hybrid (vector + BM25) search; every hit shows its fused score and both parts."""
    found_by = filters(owner, tags=tag, kinds=kind, sources=source, since=since, until=until)
    where = near(near_id, steps, type, block)
    ask = _Ask(query, k, found_by, mode.value, min_score, learned, context, where)
    return _ask(run, ask, feedback=feedback)


@app.command()
@with_run(remote=True)
def get(run: Run, memory_id: IdArgument, owner: OwnerOption = None) -> Output:
    """Show one memory."""
    return fields_output(memory_dict(run.api().get(memory_id, owner=owner)))


@app.command()
@with_run(remote=True)
def delete(run: Run, memory_id: IdArgument, owner: OwnerOption = None) -> Output:
    """Delete a memory, its relations and everything learned about it."""
    run.api().delete(memory_id, owner=owner)
    return Output([{"deleted": memory_id}], [f"deleted {memory_id}"])


@app.command()
@with_run(remote=True)
def relate(
    run: Run,
    source_id: Annotated[str, typer.Argument(metavar="SOURCE_ID")],
    target_id: Annotated[str, typer.Argument(metavar="TARGET_ID")],
    type: Annotated[str, typer.Argument(metavar="TYPE", help="Relation type, e.g. supports.")],
    weight: Annotated[float, typer.Option(min=0.0, help="Edge weight (>= 0).")] = 1.0,
    owner: OwnerOption = None,
) -> Output:
    """Add (or re-weight) the edge SOURCE_ID -[TYPE]-> TARGET_ID."""
    relation = run.api().relate(source_id, target_id, type, weight=weight, owner=owner)
    line = (
        f"{relation.source_id} -[{relation.type}]-> {relation.target_id} "
        f"(weight {relation.weight:g})"
    )
    return Output([dataclasses.asdict(relation)], [line])


@app.command()
@with_run(remote=True)
def neighbors(
    run: Run,
    memory_id: IdArgument,
    steps: Annotated[int, typer.Option(min=1, max=5, help="Hops over relations.")] = 1,
    type: TypeOption = None,
    block: BlockOption = None,
    owner: OwnerOption = None,
) -> Output:
    """Memories reachable over relations, nearest first."""
    found = run.api().neighbors(
        memory_id, steps=steps, owner=owner, types=type or (), block=block or ()
    )
    return _neighbors_output(found)


def _neighbors_output(found: list[Neighbor]) -> Output:
    lines = [neighbor_dict(neighbor) for neighbor in found]
    if not found:
        return Output(lines, ["no neighbours"])
    table = memories_table("steps", "via", "weight", "owner")
    for neighbor in found:
        table.add_row(
            str(neighbor.steps),
            neighbor.via.type,
            f"{neighbor.via.weight:g}",
            neighbor.memory.owner,
            snippet(neighbor.memory.content),
            neighbor.memory.memory_id,
        )
    return Output(lines, [table])


@app.command()
@with_run(remote=True)
def stats(
    run: Run,
    retrieval: Annotated[
        bool, typer.Option("--retrieval", help="Learned-layer usage stats instead.")
    ] = False,
    owner: Annotated[
        str | None, typer.Option("--owner", "-o", help="With --retrieval: only this owner.")
    ] = None,
    bucket: Annotated[
        Bucket | None, typer.Option(help="With --retrieval: learning-curve period [default: day].")
    ] = None,
    since: Annotated[
        str | None, typer.Option(help="With --retrieval: not before this ISO 8601 time.")
    ] = None,
) -> Output:
    """Counts per owner and kind, relations, embedding model and index state.

    With --retrieval: usage per A/B variant, cache hit rate, expansion lift
    and a learning curve.
    """
    if retrieval:
        return _retrieval_stats(run, owner, bucket or Bucket.day, parse_time(since, "--since"))
    if owner is not None or bucket is not None or since is not None:
        raise typer.BadParameter("only with --retrieval", param_hint="--owner/--bucket/--since")
    result = dataclasses.asdict(run.api().stats())
    table = fields_table()
    for name, value in result.items():
        if isinstance(value, dict):
            value = ", ".join(f"{key}={count}" for key, count in value.items()) or "-"
        table.add_row(name, str(value))
    return Output([result], [table])


def _retrieval_stats(run: Run, owner: str | None, bucket: Bucket, since: datetime | None) -> Output:
    stats = run.api().retrieval_stats(owner=owner, bucket=bucket.value, since=since)
    return retrieval_stats_output(stats)


@app.command()
@with_run
def migrate(run: Run) -> Output:
    """Create or upgrade the SQL schema (SQLite, or TRIBAL_DATABASE_URL; no model needed)."""
    from tribal_memory.base.db import database_label, head_revision, migrate_database

    settings = run.settings()
    revision = migrate_database(settings)
    database = database_label(settings)
    head = head_revision()
    report = {"revision": revision, "head": head, "database": database}
    return Output([report], [f"{database}: at revision {revision} (newest {head})"])

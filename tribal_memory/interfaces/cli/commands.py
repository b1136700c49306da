"""The commands: each parses its options, calls the service and prints."""

from __future__ import annotations

import dataclasses
import sys
from datetime import UTC, datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated

import typer

from tribal_memory.base.errors import InvalidInput, TribalError
from tribal_memory.base.models import (
    LEARNED_PARTS,
    SHARED_OWNER,
    LearnedParts,
    MemoryInput,
    Near,
    SearchFilters,
    Traversal,
)
from tribal_memory.interfaces.cli.output import (
    _capture_dict,
    _capture_line,
    _fields_table,
    _memory_dict,
    _neighbor_dict,
    _plain,
    _print_hits,
    _print_retrieval_stats,
    _relation_dict,
    _retrieval_stats_dict,
    _snippet,
    _table,
)
from tribal_memory.interfaces.cli.root import DataDirOption, JsonOption, _Run, app

if TYPE_CHECKING:
    from tribal_memory.base.models import SearchMode

OwnerOption = Annotated[
    str | None, typer.Option("--owner", "-o", help="Only this owner's and shared memories.")
]
QueryArgument = Annotated[str, typer.Argument(help="A question or keywords.")]
KOption = Annotated[int, typer.Option("-k", min=1, help="Most hits.")]
MinScoreOption = Annotated[float, typer.Option(min=0.0, max=1.0, help="Drop hits under it.")]
IdArgument = Annotated[str, typer.Argument(metavar="ID", help="Memory id.")]
FeedbackOption = Annotated[
    bool,
    typer.Option(
        "--feedback",
        help="Log the retrieval for usage feedback and print its id (JSON: on every hit).",
    ),
]
ContextOption = Annotated[
    bool,
    typer.Option(
        "--context",
        help="Also show each document chunk hit's parent heading chunk and the chunks "
        "before and after it (JSON: a context field on each hit).",
    ),
]
LearnedOption = Annotated[
    str | None,
    typer.Option(
        "--learned",
        metavar="PARTS",
        help=f"Learned parts to use: a comma list of {', '.join(LEARNED_PARTS)}, or none "
        "(plain search). Default: the owner's A/B variant.",
    ),
]


NearOption = Annotated[
    str | None,
    typer.Option(
        "--near",
        metavar="ID",
        help="Search only this memory and those within --steps hops of it over relations.",
    ),
]
StepsOption = Annotated[
    int | None, typer.Option(min=1, max=5, help="Hops over relations (default 1).")
]
TypeOption = Annotated[
    list[str] | None,
    typer.Option("--type", help="Follow only relations of this type (repeat: any of them)."),
]
BlockOption = Annotated[
    list[str] | None,
    typer.Option(
        "--block",
        help="Never pass through relations of this type or memories of this kind (repeat).",
    ),
]


def _near(
    near: str | None, steps: int | None, types: list[str] | None, block: list[str] | None
) -> Near | None:
    """The :class:`Near` of ``--near``, ``--steps``, ``--type``, ``--block``.

    Raises:
        InvalidInput: ``--steps``, ``--type`` or ``--block`` without ``--near``.
    """
    if near is None:
        if steps is not None or types or block:
            raise InvalidInput(
                "--steps, --type and --block need --near (the memory to search around)"
            )
        return None
    return Near(near, Traversal(steps or 1, tuple(types or ()), tuple(block or ())))


class Kind(StrEnum):
    """Memory kinds, as ``--kind`` choices."""

    fact = "fact"
    chunk = "chunk"
    document = "document"


class Mode(StrEnum):
    """Search modes, as ``--mode`` choices."""

    hybrid = "hybrid"
    vector = "vector"
    text = "text"
    hybrid_expanded = "hybrid_expanded"


class Bucket(StrEnum):
    """Learning-curve periods of ``stats --retrieval``."""

    day = "day"
    week = "week"


# -- commands -----------------------------------------------------------------------


@app.command()
def serve(
    ctx: typer.Context,
    host: Annotated[
        str | None, typer.Option(help="Interface to bind (default: 127.0.0.1).")
    ] = None,
    port: Annotated[
        int | None, typer.Option(min=0, max=65535, help="TCP port (default: 18960).")
    ] = None,
    data_dir: DataDirOption = None,
    json_out: JsonOption = None,
) -> None:
    """Run the HTTP server (see /schema for the API) until interrupted."""
    run = _Run(ctx, data_dir, json_out)
    overrides = {
        name: value for name, value in (("host", host), ("port", port)) if value is not None
    }
    settings = run.settings(**overrides)
    try:
        from tribal_memory.interfaces.api.server import run as run_server
    except ImportError as exc:
        raise TribalError(f"the HTTP server is not available: {exc}") from exc
    run_server(settings)


@app.command()
def capture(
    ctx: typer.Context,
    text: Annotated[str, typer.Argument(help="The memory's text; - reads it from stdin.")],
    owner: Annotated[str, typer.Option("--owner", "-o", help="Owner (agent or user id).")] = (
        SHARED_OWNER
    ),
    kind: Annotated[Kind, typer.Option(help="Kind of memory.")] = Kind.fact,
    tag: Annotated[
        list[str] | None, typer.Option("--tag", "-t", help="A tag (repeatable).")
    ] = None,
    source: Annotated[str | None, typer.Option(help="Where it came from (path or URI).")] = None,
    data_dir: DataDirOption = None,
    json_out: JsonOption = None,
) -> None:
    """Store one memory (idempotent: the same text for the same owner is stored once)."""
    run = _Run(ctx, data_dir, json_out)
    content = sys.stdin.read() if text == "-" else text
    item = MemoryInput(
        content=content,
        owner=owner,
        kind=kind.value,
        tags=tuple(tag or ()),
        source=source,
    )
    with run.service() as service:
        result = service.capture(item)
    if run.json:
        run.emit(_capture_dict(result))
    else:
        run.out.print(_capture_line(result))


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


def _ask(run: _Run, ask: _Ask, *, feedback: bool) -> None:
    """Run ``ask`` (logged for feedback when asked) and print its hits."""
    parts = _parse_learned(ask.learned)
    with run.service() as service:
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
    _print_hits(run, result, context=ask.context)


@app.command()
def recall(
    ctx: typer.Context,
    query: QueryArgument,
    k: KOption = 10,
    owner: OwnerOption = None,
    min_score: MinScoreOption = 0.0,
    feedback: FeedbackOption = False,
    learned: LearnedOption = None,
    context: ContextOption = False,
    near: NearOption = None,
    steps: StepsOption = None,
    type: TypeOption = None,
    block: BlockOption = None,
    data_dir: DataDirOption = None,
    json_out: JsonOption = None,
) -> None:
    """Embedding-similarity recall; score = cosine similarity in [0, 1] plus learned boosts."""
    run = _Run(ctx, data_dir, json_out)
    where = _near(near, steps, type, block)
    ask = _Ask(query, k, SearchFilters(owner=owner), "vector", min_score, learned, context, where)
    _ask(run, ask, feedback=feedback)


@app.command()
def search(
    ctx: typer.Context,
    query: QueryArgument,
    k: KOption = 10,
    owner: OwnerOption = None,
    mode: Annotated[
        Mode, typer.Option(help="Ranking: fused, embeddings, BM25, or fused and graph-expanded.")
    ] = Mode.hybrid,
    tag: Annotated[list[str] | None, typer.Option("--tag", "-t", help="Has this tag (any of).")] = (
        None
    ),
    kind: Annotated[list[Kind] | None, typer.Option(help="Of this kind (any of).")] = None,
    source: Annotated[list[str] | None, typer.Option(help="From this source (any of).")] = None,
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
    near: NearOption = None,
    steps: StepsOption = None,
    type: TypeOption = None,
    block: BlockOption = None,
    data_dir: DataDirOption = None,
    json_out: JsonOption = None,
) -> None:
    """Hybrid (vector + BM25) search; every hit shows its fused score and both parts."""
    run = _Run(ctx, data_dir, json_out)
    filters = SearchFilters(
        owner=owner,
        tags=tuple(tag or ()),
        kinds=tuple(choice.value for choice in kind or ()),
        sources=tuple(source or ()),
        since=_parse_time(since, "--since"),
        until=_parse_time(until, "--until"),
    )
    where = _near(near, steps, type, block)
    ask = _Ask(query, k, filters, mode.value, min_score, learned, context, where)
    _ask(run, ask, feedback=feedback)


@app.command()
def get(
    ctx: typer.Context,
    memory_id: IdArgument,
    owner: OwnerOption = None,
    data_dir: DataDirOption = None,
    json_out: JsonOption = None,
) -> None:
    """Show one memory."""
    run = _Run(ctx, data_dir, json_out)
    with run.service() as service:
        memory = service.get(memory_id, owner=owner)
    if run.json:
        run.emit(_memory_dict(memory))
        return
    table = _fields_table()
    for name, value in _memory_dict(memory).items():
        table.add_row(name, _plain(value))
    run.out.print(table)


@app.command()
def delete(
    ctx: typer.Context,
    memory_id: IdArgument,
    owner: OwnerOption = None,
    data_dir: DataDirOption = None,
    json_out: JsonOption = None,
) -> None:
    """Delete a memory, its relations and everything learned about it."""
    run = _Run(ctx, data_dir, json_out)
    with run.service() as service:
        service.delete(memory_id, owner=owner)
    if run.json:
        run.emit({"deleted": memory_id})
    else:
        run.out.print(f"deleted {memory_id}")


@app.command()
def relate(
    ctx: typer.Context,
    source_id: Annotated[str, typer.Argument(metavar="SOURCE_ID")],
    target_id: Annotated[str, typer.Argument(metavar="TARGET_ID")],
    type: Annotated[str, typer.Argument(metavar="TYPE", help="Relation type, e.g. supports.")],
    weight: Annotated[float, typer.Option(min=0.0, help="Edge weight (>= 0).")] = 1.0,
    owner: OwnerOption = None,
    data_dir: DataDirOption = None,
    json_out: JsonOption = None,
) -> None:
    """Add (or re-weight) the edge SOURCE_ID -[TYPE]-> TARGET_ID."""
    run = _Run(ctx, data_dir, json_out)
    with run.service() as service:
        relation = service.relate(source_id, target_id, type, weight=weight, owner=owner)
    if run.json:
        run.emit(_relation_dict(relation))
    else:
        run.out.print(
            f"{relation.source_id} -[{relation.type}]-> {relation.target_id} "
            f"(weight {relation.weight:g})"
        )


@app.command()
def neighbors(
    ctx: typer.Context,
    memory_id: IdArgument,
    steps: Annotated[int, typer.Option(min=1, max=5, help="Hops over relations.")] = 1,
    type: TypeOption = None,
    block: BlockOption = None,
    owner: OwnerOption = None,
    data_dir: DataDirOption = None,
    json_out: JsonOption = None,
) -> None:
    """Memories reachable over relations, nearest first."""
    run = _Run(ctx, data_dir, json_out)
    with run.service() as service:
        found = service.neighbors(
            memory_id, steps=steps, owner=owner, types=type or (), block=block or ()
        )
    if run.json:
        for neighbor in found:
            run.emit(_neighbor_dict(neighbor))
        return
    if not found:
        run.out.print("no neighbours")
        return
    table = _table("steps", "via", "weight", "owner")
    for neighbor in found:
        table.add_row(
            str(neighbor.steps),
            neighbor.via.type,
            f"{neighbor.via.weight:g}",
            neighbor.memory.owner,
            _snippet(neighbor.memory.content),
            neighbor.memory.memory_id,
        )
    run.out.print(table)


@app.command()
def stats(
    ctx: typer.Context,
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
    data_dir: DataDirOption = None,
    json_out: JsonOption = None,
) -> None:
    """Counts per owner and kind, relations, embedding model and index state.

    With --retrieval: usage per A/B variant, cache hit rate, expansion lift
    and a learning curve.
    """
    run = _Run(ctx, data_dir, json_out)
    if retrieval:
        _retrieval_stats(run, owner, bucket or Bucket.day, _parse_time(since, "--since"))
        return
    if owner is not None or bucket is not None or since is not None:
        raise typer.BadParameter("only with --retrieval", param_hint="--owner/--bucket/--since")
    with run.service() as service:
        result = dataclasses.asdict(service.stats())
    if run.json:
        run.emit(result)
        return
    table = _fields_table()
    for name, value in result.items():
        if isinstance(value, dict):
            value = ", ".join(f"{key}={count}" for key, count in value.items()) or "-"
        table.add_row(name, str(value))
    run.out.print(table)


def _retrieval_stats(run: _Run, owner: str | None, bucket: Bucket, since: datetime | None) -> None:
    with run.service() as service:
        result = service.retrieval_stats(owner=owner, bucket=bucket.value, since=since)
    if run.json:
        run.emit(_retrieval_stats_dict(result))
    else:
        _print_retrieval_stats(run, result)


@app.command()
def migrate(
    ctx: typer.Context,
    data_dir: DataDirOption = None,
    json_out: JsonOption = None,
) -> None:
    """Create or upgrade the SQL schema (SQLite, or TRIBAL_DATABASE_URL; no model needed)."""
    from tribal_memory.base.db import database_label, engine_for, head_revision
    from tribal_memory.base.db import migrate as upgrade

    run = _Run(ctx, data_dir, json_out)
    settings = run.settings()
    if settings.database_url is None:
        try:
            settings.data_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise TribalError(f"cannot create data dir {settings.data_dir}: {exc}") from exc
    engine = engine_for(settings)
    try:
        revision = upgrade(engine)
    finally:
        engine.dispose()
    database = database_label(settings)
    report = {"revision": revision, "head": head_revision(), "database": database}
    if run.json:
        run.emit(report)
    else:
        run.out.print(f"{database}: at revision {revision} (newest {report['head']})")


def _parse_learned(value: str | None) -> LearnedParts | None:
    """``--learned``: None (the owner's variant), ``none`` or a comma list of part names."""
    if value is None:
        return None
    if value.strip().lower() == "none":
        return LearnedParts.none()
    names = [name.strip() for name in value.split(",") if name.strip()]
    if not names:
        raise typer.BadParameter("name learned parts, or none", param_hint="--learned")
    try:
        return LearnedParts.only(*names)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--learned") from exc


def _parse_time(value: str | None, option: str) -> datetime | None:
    """An ISO 8601 time; naive times are taken as UTC."""
    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError as exc:
        raise typer.BadParameter(f"not an ISO 8601 time: {value!r}", param_hint=option) from exc
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)

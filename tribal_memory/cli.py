"""The ``tribal-memory`` command line: a thin client of :class:`MemoryService`.

Output is a readable table on a terminal and JSON lines (one object per hit,
memory or summary) when stdout is not a terminal or with ``--json``
(``--no-json`` forces the tables). Progress bars go to stderr, on a terminal
only. Errors are one line on stderr, ``error: <message>``, with exit status 1
(2 for a bad command line); ``--debug`` (or ``TRIBAL_DEBUG=1``) re-raises
unexpected errors with their traceback.

``--data-dir`` and ``--json`` are accepted before the command
(``tribal-memory --json stats``) and after it (``tribal-memory stats --json``).
Every other setting comes from ``TRIBAL_*`` environment variables (see
:class:`tribal_memory.config.Settings`).

The module is longer than most here because typer declares every option in
its command's signature; the commands themselves only parse, call the
service and print.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from typer.core import TyperGroup

from tribal_memory.config import Settings
from tribal_memory.errors import TribalError
from tribal_memory.models import (
    SHARED_OWNER,
    CaptureResult,
    Memory,
    MemoryInput,
    Neighbor,
    Relation,
    SearchFilters,
    SearchResult,
)

if TYPE_CHECKING:
    from tribal_memory.service import MemoryService

INGEST_BATCH = 64
"""Memories per ``capture_batch`` call while ingesting (capped by ``max_batch_size``)."""
_SNIPPET_CHARS = 80


class _Group(TyperGroup):
    """The root command: turns every failure into one line on stderr.

    Errors raised by commands are handled in :meth:`invoke` (where the
    ``--debug`` flag is known); command-line errors in :meth:`main`. Both run
    under ``typer.testing.CliRunner`` too, so tests see what users see.
    """

    # ``Any``: the base class types ctx with typer's vendored click Context.
    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except (typer.TyperException, typer.Exit, typer.Abort, BrokenPipeError):
            raise
        except TribalError as exc:
            _fail(exc.detail)
        except ValidationError as exc:
            _fail(_settings_error(exc))
        # Last resort, so an unforeseen failure is one line, not a traceback.
        except Exception as exc:  # noqa: BLE001
            if isinstance(ctx.obj, _Globals) and ctx.obj.debug:
                raise
            _fail(f"{type(exc).__name__}: {exc} (set TRIBAL_DEBUG=1 for the traceback)")

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        try:
            result = super().main(
                args, prog_name, complete_var, False, windows_expand_args, **extra
            )
        except typer.TyperException as exc:  # click's ClickException and UsageError
            result = exc.exit_code
            if type(exc).__name__ == "NoArgsIsHelpError":  # its message is the help text
                typer.echo(exc.format_message(), err=True)
            else:
                usage_ctx = getattr(exc, "ctx", None)
                hint = f" (see '{usage_ctx.command_path} --help')" if usage_ctx else ""
                typer.echo(f"error: {_one_line(exc.format_message())}{hint}", err=True)
        except typer.Abort:
            typer.echo("error: aborted", err=True)
            result = 1
        if not standalone_mode:
            return result
        sys.exit(result if isinstance(result, int) else 0)


app = typer.Typer(
    cls=_Group,
    name="tribal-memory",
    help="A memory server for AI agents: capture, search and serve memories.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
bench_app = typer.Typer(help="Benchmarks.", no_args_is_help=True)
app.add_typer(bench_app, name="bench")


# -- options shared by every command ---------------------------------------------

DataDirOption = Annotated[
    Path | None,
    typer.Option(
        "--data-dir",
        help="Data directory (default: $TRIBAL_DATA_DIR, else the per-user data dir).",
        file_okay=False,
    ),
]
JsonOption = Annotated[
    bool | None,
    typer.Option(
        "--json/--no-json",
        help="JSON lines output (default: when stdout is not a terminal).",
        show_default=False,
    ),
]
OwnerOption = Annotated[
    str | None, typer.Option("--owner", "-o", help="Only this owner's and shared memories.")
]
QueryArgument = Annotated[str, typer.Argument(help="A question or keywords.")]
KOption = Annotated[int, typer.Option("-k", min=1, help="Most hits.")]
MinScoreOption = Annotated[float, typer.Option(min=0.0, max=1.0, help="Drop hits under it.")]
IdArgument = Annotated[str, typer.Argument(metavar="ID", help="Memory id.")]


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


class Format(StrEnum):
    """Input formats of ``ingest``."""

    auto = "auto"
    text = "text"
    locomo = "locomo"


@dataclasses.dataclass(frozen=True)
class _Globals:
    data_dir: Path | None
    json: bool | None
    debug: bool


@app.callback()
def _root(
    ctx: typer.Context,
    data_dir: DataDirOption = None,
    json_out: JsonOption = None,
    debug: Annotated[
        bool,
        typer.Option(
            "--debug", envvar="TRIBAL_DEBUG", help="Show tracebacks of unexpected errors."
        ),
    ] = False,
) -> None:
    """tribal-memory: memories for AI agents that improve with use."""
    ctx.obj = _Globals(data_dir, json_out, debug)


class _Run:
    """What one command needs: its settings, output mode and consoles."""

    def __init__(self, ctx: typer.Context, data_dir: Path | None, json_out: bool | None) -> None:
        root = ctx.obj if isinstance(ctx.obj, _Globals) else _Globals(None, None, False)
        self.data_dir = data_dir or root.data_dir
        chosen = json_out if json_out is not None else root.json
        self.json = chosen if chosen is not None else not sys.stdout.isatty()
        # markup=False: memory text is printed as it is, never read as rich markup.
        self.out = Console(markup=False, highlight=False)
        self.err = Console(stderr=True, markup=False, highlight=False)

    def settings(self, **overrides: Any) -> Settings:
        """Settings from the environment, with ``--data-dir`` and ``overrides`` applied."""
        if self.data_dir is not None:
            overrides["data_dir"] = self.data_dir
        return Settings(**overrides)

    @contextmanager
    def service(self, settings: Settings | None = None) -> Iterator[MemoryService]:
        """An open service (loads the embedding model), closed on exit."""
        from tribal_memory.service import MemoryService

        with MemoryService(settings or self.settings()) as service:
            yield service

    def emit(self, obj: dict[str, Any]) -> None:
        """One JSON line on stdout."""
        typer.echo(json.dumps(obj, ensure_ascii=False, default=_json_default))

    @property
    def show_progress(self) -> bool:
        return not self.json and sys.stderr.isatty()


# -- commands -----------------------------------------------------------------------


@app.command()
def serve(
    ctx: typer.Context,
    host: Annotated[
        str | None, typer.Option(help="Interface to bind (default: 127.0.0.1).")
    ] = None,
    port: Annotated[
        int | None, typer.Option(min=0, max=65535, help="TCP port (default: 18790).")
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
        from tribal_memory.api.server import run as run_server
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


@app.command()
def ingest(
    ctx: typer.Context,
    paths: Annotated[list[Path], typer.Argument(help="Files or directories (recursive).")],
    owner: Annotated[
        str, typer.Option("--owner", "-o", help="Owner of document chunks (LoCoMo: sample_id).")
    ] = SHARED_OWNER,
    format: Annotated[
        Format,
        typer.Option(help="auto: .md/.markdown/.txt as text, a .json file named here as LoCoMo."),
    ] = Format.auto,
    root: Annotated[
        Path | None,
        typer.Option(help="Record document paths relative to this (default: current dir)."),
    ] = None,
    data_dir: DataDirOption = None,
    json_out: JsonOption = None,
) -> None:
    """Chunk documents (or load LoCoMo conversations) into memories."""
    from tribal_memory.ingest import load_paths

    run = _Run(ctx, data_dir, json_out)
    started = time.perf_counter()
    loaded = load_paths(paths, owner=owner, root=root or Path.cwd(), format=format.value)
    items = loaded.memories
    loaded_s = time.perf_counter() - started

    with run.service() as service:
        started = time.perf_counter()
        counts = _capture_all(run, service, items)
        seconds = loaded_s + time.perf_counter() - started
    files, skipped = loaded.files, loaded.skipped
    summary = {
        "files": files,
        "skipped": skipped,
        "memories": len(items),
        **counts,
        "seconds": round(seconds, 3),
        "memories_per_s": round(len(items) / seconds, 1) if seconds > 0 else 0.0,
    }
    if run.json:
        run.emit(summary)
    else:
        run.out.print(
            f"{files} file{'' if files == 1 else 's'} ({skipped} skipped): {len(items)} memories, "
            f"{counts['created']} created, {counts['exists']} already stored, "
            f"{counts['near_duplicates']} near-duplicates in {seconds:.1f} s "
            f"({summary['memories_per_s']} memories/s)"
        )


def _capture_all(run: _Run, service: MemoryService, items: list[MemoryInput]) -> dict[str, int]:
    """Capture in batches with a progress bar; counts of created, exists, near-duplicates."""
    counts = {"created": 0, "exists": 0, "near_duplicates": 0}
    batch = min(INGEST_BATCH, service.settings.max_batch_size)
    with _progress(run, "ingesting", len(items)) as advance:
        for offset in range(0, len(items), batch):
            for result in service.capture_batch(items[offset : offset + batch]):
                counts[result.status] += 1
                counts["near_duplicates"] += result.near_duplicate_of is not None
            advance(min(batch, len(items) - offset))
    if counts["created"]:
        service.optimize()  # fold the new rows into the full-text index
    return counts


@app.command()
def recall(
    ctx: typer.Context,
    query: QueryArgument,
    k: KOption = 10,
    owner: OwnerOption = None,
    min_score: MinScoreOption = 0.0,
    data_dir: DataDirOption = None,
    json_out: JsonOption = None,
) -> None:
    """Embedding-similarity recall; score = cosine similarity in [0, 1]."""
    run = _Run(ctx, data_dir, json_out)
    filters = SearchFilters(owner=owner)
    with run.service() as service:
        result = service.recall(query, k=k, filters=filters, min_score=min_score)
    _print_hits(run, result)


@app.command()
def search(
    ctx: typer.Context,
    query: QueryArgument,
    k: KOption = 10,
    owner: OwnerOption = None,
    mode: Annotated[Mode, typer.Option(help="Ranking: fused, embeddings or BM25.")] = Mode.hybrid,
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
    with run.service() as service:
        result = service.search(query, k=k, filters=filters, mode=mode.value, min_score=min_score)
    _print_hits(run, result)


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
    owner: OwnerOption = None,
    data_dir: DataDirOption = None,
    json_out: JsonOption = None,
) -> None:
    """Memories reachable over relations, nearest first."""
    run = _Run(ctx, data_dir, json_out)
    with run.service() as service:
        found = service.neighbors(memory_id, steps=steps, owner=owner)
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
    data_dir: DataDirOption = None,
    json_out: JsonOption = None,
) -> None:
    """Counts per owner and kind, relations, embedding model and index state."""
    run = _Run(ctx, data_dir, json_out)
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


@app.command()
def migrate(
    ctx: typer.Context,
    data_dir: DataDirOption = None,
    json_out: JsonOption = None,
) -> None:
    """Create or upgrade the SQLite schema (no embedding model needed)."""
    from tribal_memory.db import head_revision, make_engine
    from tribal_memory.db import migrate as upgrade

    run = _Run(ctx, data_dir, json_out)
    settings = run.settings()
    try:
        settings.data_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise TribalError(f"cannot create data dir {settings.data_dir}: {exc}") from exc
    engine = make_engine(settings.sqlite_path, busy_timeout_ms=settings.sqlite_busy_timeout_ms)
    try:
        revision = upgrade(engine)
    finally:
        engine.dispose()
    report = {"revision": revision, "head": head_revision(), "database": str(settings.sqlite_path)}
    if run.json:
        run.emit(report)
    else:
        run.out.print(f"{settings.sqlite_path}: at revision {revision} (newest {report['head']})")


_BENCH_COLUMNS = ("recall@5", "recall@10", "recall@25", "hit@10", "mrr", "p50_ms", "p95_ms")


@bench_app.command("locomo")
def bench_locomo(
    ctx: typer.Context,
    path: Annotated[Path, typer.Argument(help="A LoCoMo-format JSON file.")],
    out: Annotated[Path | None, typer.Option("--out", help="Write the JSON report here.")] = None,
    limit_samples: Annotated[
        int | None, typer.Option(min=1, help="Only the first N conversations.")
    ] = None,
    data_dir: DataDirOption = None,
    json_out: JsonOption = None,
) -> None:
    """Retrieval benchmark on LoCoMo: recall@k, hit@10, MRR and latency per variant."""
    run = _Run(ctx, data_dir, json_out)
    from tribal_memory.bench.locomo import run_locomo_bench

    report = run_locomo_bench(path, out, limit_samples=limit_samples, progress=not run.json)
    if run.json:
        run.emit(report)
        return
    table = Table(
        "variant", *_BENCH_COLUMNS, title=f"{path.name}: {report.get('n_questions')} questions"
    )
    for name, metrics in report.get("variants", {}).items():
        table.add_row(name, *(_metric(metrics.get(column), column) for column in _BENCH_COLUMNS))
    run.out.print(table)
    run.out.print(f"ingest: {report.get('ingest_per_s')} memories/s")
    if out is not None:
        run.out.print(f"report written to {out}")


# -- output -------------------------------------------------------------------------


def _json_default(value: object) -> object:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, tuple | set | frozenset):
        return list(value)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def _memory_dict(memory: Memory) -> dict[str, Any]:
    return dataclasses.asdict(memory)


def _relation_dict(relation: Relation) -> dict[str, Any]:
    return dataclasses.asdict(relation)


def _capture_dict(result: CaptureResult) -> dict[str, Any]:
    return {
        "status": result.status,
        "near_duplicate_of": result.near_duplicate_of,
        "near_duplicate_score": result.near_duplicate_score,
        **_memory_dict(result.memory),
    }


def _neighbor_dict(neighbor: Neighbor) -> dict[str, Any]:
    return {
        "steps": neighbor.steps,
        "via": _relation_dict(neighbor.via),
        **_memory_dict(neighbor.memory),
    }


def _capture_line(result: CaptureResult) -> str:
    line = f"{result.status} {result.memory.memory_id}"
    if result.near_duplicate_of is not None:
        line += (
            f" (near-duplicate of {result.near_duplicate_of}, "
            f"similarity {result.near_duplicate_score:.3f})"
        )
    return line


def _print_hits(run: _Run, result: SearchResult) -> None:
    """One JSON line per hit (rank, scores, mode, fallback and the memory) or a table."""
    if run.json:
        for hit in result.hits:
            run.emit(
                {
                    "rank": hit.rank,
                    "score": hit.score,
                    "vector_score": hit.vector_score,
                    "text_score": hit.text_score,
                    "mode": result.mode,
                    "fallback": result.fallback,
                    **_memory_dict(hit.memory),
                }
            )
        return
    fallback = f", fell back to {result.fallback}" if result.fallback else ""
    caption = f"{result.mode}{fallback}, {result.took_ms:.0f} ms"
    if not result.hits:
        run.out.print(f"no matches ({caption})")
        return
    table = _table("#", "score", "vector", "text", "owner", caption=caption)
    for hit in result.hits:
        table.add_row(
            str(hit.rank),
            f"{hit.score:.3f}",
            _score(hit.vector_score),
            _score(hit.text_score),
            hit.memory.owner,
            _snippet(hit.memory.content),
            hit.memory.memory_id,
        )
    run.out.print(table)


def _fields_table() -> Table:
    """A two-column name/value table without borders."""
    table = Table(show_header=False, box=None)
    table.add_column(style="bold", no_wrap=True)
    table.add_column(overflow="fold")
    return table


def _table(*columns: str, caption: str | None = None) -> Table:
    """A table of memories: ``columns``, then content and the full (folded, never cut) id."""
    table = Table(*columns, caption=caption)
    table.add_column("content", ratio=1, min_width=12)
    table.add_column("id", overflow="fold", min_width=9)
    return table


def _metric(value: object, column: str) -> str:
    if not isinstance(value, int | float):
        return "-"
    return f"{value:.1f}" if column.endswith("_ms") else f"{value:.3f}"


def _score(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _snippet(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _SNIPPET_CHARS else flat[: _SNIPPET_CHARS - 1] + "…"


def _plain(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, dict | list | tuple):
        return json.dumps(value, ensure_ascii=False, default=_json_default)
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value)


@contextmanager
def _progress(run: _Run, label: str, total: int) -> Iterator[Any]:
    """A progress bar on stderr (terminal only); yields ``advance(n)``."""
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=run.err,
        disable=not run.show_progress,
    ) as bar:
        task = bar.add_task(label, total=total)
        yield lambda n: bar.advance(task, n)


# -- errors and parsing -------------------------------------------------------------


def _parse_time(value: str | None, option: str) -> datetime | None:
    """An ISO 8601 time; naive times are taken as UTC."""
    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError as exc:
        raise typer.BadParameter(f"not an ISO 8601 time: {value!r}", param_hint=option) from exc
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _one_line(message: str) -> str:
    return " ".join(message.split())


def _fail(message: str) -> NoReturn:
    typer.echo(f"error: {_one_line(message)}", err=True)
    raise typer.Exit(1)


def _settings_error(exc: ValidationError) -> str:
    problems = [
        f"TRIBAL_{'_'.join(str(part) for part in error['loc']).upper()}: {error['msg']}"
        for error in exc.errors()
    ]
    return "invalid setting " + "; ".join(problems)


def main() -> None:
    """Entry point of the ``tribal-memory`` console script."""
    app()

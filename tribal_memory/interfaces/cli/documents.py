"""Documents on the command line: ``ingest`` (once or ``--watch``) and ``documents``.

``ingest`` keeps documents in sync through the document index: a file whose
content did not change since it was last ingested is skipped, a changed one has
its chunks replaced. LoCoMo conversations (``.json``) are captured as before.
A file that cannot be read as a document (not UTF-8, a corrupt,
password-protected or text-less PDF, over the size limits) is reported on
stderr as ``error: <path>: <reason>`` and counted as ``failed``; the other
files are ingested all the same and the command exits with status 1.
With ``--url`` each file is sent to that server (``POST /v1/documents``);
``--watch`` needs the data dir.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from tribal_memory.base.errors import InvalidInput, TooLarge
from tribal_memory.base.models import DocumentInfo, DocumentResult
from tribal_memory.documents.ingest import (
    IngestCounts,
    IngestPlan,
    default_root,
    plan_ingest,
)
from tribal_memory.documents.sync import FileOutcome
from tribal_memory.interfaces.cli.output import Output, one_line
from tribal_memory.interfaces.cli.root import app
from tribal_memory.interfaces.cli.run import Run, with_run


class Format(StrEnum):
    """Input formats of ``ingest``."""

    auto = "auto"
    text = "text"
    locomo = "locomo"


class _Reporter:
    """Counts each file's outcome and prints it: a JSON line, or a line for a change."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self.counts = IngestCounts()

    def __call__(self, outcome: FileOutcome) -> None:
        self.counts.add(outcome)
        if outcome.error is not None:
            typer.echo(f"error: {one_line(outcome.error)}", err=True)
        result = outcome.result
        text = [_document_line(result)] if result and result.status != "unchanged" else []
        self.run.show(Output([_outcome_dict(outcome)], text, soft_wrap=True))


def _document_line(result: DocumentResult) -> str:
    """``created docs/a.md (alice): 4 chunks, 4 added, 0 removed``."""
    return (
        f"{result.status} {result.path} ({result.owner}): {result.chunks} chunks, "
        f"{result.added} added, {result.removed} removed"
    )


def _outcome_dict(outcome: FileOutcome) -> dict[str, Any]:
    if outcome.result is not None:
        return dataclasses.asdict(outcome.result)
    document = outcome.file
    return {
        "path": document.path,
        "owner": document.owner,
        "status": "failed",
        "error": outcome.error,
    }


@app.command()
@with_run(remote=True)
def ingest(
    run: Run,
    paths: Annotated[list[Path], typer.Argument(help="Files or directories (recursive).")],
    owner: Annotated[
        str | None,
        typer.Option(
            "--owner",
            "-o",
            help="Owner of every document. Default: in a directory, the first folder names "
            "the owner (shared/ and files at the top: shared); a file named here: shared.",
        ),
    ] = None,
    format: Annotated[
        Format,
        typer.Option(
            help="auto: .md/.markdown/.txt/.pdf as documents, a .json file named here as LoCoMo."
        ),
    ] = Format.auto,
    root: Annotated[
        Path | None,
        typer.Option(
            help="Record document paths relative to this. Default: relative to the directory "
            "given (a file named on its own: to the current directory)."
        ),
    ] = None,
    watch: Annotated[
        bool,
        typer.Option(
            "--watch", help="Keep the one directory given in sync until Ctrl-C (or --max-seconds)."
        ),
    ] = False,
    max_seconds: Annotated[
        float | None,
        typer.Option(min=0.0, help="With --watch: stop after this many seconds."),
    ] = None,
) -> None:
    """Ingest documents (skipping unchanged ones) or LoCoMo conversations.

    Prints one JSON line per file and a summary line (or, on a terminal, the
    changed files and a summary). Exit status 1 when a file failed.
    """
    if watch:
        if run.url is not None:
            raise InvalidInput("--watch keeps a data dir in sync: run it without --url")
        _watch(run, paths, owner=owner, root=root, fmt=format, max_seconds=max_seconds)
        return
    if max_seconds is not None:
        raise typer.BadParameter("only with --watch", param_hint="--max-seconds")
    started = time.perf_counter()
    plan = plan_ingest(paths, owner=owner, root=root, fmt=format.value)
    reporter = _Reporter(run)
    if run.url is not None:
        turns_created = _ingest_over_http(run, plan, reporter)
    else:
        service = run.service()
        with run.progress("ingesting", len(plan.documents)) as advance:
            service.ingest_files(plan.documents, report=reporter, advance=advance)
        with run.progress("capturing turns", len(plan.turns)) as advance:
            turns_created = service.capture_all(plan.turns, advance=advance)
    summary = _summary(plan, reporter.counts, turns_created, time.perf_counter() - started)
    run.show(Output([summary], [_summary_line(summary)], soft_wrap=True))
    if reporter.counts.failed:
        raise typer.Exit(1)


TURNS_PER_REQUEST = 100
"""LoCoMo turns sent in one batch capture over HTTP."""


def _ingest_over_http(run: Run, plan: IngestPlan, report: _Reporter) -> int:
    """Send each planned file to the server at ``--url``, then the turns; how many turns were new.

    As in process, a file that cannot be read or that the server refuses as
    input (400, 413) is an outcome with an error; any other error stops the run.
    """
    api = run.api()
    with run.progress("ingesting", len(plan.documents)) as advance:
        for document in plan.documents:
            try:
                result = api.ingest_document(
                    document.path, document.file.read_bytes(), owner=document.owner
                )
                outcome = FileOutcome(document, result)
            except OSError as exc:
                outcome = FileOutcome(document, error=f"{document.file}: {exc.strerror or exc}")
            except (InvalidInput, TooLarge) as exc:
                outcome = FileOutcome(document, error=exc.detail)
            report(outcome)
            advance(1)
    created = 0
    with run.progress("capturing turns", len(plan.turns)) as advance:
        for offset in range(0, len(plan.turns), TURNS_PER_REQUEST):
            batch = plan.turns[offset : offset + TURNS_PER_REQUEST]
            created += sum(r.status == "created" for r in api.capture_batch(batch))
            advance(len(batch))
    return created


def _summary(
    plan: IngestPlan, counts: IngestCounts, turns_created: int, seconds: float
) -> dict[str, Any]:
    """The summary line: files, skipped, counts per outcome, chunks, turns, seconds."""
    return {
        "files": len(plan.documents) + len(plan.conversations),
        "skipped": len(plan.skipped),
        **{name: value for name, value in dataclasses.asdict(counts).items() if name != "deleted"},
        "turns": len(plan.turns),
        "turns_created": turns_created,
        "seconds": round(seconds, 3),
    }


def _summary_line(summary: dict[str, Any]) -> str:
    line = (
        f"{summary['files']} file{'' if summary['files'] == 1 else 's'}: "
        f"{summary['created']} created, {summary['updated']} updated, "
        f"{summary['unchanged']} unchanged, {summary['failed']} failed "
        f"({summary['skipped']} skipped); {summary['chunks_added']} chunks added, "
        f"{summary['chunks_removed']} removed"
    )
    if summary["turns"]:
        line += f"; {summary['turns']} LoCoMo turns, {summary['turns_created']} new"
    return f"{line} in {summary['seconds']:.1f} s"


def _watch(
    run: Run,
    paths: list[Path],
    *,
    owner: str | None,
    root: Path | None,
    fmt: Format,
    max_seconds: float | None,
) -> None:
    """``ingest --watch DIR``: sync DIR, then follow its changes until Ctrl-C.

    Paths are relative to ``root`` (default DIR).
    """
    if len(paths) != 1 or not paths[0].is_dir():
        raise typer.BadParameter("--watch takes exactly one directory", param_hint="PATHS")
    if fmt == Format.locomo:
        raise typer.BadParameter("--watch reads documents, not LoCoMo", param_hint="--format")
    directory = paths[0]
    reporter = _Reporter(run)

    def ready() -> None:
        typer.echo(f"watching {directory} (Ctrl-C to stop)", err=True)

    # Ctrl-C ends watching; whatever it interrupted is repaired by the next ingest
    # of that file.
    with contextlib.suppress(KeyboardInterrupt):
        run.service().watch_directory(
            directory,
            owner=owner,
            root=root or default_root(directory),
            report=reporter,
            max_seconds=max_seconds,
            ready=ready,
        )
    counts = reporter.counts
    typer.echo(
        f"stopped watching {directory}: {counts.created} created, {counts.updated} updated, "
        f"{counts.deleted} deleted, {counts.failed} failed",
        err=True,
    )


@app.command()
@with_run(remote=True)
def documents(
    run: Run,
    owner: Annotated[
        str | None, typer.Option("--owner", "-o", help="Only this owner's and shared documents.")
    ] = None,
) -> Output:
    """List ingested documents: path, owner, format, chunks, size, content hash."""
    return _documents_output(run.api().documents(owner=owner))


def _documents_output(found: list[DocumentInfo]) -> Output:
    lines = [dataclasses.asdict(info) for info in found]
    if not found:
        return Output(lines, ["no documents"])
    table = Table("path", "owner", "format", "chunks", "bytes", "ingested")
    for info in found:
        table.add_row(
            info.path,
            info.owner,
            info.format,
            str(len(info.chunk_ids)),
            str(info.byte_size),
            info.ingested_at.strftime("%Y-%m-%d %H:%M"),
        )
    return Output(lines, [table])

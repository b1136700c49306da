"""Documents on the command line: ``ingest`` (once or ``--watch``) and ``documents``.

``ingest`` keeps documents in sync through the document index: a file whose
content did not change since it was last ingested is skipped, a changed one has
its chunks replaced. LoCoMo conversations (``.json``) are captured as before.
A file that cannot be read as a document (not UTF-8, a corrupt,
password-protected or text-less PDF, over the size limits) is reported on
stderr as ``error: <path>: <reason>`` and counted as ``failed``; the other
files are ingested all the same and the command exits with status 1.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from tribal_memory.base.models import MemoryInput
from tribal_memory.documents.parsing import iter_paths
from tribal_memory.documents.sync import DocumentFile, FileOutcome, document_files, ingest_file
from tribal_memory.interfaces.cli.output import _document_line, _one_line, _progress
from tribal_memory.interfaces.cli.root import DataDirOption, JsonOption, _Run, app

if TYPE_CHECKING:
    from tribal_memory.service.memory_service import MemoryService

INGEST_BATCH = 64
"""Memories per ``capture_batch`` call while ingesting LoCoMo (capped by ``max_batch_size``)."""


class Format(StrEnum):
    """Input formats of ``ingest``."""

    auto = "auto"
    text = "text"
    locomo = "locomo"


@dataclasses.dataclass
class _Tally:
    """Counts over one ``ingest`` run."""

    created: int = 0
    updated: int = 0
    unchanged: int = 0
    deleted: int = 0
    failed: int = 0
    chunks_added: int = 0
    chunks_removed: int = 0

    def add(self, outcome: FileOutcome) -> None:
        if outcome.result is None:
            self.failed += 1
            return
        result = outcome.result
        setattr(self, result.status, getattr(self, result.status) + 1)
        self.chunks_added += result.added
        self.chunks_removed += result.removed


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


class _Reporter:
    """Prints each file's outcome: a JSON line, or a line on a terminal (changes only)."""

    def __init__(self, run: _Run, *, unchanged: bool) -> None:
        self.run = run
        self.unchanged = unchanged
        self.tally = _Tally()

    def __call__(self, outcome: FileOutcome) -> None:
        self.tally.add(outcome)
        if outcome.error is not None:
            typer.echo(f"error: {_one_line(outcome.error)}", err=True)
        if self.run.json:
            self.run.emit(_outcome_dict(outcome))
        elif outcome.result is not None and (
            self.unchanged or outcome.result.status != "unchanged"
        ):
            self.run.out.print(_document_line(outcome.result), soft_wrap=True)


@app.command()
def ingest(
    ctx: typer.Context,
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
    data_dir: DataDirOption = None,
    json_out: JsonOption = None,
) -> None:
    """Ingest documents (skipping unchanged ones) or LoCoMo conversations.

    Prints one JSON line per file and a summary line (or, on a terminal, the
    changed files and a summary). Exit status 1 when a file failed.
    """
    run = _Run(ctx, data_dir, json_out)
    if watch:
        _watch(run, paths, owner=owner, root=root, fmt=format, max_seconds=max_seconds)
        return
    if max_seconds is not None:
        raise typer.BadParameter("only with --watch", param_hint="--max-seconds")
    started = time.perf_counter()
    conversations, rest = _split_locomo(paths, format)
    documents: list[DocumentFile] = []
    skipped: list[Path] = []
    if format == Format.locomo:
        skipped = rest
    else:
        for path in rest:
            base = root or (path if path.is_dir() else Path.cwd())
            found, other = document_files([path], owner=owner, root=base)
            documents += found
            skipped += other
    turns = _load_locomo(conversations)
    reporter = _Reporter(run, unchanged=False)
    with run.service() as service:
        with _progress(run, "ingesting", len(documents)) as advance:
            for document in documents:
                reporter(ingest_file(service, document))
                advance(1)
        turn_counts = _capture_turns(run, service, turns)
        if reporter.tally.chunks_added or reporter.tally.chunks_removed:
            service.optimize()  # fold the new rows into the full-text index
    tally = reporter.tally
    summary = {
        "files": len(documents) + len(conversations),
        "skipped": len(skipped),
        **{name: value for name, value in dataclasses.asdict(tally).items() if name != "deleted"},
        "turns": len(turns),
        "turns_created": turn_counts["created"],
        "seconds": round(time.perf_counter() - started, 3),
    }
    if run.json:
        run.emit(summary)
    else:
        run.out.print(_summary_line(summary), soft_wrap=True)
    if tally.failed:
        raise typer.Exit(1)


def _split_locomo(paths: list[Path], fmt: Format) -> tuple[list[Path], list[Path]]:
    """LoCoMo files (``--format locomo``: every .json found; auto: .json files named) and the rest.

    Raises:
        InvalidInput: a path does not exist.
    """
    if fmt == Format.text:
        return [], list(paths)
    if fmt == Format.locomo:
        found = list(iter_paths(paths))
        return [p for p in found if p.suffix.lower() == ".json"], [
            p for p in found if p.suffix.lower() != ".json"
        ]
    named = [p for p in paths if p.is_file() and p.suffix.lower() == ".json"]
    return named, [p for p in paths if p not in named]


def _load_locomo(paths: list[Path]) -> list[MemoryInput]:
    """Every dialog turn of the LoCoMo files (read before the store is opened).

    Raises:
        InvalidInput: a file that is not LoCoMo JSON.
    """
    from tribal_memory.documents import iter_memories, load_locomo

    return [memory for path in paths for memory in iter_memories(load_locomo(path))]


def _capture_turns(run: _Run, service: MemoryService, items: list[MemoryInput]) -> dict[str, int]:
    """Capture in batches with a progress bar; counts of created and existing memories."""
    counts = {"created": 0, "exists": 0}
    batch = min(INGEST_BATCH, service.settings.max_batch_size)
    with _progress(run, "capturing turns", len(items)) as advance:
        for offset in range(0, len(items), batch):
            for result in service.capture_batch(items[offset : offset + batch]):
                counts[result.status] += 1
            advance(min(batch, len(items) - offset))
    if counts["created"]:
        service.optimize()
    return counts


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
    run: _Run,
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
    from tribal_memory.documents.sync import watch_directory

    if len(paths) != 1 or not paths[0].is_dir():
        raise typer.BadParameter("--watch takes exactly one directory", param_hint="PATHS")
    if fmt == Format.locomo:
        raise typer.BadParameter("--watch reads documents, not LoCoMo", param_hint="--format")
    directory = paths[0]
    root = root or directory
    reporter = _Reporter(run, unchanged=False)

    def ready() -> None:
        typer.echo(f"watching {directory} (Ctrl-C to stop)", err=True)

    # Ctrl-C ends watching (the service is closed first); whatever it interrupted is
    # repaired by the next ingest of that file.
    with contextlib.suppress(KeyboardInterrupt), run.service() as service:
        watch_directory(
            service,
            directory,
            owner=owner,
            root=root,
            report=reporter,
            max_seconds=max_seconds,
            ready=ready,
        )
    tally = reporter.tally
    typer.echo(
        f"stopped watching {directory}: {tally.created} created, {tally.updated} updated, "
        f"{tally.deleted} deleted, {tally.failed} failed",
        err=True,
    )


@app.command()
def documents(
    ctx: typer.Context,
    owner: Annotated[
        str | None, typer.Option("--owner", "-o", help="Only this owner's and shared documents.")
    ] = None,
    data_dir: DataDirOption = None,
    json_out: JsonOption = None,
) -> None:
    """List ingested documents: path, owner, format, chunks, size, content hash."""
    from rich.table import Table

    run = _Run(ctx, data_dir, json_out)
    with run.service() as service:
        found = service.documents(owner=owner)
    if run.json:
        for info in found:
            run.emit(dataclasses.asdict(info))
        return
    if not found:
        run.out.print("no documents")
        return
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
    run.out.print(table)

"""``export`` and ``import``: move memories, relations and learned data between instances."""

from __future__ import annotations

import dataclasses
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Annotated

import typer

from tribal_memory.interfaces.cli.output import Output
from tribal_memory.interfaces.cli.root import app
from tribal_memory.interfaces.cli.run import Run, with_run
from tribal_memory.ops.transfer import ImportResult, write_export, write_export_file

STDIO = "-"
"""The FILE argument meaning stdout (export) or stdin (import)."""


@app.command("export")
@with_run(remote=True)
def export_(
    run: Run,
    file: Annotated[
        str, typer.Argument(metavar="FILE.jsonl", help="Where to write the export; - for stdout.")
    ],
    owner: Annotated[
        str | None,
        typer.Option(
            "--owner", "-o", help="Only this owner's and shared memories and their learned data."
        ),
    ] = None,
) -> Output | None:
    """Write memories, relations and learned data as JSON lines (read back by import).

    A file is written next to FILE and renamed once complete, so FILE is
    never left half written.
    """
    service = run.api()
    with run.progress("exporting", None) as advance:
        # A bad owner raises here, before a file is opened.
        lines = service.export_jsonl(owner=owner, progress=advance)
        if file == STDIO:
            write_export(lines, sys.stdout)
            return None
        counts = write_export_file(lines, Path(file))
    return Output(
        [{"file": file, **counts}],
        [
            f"exported {plural(counts['memory'], 'memory', 'memories')}, "
            f"{plural(counts['relation'], 'relation')} and "
            f"{plural(counts['row'], 'learned row')} to {file}"
        ],
    )


@contextmanager
def _source(file: str) -> Iterator[Path | IO[bytes]]:
    """FILE as a path, or stdin copied to a temporary file (import reads it twice)."""
    if file != STDIO:
        yield Path(file)
        return
    with tempfile.TemporaryFile() as spool:
        shutil.copyfileobj(sys.stdin.buffer, spool)
        spool.seek(0)
        yield spool


@app.command("import")
@with_run(remote=True)
def import_(
    run: Run,
    file: Annotated[
        str, typer.Argument(metavar="FILE.jsonl", help="An export to read; - for stdin.")
    ],
    replace: Annotated[
        bool,
        typer.Option(
            "--replace",
            help="A memory stored here with other fields than the file's takes the file's "
            "(default: the stored one stays, reported as a conflict).",
        ),
    ] = False,
) -> Output:
    """Read an export: keeps ids and times, re-embeds from another model, skips what exists.

    The whole file is checked first; a bad line or a truncated file imports nothing.
    """
    written = 0
    with _source(file) as source:
        service = run.api()
        with run.progress("importing", None) as advance:

            def progress(done: int, total: int) -> None:
                nonlocal written
                advance(done - written, total)
                written = done

            result = service.import_jsonl(
                source, progress=progress, on_conflict="replace" if replace else "keep"
            )
    return Output([dataclasses.asdict(result)], [_import_line(result)])


def _import_line(result: ImportResult) -> str:
    rows = {"created": 0, "skipped": 0, "orphaned": 0}
    for counts in result.rows.values():
        for name in rows:
            rows[name] += getattr(counts, name)
    memories, relations = result.memories, result.relations
    line = (
        f"imported {plural(memories.created, 'memory', 'memories')} "
        f"({memories.skipped} already here), "
        f"{plural(relations.created, 'relation')} ({relations.skipped} already here), "
        f"{plural(rows['created'], 'learned row')} ({rows['skipped']} already here)"
    )
    orphaned = result.relations.orphaned + rows["orphaned"]
    if orphaned:
        line += f"; {orphaned} left out because their memories are missing"
    if result.reembedded:
        line += f"; {result.reembedded} re-embedded (the file's model: {result.embedding_model})"
    if result.conflicts:
        kept = "replaced by the file's" if result.replaced else "kept (--replace takes the file's)"
        line += f"; {plural(result.conflicts, 'memory', 'memories')} differ from the file: {kept}"
    return line


def plural(count: int, noun: str, nouns: str | None = None) -> str:
    """``1 memory``, ``2 memories`` (``nouns`` default: ``noun`` + s)."""
    return f"{count} {noun if count == 1 else nouns or noun + 's'}"

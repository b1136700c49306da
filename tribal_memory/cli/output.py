"""Output: JSON lines, rich tables, snippets, progress bars and one-line errors."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import typer
from pydantic import ValidationError
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from tribal_memory.models import CaptureResult, Memory, Neighbor, Relation, SearchResult

if TYPE_CHECKING:
    from tribal_memory.cli.root import _Run

_SNIPPET_CHARS = 80


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


# -- errors -------------------------------------------------------------------------


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

"""Output: JSON lines or rich tables, snippets, progress bars and one-line errors.

A command returns an :class:`Output` (its JSON lines and what a terminal shows
instead); :meth:`Printer.show` prints one or the other. This module knows
nothing of settings or the service.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import typer
from rich.console import Console, RenderableType
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from tribal_memory.base.graph import Neighbor
from tribal_memory.base.models import CaptureResult, Memory
from tribal_memory.base.results import ChunkContext, Hit, SearchResult

if TYPE_CHECKING:
    from tribal_memory.learned.stats import RetrievalStats, UsageCounts

_SNIPPET_CHARS = 80

Advance = Callable[..., None]
"""``advance(n, total=None)``: a progress bar moves on by ``n`` (and learns its total)."""


@dataclasses.dataclass(frozen=True)
class Output:
    """What a command prints: JSON ``lines``, or on a terminal the ``text`` (in order).

    Attributes:
        lines: One JSON object per line (``--json``, or stdout not a terminal).
        text: Strings and rich renderables (tables) for a terminal; empty: nothing.
        soft_wrap: Print the text's lines whole, never wrapped at the terminal's width.
    """

    lines: Sequence[dict[str, Any]]
    text: Sequence[RenderableType] = ()
    soft_wrap: bool = False


class Printer:
    """Prints JSON lines or text on stdout, and progress bars on stderr (terminal only).

    Args:
        json: JSON lines instead of text.
    """

    def __init__(self, *, json: bool) -> None:
        self.json = json
        # markup=False: memory text is printed as it is, never read as rich markup.
        self.out = Console(markup=False, highlight=False)
        self.err = Console(stderr=True, markup=False, highlight=False)

    def emit(self, obj: dict[str, Any]) -> None:
        """One JSON line on stdout."""
        typer.echo(json.dumps(obj, ensure_ascii=False, default=_json_default))

    def show(self, output: Output) -> None:
        """``output``'s JSON lines, or its text."""
        if self.json:
            for line in output.lines:
                self.emit(line)
            return
        for part in output.text:
            self.out.print(part, soft_wrap=output.soft_wrap)

    @property
    def show_progress(self) -> bool:
        """True when progress bars are drawn: text output and stderr on a terminal."""
        return not self.json and sys.stderr.isatty()

    @contextmanager
    def progress(self, label: str, total: int | None) -> Iterator[Advance]:
        """A progress bar on stderr (terminal only); yields ``advance(n, total=None)``.

        ``total`` None: unknown until an ``advance`` call gives it.
        """
        with Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=self.err,
            disable=not self.show_progress,
        ) as bar:
            task = bar.add_task(label, total=total)

            def advance(n: int, total: int | None = None) -> None:
                if total is not None:
                    bar.update(task, total=total)
                bar.advance(task, n)

            yield advance


def _json_default(value: object) -> object:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, tuple | set | frozenset):
        return list(value)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


# -- memories -----------------------------------------------------------------------


def memory_dict(memory: Memory) -> dict[str, Any]:
    """A memory's fields, as its JSON line shows them."""
    return dataclasses.asdict(memory)


def capture_dict(result: CaptureResult) -> dict[str, Any]:
    """Status and near-duplicate of a capture, then the memory."""
    return {
        "status": result.status,
        "near_duplicate_of": result.near_duplicate_of,
        "near_duplicate_score": result.near_duplicate_score,
        **memory_dict(result.memory),
    }


def neighbor_dict(neighbor: Neighbor) -> dict[str, Any]:
    """Hops and the relation followed, then the memory."""
    return {
        "steps": neighbor.steps,
        "via": dataclasses.asdict(neighbor.via),
        **memory_dict(neighbor.memory),
    }


def capture_line(result: CaptureResult) -> str:
    """``created ID`` (with the near-duplicate and its similarity, when there is one)."""
    line = f"{result.status} {result.memory.memory_id}"
    if result.near_duplicate_of is not None:
        line += (
            f" (near-duplicate of {result.near_duplicate_of}, "
            f"similarity {result.near_duplicate_score:.3f})"
        )
    return line


def fields_output(fields: dict[str, Any]) -> Output:
    """One JSON line of ``fields``; on a terminal a name/value table."""
    table = fields_table()
    for name, value in fields.items():
        table.add_row(name, _plain(value))
    return Output([fields], [table])


# -- search hits --------------------------------------------------------------------


def hits_output(result: SearchResult, *, context: bool = False) -> Output:
    """One JSON line per hit, or a table followed by the retrieval id (``--feedback``).

    A JSON line holds the rank, scores and learned flags of the hit, the
    result's mode, fallback, variant and retrieval id, and the memory; with
    ``context``, also ``"context": {"parent", "previous", "next"}`` (memories
    or null; null as a whole for a hit without any). On a terminal the context
    follows the hits in a table of its own.
    """
    contexts = {entry.memory_id: entry for entry in result.context}
    lines = [
        {
            "rank": hit.rank,
            "score": hit.score,
            "vector_score": hit.vector_score,
            "text_score": hit.text_score,
            "rank_score": hit.rank_score,
            "cosine": hit.cosine,
            "cached": hit.cached,
            "expanded_from": hit.expanded_from,
            "boost": hit.boost,
            "anchor_match": hit.anchor_match,
            "mode": result.mode,
            "mode_reason": result.mode_reason,
            "fallback": result.fallback,
            "variant": result.variant,
            "retrieval_id": result.retrieval_id,
            **memory_dict(hit.memory),
            **({"context": _context_dict(contexts.get(hit.memory.memory_id))} if context else {}),
        }
        for hit in result.hits
    ]
    text: list[RenderableType] = [_hits_table(result)]
    if context and result.context:
        text.append(_context_table(result))
    if result.retrieval_id is not None:
        text.append(
            f"retrieval id {result.retrieval_id} "
            f"(tribal-memory feedback {result.retrieval_id} USED_ID ...)"
        )
    return Output(lines, text)


def _hits_table(result: SearchResult) -> RenderableType:
    fallback = f", fell back to {result.fallback}" if result.fallback else ""
    cached = ", cached" if result.cached else ""
    reason = f" ({result.mode_reason})" if result.mode_reason else ""
    caption = f"{result.mode}{reason}{fallback}, {result.variant}{cached}, {result.took_ms:.0f} ms"
    if not result.hits:
        return f"no matches ({caption})"
    learned = any(_learned_note(hit) for hit in result.hits)
    columns = ("#", "score", "vector", "text", *(("learned",) if learned else ()), "owner")
    table = memories_table(*columns, caption=caption)
    for hit in result.hits:
        note = (_learned_note(hit) or "-",) if learned else ()
        table.add_row(
            str(hit.rank),
            f"{hit.score:.3f}",
            _score(hit.vector_score),
            _score(hit.text_score),
            *note,
            hit.memory.owner,
            snippet(hit.memory.content),
            hit.memory.memory_id,
        )
    return table


def _context_dict(context: ChunkContext | None) -> dict[str, Any] | None:
    if context is None:
        return None
    return {
        name: None if memory is None else memory_dict(memory)
        for name, memory in (
            ("parent", context.parent),
            ("previous", context.previous),
            ("next", context.next),
        )
    }


def _context_table(result: SearchResult) -> Table:
    """The parent and neighbouring chunks of each chunk hit, under the hits table."""
    ranks = {hit.memory.memory_id: hit.rank for hit in result.hits}
    table = Table("#", "context", "content", "id", title="context of document chunks")
    for entry in result.context:
        for name, memory in (
            ("parent", entry.parent),
            ("previous", entry.previous),
            ("next", entry.next),
        ):
            if memory is not None:
                table.add_row(
                    str(ranks.get(entry.memory_id, "-")),
                    name,
                    snippet(memory.content),
                    memory.memory_id,
                )
    return table


def _learned_note(hit: Hit) -> str:
    """What the learned layer did to a hit, e.g. ``boost +0.120, anchor 1.00`` ('' when nothing)."""
    notes = ["cached"] if hit.cached else []
    if hit.boost:
        notes.append(f"boost {hit.boost:+.3f}")
    if hit.anchor_match is not None:
        notes.append(f"anchor {hit.anchor_match:.2f}")
    if hit.expanded_from is not None:
        notes.append(f"via {snippet(hit.expanded_from)!r}")
    return ", ".join(notes)


# -- the learned layer ------------------------------------------------------------


def retrieval_stats_output(stats: RetrievalStats) -> Output:
    """One JSON line (each curve point's counts flattened in, as the API does), or tables.

    On a terminal: usage per variant and per period, then the learned-data counts.
    """
    result = dataclasses.asdict(stats)
    result["learning_curve"] = [
        {"period": point.period, **dataclasses.asdict(point.counts)}
        for point in stats.learning_curve
    ]
    usage = Table("", "retrievals", "with feedback", "usage rate", "used/returned", "cache hits")
    for name, counts in [("overall", stats.overall), *stats.variants.items()]:
        usage.add_row(name, *_usage_cells(counts))
    usage.add_section()  # the learning curve, oldest period first
    for point in stats.learning_curve:
        usage.add_row(point.period, *_usage_cells(point.counts))
    lift = "-" if stats.expansion_lift is None else f"{stats.expansion_lift:+.3f}"
    fields = fields_table()
    for name, value in (
        ("expansion lift", f"{lift} over {stats.expanded_hits} expanded hits"),
        ("cache entries", f"{stats.cache_entries} ({stats.cache_eligible} answering)"),
        ("feedback weights", str(stats.weights)),
        ("anchors", str(stats.anchors)),
        ("llm calls", f"{stats.llm_calls} ({stats.llm_failures} failed)"),
    ):
        fields.add_row(name, value)
    return Output([result], [usage, fields])


def _usage_cells(counts: UsageCounts) -> tuple[str, ...]:
    return (
        str(counts.retrievals),
        str(counts.with_feedback),
        f"{counts.usage_rate:.0%}",
        f"{counts.retrieval_to_usage:.0%}",
        f"{counts.cache_hits} ({counts.cache_hit_rate:.0%})",
    )


# -- tables and cells -----------------------------------------------------------------


def fields_table() -> Table:
    """A two-column name/value table without borders."""
    table = Table(show_header=False, box=None)
    table.add_column(style="bold", no_wrap=True)
    table.add_column(overflow="fold")
    return table


def memories_table(*columns: str, caption: str | None = None) -> Table:
    """A table of memories: ``columns``, then content and the full (folded, never cut) id."""
    table = Table(*columns, caption=caption)
    table.add_column("content", ratio=1, min_width=12)
    table.add_column("id", overflow="fold", min_width=9)
    return table


def _score(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def snippet(text: str) -> str:
    """``text`` on one line, cut to 80 characters (ending in an ellipsis when cut)."""
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


# -- errors -------------------------------------------------------------------------


def one_line(message: str) -> str:
    """``message`` with every run of whitespace (newlines too) as one space."""
    return " ".join(message.split())


def fail(message: str) -> NoReturn:
    """Print ``error: <message>`` on stderr and exit with status 1."""
    typer.echo(f"error: {one_line(message)}", err=True)
    raise typer.Exit(1)

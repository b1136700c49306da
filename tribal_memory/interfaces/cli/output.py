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

from tribal_memory.base.models import (
    Anchor,
    CaptureResult,
    ChunkContext,
    DocumentResult,
    FeedbackResult,
    Hit,
    Memory,
    Neighbor,
    Relation,
    SearchResult,
)

if TYPE_CHECKING:
    from tribal_memory.interfaces.cli.root import _Run
    from tribal_memory.learned.stats import RetrievalStats, UsageCounts

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


def _context_dict(context: ChunkContext | None) -> dict[str, Any] | None:
    if context is None:
        return None
    return {
        name: None if memory is None else _memory_dict(memory)
        for name, memory in (
            ("parent", context.parent),
            ("previous", context.previous),
            ("next", context.next),
        )
    }


def _print_context(run: _Run, result: SearchResult) -> None:
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
                    _snippet(memory.content),
                    memory.memory_id,
                )
    run.out.print(table)


def _print_hits(run: _Run, result: SearchResult, *, context: bool = False) -> None:
    """One JSON line per hit, or a table followed by the retrieval id (``--feedback``).

    A JSON line holds the rank, scores and learned flags of the hit, the
    result's mode, fallback, variant and retrieval id, and the memory; with
    ``context``, also ``"context": {"parent", "previous", "next"}`` (memories
    or null; null as a whole for a hit without any). On a terminal the context
    follows the hits in a table of its own.
    """
    contexts = {entry.memory_id: entry for entry in result.context}
    if run.json:
        for hit in result.hits:
            extra = (
                {"context": _context_dict(contexts.get(hit.memory.memory_id))} if context else {}
            )
            run.emit(
                {
                    "rank": hit.rank,
                    "score": hit.score,
                    "vector_score": hit.vector_score,
                    "text_score": hit.text_score,
                    "cached": hit.cached,
                    "expanded_from": hit.expanded_from,
                    "boost": hit.boost,
                    "anchor_match": hit.anchor_match,
                    "mode": result.mode,
                    "fallback": result.fallback,
                    "variant": result.variant,
                    "retrieval_id": result.retrieval_id,
                    **_memory_dict(hit.memory),
                    **extra,
                }
            )
        return
    fallback = f", fell back to {result.fallback}" if result.fallback else ""
    cached = ", cached" if result.cached else ""
    caption = f"{result.mode}{fallback}, {result.variant}{cached}, {result.took_ms:.0f} ms"
    if not result.hits:
        run.out.print(f"no matches ({caption})")
    else:
        learned = any(_learned_note(hit) for hit in result.hits)
        columns = ("#", "score", "vector", "text", *(("learned",) if learned else ()), "owner")
        table = _table(*columns, caption=caption)
        for hit in result.hits:
            note = (_learned_note(hit) or "-",) if learned else ()
            table.add_row(
                str(hit.rank),
                f"{hit.score:.3f}",
                _score(hit.vector_score),
                _score(hit.text_score),
                *note,
                hit.memory.owner,
                _snippet(hit.memory.content),
                hit.memory.memory_id,
            )
        run.out.print(table)
    if context and result.context:
        _print_context(run, result)
    if result.retrieval_id is not None:
        run.out.print(
            f"retrieval id {result.retrieval_id} "
            f"(tribal-memory feedback {result.retrieval_id} USED_ID ...)"
        )


def _learned_note(hit: Hit) -> str:
    """What the learned layer did to a hit, e.g. ``boost +0.120, anchor 1.00`` ('' when nothing)."""
    notes = ["cached"] if hit.cached else []
    if hit.boost:
        notes.append(f"boost {hit.boost:+.3f}")
    if hit.anchor_match is not None:
        notes.append(f"anchor {hit.anchor_match:.2f}")
    if hit.expanded_from is not None:
        notes.append(f"via {_snippet(hit.expanded_from)!r}")
    return ", ".join(notes)


# -- documents --------------------------------------------------------------------------


def _document_line(result: DocumentResult) -> str:
    """``created docs/a.md (alice): 4 chunks, 4 added, 0 removed``."""
    return (
        f"{result.status} {result.path} ({result.owner}): {result.chunks} chunks, "
        f"{result.added} added, {result.removed} removed"
    )


# -- the learned layer -----------------------------------------------------------------


def _feedback_dict(result: FeedbackResult) -> dict[str, Any]:
    return dataclasses.asdict(result)


def _feedback_line(result: FeedbackResult) -> str:
    if result.duplicate:
        return f"feedback on {result.retrieval_id} was already recorded; nothing changed"
    anchors = result.anchors_created
    made = f", {anchors} anchor{'' if anchors == 1 else 's'} activated" if anchors else ""
    return (
        f"recorded feedback on {result.retrieval_id}: "
        f"{len(result.used)} used, {len(result.unused)} unused{made}"
    )


def _anchor_dict(anchor: Anchor) -> dict[str, Any]:
    return dataclasses.asdict(anchor)


def _anchors_table(anchors: list[Anchor]) -> Table:
    table = Table("text", "owner", "source", "confidence", "uses", "active")
    for anchor in anchors:
        table.add_row(
            anchor.text,
            anchor.owner,
            anchor.source,
            f"{anchor.confidence:.2f}",
            str(anchor.uses),
            "yes" if anchor.active else "no",
        )
    return table


def _retrieval_stats_dict(stats: RetrievalStats) -> dict[str, Any]:
    """:class:`RetrievalStats` as JSON, each curve point's counts flattened in (as the API does)."""
    result = dataclasses.asdict(stats)
    result["learning_curve"] = [
        {"period": point.period, **dataclasses.asdict(point.counts)}
        for point in stats.learning_curve
    ]
    return result


def _print_retrieval_stats(run: _Run, stats: RetrievalStats) -> None:
    """Usage per variant and per period as tables, then the learned-data counts."""
    usage = Table("", "retrievals", "with feedback", "usage rate", "used/returned", "cache hits")
    for name, counts in [("overall", stats.overall), *stats.variants.items()]:
        usage.add_row(name, *_usage_cells(counts))
    usage.add_section()  # the learning curve, oldest period first
    for point in stats.learning_curve:
        usage.add_row(point.period, *_usage_cells(point.counts))
    run.out.print(usage)
    lift = "-" if stats.expansion_lift is None else f"{stats.expansion_lift:+.3f}"
    fields = _fields_table()
    for name, value in (
        ("expansion lift", f"{lift} over {stats.expanded_hits} expanded hits"),
        ("cache entries", f"{stats.cache_entries} ({stats.cache_eligible} answering)"),
        ("feedback weights", str(stats.weights)),
        ("anchors", str(stats.anchors)),
        ("llm calls", f"{stats.llm_calls} ({stats.llm_failures} failed)"),
    ):
        fields.add_row(name, value)
    run.out.print(fields)


def _usage_cells(counts: UsageCounts) -> tuple[str, ...]:
    return (
        str(counts.retrievals),
        str(counts.with_feedback),
        f"{counts.usage_rate:.0%}",
        f"{counts.retrieval_to_usage:.0%}",
        f"{counts.cache_hits} ({counts.cache_hit_rate:.0%})",
    )


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
def _progress(run: _Run, label: str, total: int | None) -> Iterator[Any]:
    """A progress bar on stderr (terminal only); yields ``advance(n, total=None)``.

    ``total`` None: unknown until an ``advance`` call gives it.
    """
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=run.err,
        disable=not run.show_progress,
    ) as bar:
        task = bar.add_task(label, total=total)

        def advance(n: int, total: int | None = None) -> None:
            if total is not None:
                bar.update(task, total=total)
            bar.advance(task, n)

        yield advance


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

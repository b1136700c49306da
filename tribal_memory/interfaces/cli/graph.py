"""Graph and knowledge-management commands.

``intersection``, ``relate-batch``, ``memories`` (list with paging),
``clear-owner`` and ``search-vector``.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from tribal_memory.base.errors import InvalidInput
from tribal_memory.base.graph import CommonNeighbor, RelationInput
from tribal_memory.base.models import Memory, SearchFilters
from tribal_memory.interfaces.cli.options import (
    BlockOption,
    KindsOption,
    KOption,
    MinScoreOption,
    NearOption,
    OwnerOption,
    SourcesOption,
    StepsOption,
    TypeOption,
    filters,
    near,
)
from tribal_memory.interfaces.cli.output import (
    Output,
    hits_output,
    memories_table,
    memory_dict,
    snippet,
)
from tribal_memory.interfaces.cli.root import app
from tribal_memory.interfaces.cli.run import Run, with_run


def _read(source: str) -> str:
    """The text of ``source``: a file path, or ``-`` for stdin.

    Raises:
        InvalidInput: the file cannot be read.
    """
    if source == "-":
        return sys.stdin.read()
    try:
        return Path(source).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInput(f"cannot read {source}: {exc}") from exc


@app.command()
@with_run(remote=True)
def intersection(
    run: Run,
    memory_ids: Annotated[
        list[str], typer.Argument(metavar="ID...", help="2 to 16 memory ids.", show_default=False)
    ],
    steps: Annotated[int, typer.Option(min=1, max=5, help="Most hops from each.")] = 1,
    type: TypeOption = None,
    block: BlockOption = None,
    limit: Annotated[int | None, typer.Option(min=1, help="Most memories (default 100).")] = None,
    owner: OwnerOption = None,
) -> Output:
    """Memories within --steps hops of every one of the IDs (closest first; not the IDs)."""
    found = run.api().intersection(
        memory_ids, steps=steps, owner=owner, types=type or (), block=block or (), limit=limit
    )
    return _intersection_output(found)


def _intersection_output(found: list[CommonNeighbor]) -> Output:
    lines = [{"steps": list(common.steps), **memory_dict(common.memory)} for common in found]
    if not found:
        return Output(lines, ["nothing within reach of all of them"])
    table = memories_table("steps", "owner")
    for common in found:
        table.add_row(
            ",".join(str(s) for s in common.steps),
            common.memory.owner,
            snippet(common.memory.content),
            common.memory.memory_id,
        )
    return Output(lines, [table])


def _edges(text: str) -> list[RelationInput]:
    """Edges from JSON lines (or one JSON array) of ``{source_id, target_id, type, weight?}``.

    Raises:
        InvalidInput: a line that is not such an object (named by its position).
    """
    stripped = text.strip()
    try:
        items: list[Any] = (
            json.loads(stripped)
            if stripped.startswith("[")
            else [json.loads(line) for line in stripped.splitlines() if line.strip()]
        )
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"relations must be JSON lines or a JSON array: {exc}") from exc
    edges: list[RelationInput] = []
    for i, item in enumerate(items):
        try:
            weight = item.get("weight", 1.0)
            edge = RelationInput(
                str(item["source_id"]), str(item["target_id"]), str(item["type"]), float(weight)
            )
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise InvalidInput(
                f"relations[{i}]: expected {{source_id, target_id, type, weight?}} ({exc})"
            ) from exc
        edges.append(edge)
    return edges


@app.command("relate-batch")
@with_run(remote=True)
def relate_batch(
    run: Run,
    source: Annotated[
        str,
        typer.Argument(metavar="FILE", help="JSON lines or a JSON array of edges; - for stdin."),
    ],
    owner: OwnerOption = None,
) -> Output:
    """Add or re-weight many edges in one write; one bad edge rejects them all.

    Each edge is {"source_id", "target_id", "type", "weight"?}.
    """
    edges = _edges(_read(source))
    stored = run.api().relate_batch(edges, owner=owner)
    return Output([dataclasses.asdict(r) for r in stored], [f"stored {len(stored)} relations"])


@app.command()
@with_run(remote=True)
def memories(
    run: Run,
    owner: OwnerOption = None,
    include_shared: Annotated[
        bool, typer.Option("--shared/--no-shared", help="With --owner: also shared memories.")
    ] = True,
    tag: Annotated[list[str] | None, typer.Option("--tag", "-t", help="Has this tag.")] = None,
    kind: KindsOption = None,
    source: SourcesOption = None,
    since: Annotated[str | None, typer.Option(help="Not before this ISO 8601 time.")] = None,
    until: Annotated[str | None, typer.Option(help="Not after this ISO 8601 time.")] = None,
    limit: Annotated[int | None, typer.Option(min=1, help="Page size (default 100).")] = None,
    after: Annotated[
        str | None, typer.Option(metavar="ID", help="Start after this id (a page's next).")
    ] = None,
    every: Annotated[bool, typer.Option("--all", help="Read every page, not one.")] = False,
) -> Output:
    """List memories passing the filters by id, a page at a time (--all: every page).

    JSON: one line per memory, then {"next_after": ID or null}.
    """
    wanted = filters(
        owner,
        include_shared=include_shared,
        tags=tag,
        kinds=kind,
        sources=source,
        since=since,
        until=until,
    )
    service = run.api()
    found: list[Memory] = []
    while True:
        page = service.list_page(wanted, limit=limit, after=after)
        found += page.memories
        after = page.next_after
        if not every or after is None:
            break
    return _memories_output(found, after)


def _memories_output(found: list[Memory], next_after: str | None) -> Output:
    table = memories_table("owner", "kind")
    for memory in found:
        table.add_row(memory.owner, memory.kind, snippet(memory.content), memory.memory_id)
    more = [] if next_after is None else [f"more: --after {next_after}"]
    lines = [memory_dict(memory) for memory in found]
    return Output([*lines, {"next_after": next_after}], [table, *more])


@app.command("clear-owner")
@with_run(remote=True)
def clear_owner(
    run: Run,
    owner: Annotated[str, typer.Argument(metavar="OWNER", help="The owner to clear.")],
    confirm: Annotated[
        str | None,
        typer.Option(metavar="OWNER", help="Required: the owner's name again, to confirm."),
    ] = None,
) -> Output:
    """Delete every memory of OWNER with all that points at them, and its document records."""
    cleared = run.api().clear_owner(owner, confirm=confirm)
    return Output(
        [dataclasses.asdict(cleared)],
        [
            f"cleared {cleared.owner}: {cleared.memories} memories, {cleared.documents} "
            f"documents, {cleared.learned_rows} learned rows"
        ],
    )


@app.command("search-vector")
@with_run(remote=True)
def search_vector(
    run: Run,
    vector: Annotated[
        str,
        typer.Argument(
            metavar="VECTOR", help="A JSON array of embedding_dim numbers; - for stdin."
        ),
    ],
    k: KOption = 10,
    owner: OwnerOption = None,
    min_score: MinScoreOption = 0.0,
    near_id: NearOption = None,
    steps: StepsOption = None,
    type: TypeOption = None,
    block: BlockOption = None,
) -> Output:
    """Memories nearest to a raw embedding vector (cosine in [0, 1]); no text is embedded."""
    values = _vector(sys.stdin.read() if vector == "-" else vector)
    where = near(near_id, steps, type, block)
    result = run.api().search_vector(
        values, k=k, filters=SearchFilters(owner=owner), min_score=min_score, near=where
    )
    return hits_output(result)


def _vector(text: str) -> list[float]:
    """VECTOR: a JSON array of numbers.

    Raises:
        InvalidInput: anything else.
    """
    try:
        values = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"VECTOR must be a JSON array of numbers: {exc}") from exc
    if not isinstance(values, list) or not all(
        isinstance(v, int | float) and not isinstance(v, bool) for v in values
    ):
        raise InvalidInput("VECTOR must be a JSON array of numbers")
    return values

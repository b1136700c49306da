"""Graph and knowledge-management commands.

``intersection``, ``relate-batch``, ``memories`` (list with paging),
``clear-owner`` and ``search-vector``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from tribal_memory.base.errors import InvalidInput
from tribal_memory.base.models import RelationInput, SearchFilters
from tribal_memory.interfaces.cli.commands import (
    BlockOption,
    Kind,
    KOption,
    MinScoreOption,
    NearOption,
    OwnerOption,
    StepsOption,
    TypeOption,
    _near,
    _parse_time,
)
from tribal_memory.interfaces.cli.output import (
    _memory_dict,
    _print_hits,
    _relation_dict,
    _snippet,
    _table,
)
from tribal_memory.interfaces.cli.root import DataDirOption, JsonOption, _Run, app


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
def intersection(
    ctx: typer.Context,
    memory_ids: Annotated[
        list[str], typer.Argument(metavar="ID...", help="2 to 16 memory ids.", show_default=False)
    ],
    steps: Annotated[int, typer.Option(min=1, max=5, help="Most hops from each.")] = 1,
    type: TypeOption = None,
    block: BlockOption = None,
    limit: Annotated[int | None, typer.Option(min=1, help="Most memories (default 100).")] = None,
    owner: OwnerOption = None,
    data_dir: DataDirOption = None,
    json_out: JsonOption = None,
) -> None:
    """Memories within --steps hops of every one of the IDs (closest first; not the IDs)."""
    run = _Run(ctx, data_dir, json_out)
    with run.service() as service:
        found = service.intersection(
            memory_ids,
            steps=steps,
            owner=owner,
            types=type or (),
            block=block or (),
            limit=limit,
        )
    if run.json:
        for common in found:
            run.emit({"steps": list(common.steps), **_memory_dict(common.memory)})
        return
    if not found:
        run.out.print("nothing within reach of all of them")
        return
    table = _table("steps", "owner")
    for common in found:
        table.add_row(
            ",".join(str(s) for s in common.steps),
            common.memory.owner,
            _snippet(common.memory.content),
            common.memory.memory_id,
        )
    run.out.print(table)


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
def relate_batch(
    ctx: typer.Context,
    source: Annotated[
        str,
        typer.Argument(metavar="FILE", help="JSON lines or a JSON array of edges; - for stdin."),
    ],
    owner: OwnerOption = None,
    data_dir: DataDirOption = None,
    json_out: JsonOption = None,
) -> None:
    """Add or re-weight many edges in one write; one bad edge rejects them all.

    Each edge is {"source_id", "target_id", "type", "weight"?}.
    """
    run = _Run(ctx, data_dir, json_out)
    edges = _edges(_read(source))
    with run.service() as service:
        stored = service.relate_batch(edges, owner=owner)
    if run.json:
        for relation in stored:
            run.emit(_relation_dict(relation))
    else:
        run.out.print(f"stored {len(stored)} relations")


@app.command()
def memories(
    ctx: typer.Context,
    owner: OwnerOption = None,
    include_shared: Annotated[
        bool, typer.Option("--shared/--no-shared", help="With --owner: also shared memories.")
    ] = True,
    tag: Annotated[list[str] | None, typer.Option("--tag", "-t", help="Has this tag.")] = None,
    kind: Annotated[list[Kind] | None, typer.Option(help="Of this kind (any of).")] = None,
    source: Annotated[list[str] | None, typer.Option(help="From this source (any of).")] = None,
    since: Annotated[str | None, typer.Option(help="Not before this ISO 8601 time.")] = None,
    until: Annotated[str | None, typer.Option(help="Not after this ISO 8601 time.")] = None,
    limit: Annotated[int | None, typer.Option(min=1, help="Page size (default 100).")] = None,
    after: Annotated[
        str | None, typer.Option(metavar="ID", help="Start after this id (a page's next).")
    ] = None,
    every: Annotated[bool, typer.Option("--all", help="Read every page, not one.")] = False,
    data_dir: DataDirOption = None,
    json_out: JsonOption = None,
) -> None:
    """List memories passing the filters by id, a page at a time (--all: every page).

    JSON: one line per memory, then {"next_after": ID or null}.
    """
    run = _Run(ctx, data_dir, json_out)
    filters = SearchFilters(
        owner=owner,
        include_shared=include_shared,
        tags=tuple(tag or ()),
        kinds=tuple(choice.value for choice in kind or ()),
        sources=tuple(source or ()),
        since=_parse_time(since, "--since"),
        until=_parse_time(until, "--until"),
    )
    table = _table("owner", "kind")
    with run.service() as service:
        while True:
            page = service.list_page(filters, limit=limit, after=after)
            for memory in page.memories:
                if run.json:
                    run.emit(_memory_dict(memory))
                else:
                    table.add_row(
                        memory.owner, memory.kind, _snippet(memory.content), memory.memory_id
                    )
            after = page.next_after
            if not every or after is None:
                break
    if run.json:
        run.emit({"next_after": after})
        return
    run.out.print(table)
    if after is not None:
        run.out.print(f"more: --after {after}")


@app.command("clear-owner")
def clear_owner(
    ctx: typer.Context,
    owner: Annotated[str, typer.Argument(metavar="OWNER", help="The owner to clear.")],
    confirm: Annotated[
        str | None,
        typer.Option(metavar="OWNER", help="Required: the owner's name again, to confirm."),
    ] = None,
    data_dir: DataDirOption = None,
    json_out: JsonOption = None,
) -> None:
    """Delete every memory of OWNER with all that points at them, and its document records."""
    run = _Run(ctx, data_dir, json_out)
    with run.service() as service:
        cleared = service.clear_owner(owner, confirm=confirm)
    if run.json:
        run.emit(
            {"owner": cleared.owner, "memories": cleared.memories, "documents": cleared.documents}
        )
    else:
        run.out.print(
            f"cleared {cleared.owner}: {cleared.memories} memories, {cleared.documents} documents"
        )


@app.command("search-vector")
def search_vector(
    ctx: typer.Context,
    vector: Annotated[
        str,
        typer.Argument(
            metavar="VECTOR", help="A JSON array of embedding_dim numbers; - for stdin."
        ),
    ],
    k: KOption = 10,
    owner: OwnerOption = None,
    min_score: MinScoreOption = 0.0,
    near: NearOption = None,
    steps: StepsOption = None,
    type: TypeOption = None,
    block: BlockOption = None,
    data_dir: DataDirOption = None,
    json_out: JsonOption = None,
) -> None:
    """Memories nearest to a raw embedding vector (cosine in [0, 1]); no text is embedded."""
    run = _Run(ctx, data_dir, json_out)
    text = sys.stdin.read() if vector == "-" else vector
    try:
        values = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"VECTOR must be a JSON array of numbers: {exc}") from exc
    if not isinstance(values, list) or not all(
        isinstance(v, int | float) and not isinstance(v, bool) for v in values
    ):
        raise InvalidInput("VECTOR must be a JSON array of numbers")
    where = _near(near, steps, type, block)
    with run.service() as service:
        result = service.search_vector(
            values, k=k, filters=SearchFilters(owner=owner), min_score=min_score, near=where
        )
    _print_hits(run, result)

"""Options and arguments that several commands share, as ``Annotated`` types.

Each command's signature names its options with these types (``owner:
OwnerOption = None``), so an option's flags and help are written once. The
parsers at the end turn option text into the library's values.
"""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from tribal_memory.base.errors import InvalidInput
from tribal_memory.base.graph import Near, Traversal
from tribal_memory.base.models import SearchFilters
from tribal_memory.base.results import LEARNED_PARTS, LearnedParts

# -- every command ------------------------------------------------------------------

DataDirOption = Annotated[
    Path | None,
    typer.Option(
        "--data-dir",
        help="Data directory (default: $TRIBAL_DATA_DIR, else the per-user data dir).",
        file_okay=False,
    ),
]
UrlOption = Annotated[
    str | None,
    typer.Option(
        "--url",
        help="Act on the running server at this URL instead of opening a data dir "
        "(default: $TRIBAL_URL; key: $TRIBAL_API_KEY).",
        show_default=False,
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

# -- memories and searches -----------------------------------------------------------


class Kind(StrEnum):
    """Memory kinds, as ``--kind`` choices."""

    fact = "fact"
    chunk = "chunk"
    document = "document"


OwnerOption = Annotated[
    str | None, typer.Option("--owner", "-o", help="Only this owner's and shared memories.")
]
IdArgument = Annotated[str, typer.Argument(metavar="ID", help="Memory id.")]
QueryArgument = Annotated[str, typer.Argument(help="A question or keywords.")]
KOption = Annotated[int, typer.Option("-k", min=1, help="Most hits.")]
MinScoreOption = Annotated[float, typer.Option(min=0.0, max=1.0, help="Drop hits under it.")]
KindsOption = Annotated[list[Kind] | None, typer.Option(help="Of this kind (any of).")]
SourcesOption = Annotated[list[str] | None, typer.Option(help="From this source (any of).")]
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

# -- the graph ----------------------------------------------------------------------

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

# -- parsing ------------------------------------------------------------------------


def near(
    memory_id: str | None, steps: int | None, types: list[str] | None, block: list[str] | None
) -> Near | None:
    """The :class:`Near` of ``--near``, ``--steps``, ``--type``, ``--block``.

    Raises:
        InvalidInput: ``--steps``, ``--type`` or ``--block`` without ``--near``.
    """
    if memory_id is None:
        if steps is not None or types or block:
            raise InvalidInput(
                "--steps, --type and --block need --near (the memory to search around)"
            )
        return None
    return Near(memory_id, Traversal(steps or 1, tuple(types or ()), tuple(block or ())))


def filters(
    owner: str | None,
    *,
    include_shared: bool = True,
    tags: list[str] | None = None,
    kinds: list[Kind] | None = None,
    sources: list[str] | None = None,
    since: str | None = None,
    until: str | None = None,
) -> SearchFilters:
    """The :class:`SearchFilters` of the filter options (times as :func:`parse_time` reads them).

    Raises:
        typer.BadParameter: ``--since`` or ``--until`` is not an ISO 8601 time.
    """
    return SearchFilters(
        owner=owner,
        include_shared=include_shared,
        tags=tuple(tags or ()),
        kinds=tuple(choice.value for choice in kinds or ()),
        sources=tuple(sources or ()),
        since=parse_time(since, "--since"),
        until=parse_time(until, "--until"),
    )


def parse_learned(value: str | None) -> LearnedParts | None:
    """``--learned``: None (the owner's variant), ``none`` or a comma list of part names.

    Raises:
        typer.BadParameter: no part named, or an unknown one.
    """
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


def parse_time(value: str | None, option: str) -> datetime | None:
    """An ISO 8601 time; naive times are taken as UTC.

    Raises:
        typer.BadParameter: ``value`` is not an ISO 8601 time (named as ``option``).
    """
    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError as exc:
        raise typer.BadParameter(f"not an ISO 8601 time: {value!r}", param_hint=option) from exc
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def agent_owner(agent: str | None) -> str | None:
    """``--agent`` as an owner: None when absent or blank."""
    return agent.strip() if agent and agent.strip() else None

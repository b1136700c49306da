"""Learned-layer commands: ``feedback``, ``anchors list|add|remove`` and ``variant``.

``recall``/``search --feedback`` and ``stats --retrieval`` live with their
commands in :mod:`.commands`.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer

from tribal_memory.base.models import Variant
from tribal_memory.interfaces.cli.commands import IdArgument, OwnerOption
from tribal_memory.interfaces.cli.output import (
    _anchor_dict,
    _anchors_table,
    _feedback_dict,
    _feedback_line,
)
from tribal_memory.interfaces.cli.root import DataDirOption, JsonOption, _Run, app


class VariantChoice(StrEnum):
    """Values of ``variant``: pin to learned or baseline, or none to unpin."""

    learned = "learned"
    baseline = "baseline"
    none = "none"


_PINS: dict[VariantChoice, Variant | None] = {
    VariantChoice.learned: "learned",
    VariantChoice.baseline: "baseline",
    VariantChoice.none: None,
}


@app.command()
def feedback(
    ctx: typer.Context,
    retrieval_id: Annotated[
        str, typer.Argument(metavar="RETRIEVAL_ID", help="From recall/search --feedback.")
    ],
    memory_ids: Annotated[
        list[str] | None,
        typer.Argument(metavar="[MEMORY_ID]...", help="The hits used (none: nothing helped)."),
    ] = None,
    owner: Annotated[
        str | None, typer.Option("--owner", "-o", help="Only this owner's retrievals.")
    ] = None,
    data_dir: DataDirOption = None,
    json_out: JsonOption = None,
) -> None:
    """Report which hits of a retrieval were used; the learned layer learns from it."""
    run = _Run(ctx, data_dir, json_out)
    with run.service() as service:
        result = service.record_usage_feedback(retrieval_id, memory_ids or [], owner=owner)
    if run.json:
        run.emit(_feedback_dict(result))
    else:
        run.out.print(_feedback_line(result))


anchors_app = typer.Typer(
    help="Anchors: questions attached to a memory so that it is found by them.",
    no_args_is_help=True,
)
app.add_typer(anchors_app, name="anchors")
AnchorTextArgument = Annotated[
    str, typer.Argument(metavar="TEXT", help="A question the memory answers.")
]


@anchors_app.command("list")
def anchors_list(
    ctx: typer.Context,
    memory_id: IdArgument,
    owner: OwnerOption = None,
    data_dir: DataDirOption = None,
    json_out: JsonOption = None,
) -> None:
    """The memory's anchors, active and pending, most used first."""
    run = _Run(ctx, data_dir, json_out)
    with run.service() as service:
        found = service.anchors(memory_id, owner=owner)
    if run.json:
        for anchor in found:
            run.emit(_anchor_dict(anchor))
    elif found:
        run.out.print(_anchors_table(found))
    else:
        run.out.print("no anchors")


@anchors_app.command("add")
def anchors_add(
    ctx: typer.Context,
    memory_id: IdArgument,
    text: AnchorTextArgument,
    owner: OwnerOption = None,
    data_dir: DataDirOption = None,
    json_out: JsonOption = None,
) -> None:
    """Attach a manual anchor to the memory (active at once)."""
    run = _Run(ctx, data_dir, json_out)
    with run.service() as service:
        anchor = service.add_anchor(memory_id, text, owner=owner)
    if run.json:
        run.emit(_anchor_dict(anchor))
    else:
        run.out.print(f"anchored {anchor.memory_id}: {anchor.text}")


@anchors_app.command("remove")
def anchors_remove(
    ctx: typer.Context,
    memory_id: IdArgument,
    text: AnchorTextArgument,
    owner: OwnerOption = None,
    data_dir: DataDirOption = None,
    json_out: JsonOption = None,
) -> None:
    """Detach an anchor from the memory."""
    run = _Run(ctx, data_dir, json_out)
    with run.service() as service:
        service.remove_anchor(memory_id, text, owner=owner)
    if run.json:
        run.emit({"removed": text, "memory_id": memory_id})
    else:
        run.out.print(f"removed anchor from {memory_id}: {text}")


@app.command()
def variant(
    ctx: typer.Context,
    owner: Annotated[str, typer.Argument(metavar="OWNER")],
    choice: Annotated[
        VariantChoice | None,
        typer.Argument(help="Pin to learned or baseline; none unpins. Absent: show."),
    ] = None,
    data_dir: DataDirOption = None,
    json_out: JsonOption = None,
) -> None:
    """Show or pin the A/B variant serving OWNER (baseline: plain search)."""
    run = _Run(ctx, data_dir, json_out)
    with run.service() as service:
        if choice is not None:
            service.pin_variant(owner, _PINS[choice])
        serving = service.variant_for(owner)
    if run.json:
        run.emit({"owner": owner, "variant": serving})
    else:
        run.out.print(f"{owner}: {serving}")

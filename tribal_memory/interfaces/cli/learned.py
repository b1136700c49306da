"""Learned-layer commands: ``feedback``, ``anchors list|add|remove`` and ``variant``.

``recall``/``search --feedback`` and ``stats --retrieval`` live with their
commands in :mod:`.commands`.
"""

from __future__ import annotations

import dataclasses
from enum import StrEnum
from typing import Annotated

import typer
from rich.console import RenderableType
from rich.table import Table

from tribal_memory.base.results import Anchor, FeedbackResult, Variant
from tribal_memory.interfaces.cli.options import IdArgument, OwnerOption
from tribal_memory.interfaces.cli.output import Output
from tribal_memory.interfaces.cli.root import app
from tribal_memory.interfaces.cli.run import Run, with_run


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
@with_run(remote=True)
def feedback(
    run: Run,
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
) -> Output:
    """Report which hits of a retrieval were used; the learned layer learns from it."""
    result = run.api().record_usage_feedback(retrieval_id, memory_ids or [], owner=owner)
    return Output([dataclasses.asdict(result)], [_feedback_line(result)])


def _feedback_line(result: FeedbackResult) -> str:
    """What a feedback call recorded (or that it was a repeat)."""
    if result.duplicate:
        return f"feedback on {result.retrieval_id} was already recorded; nothing changed"
    anchors = result.anchors_created
    made = f", {anchors} anchor{'' if anchors == 1 else 's'} activated" if anchors else ""
    return (
        f"recorded feedback on {result.retrieval_id}: "
        f"{len(result.used)} used, {len(result.unused)} unused{made}"
    )


anchors_app = typer.Typer(
    help="Anchors: questions attached to a memory so that it is found by them.",
    no_args_is_help=True,
)
app.add_typer(anchors_app, name="anchors")
AnchorTextArgument = Annotated[
    str, typer.Argument(metavar="TEXT", help="A question the memory answers.")
]


@anchors_app.command("list")
@with_run(remote=True)
def anchors_list(run: Run, memory_id: IdArgument, owner: OwnerOption = None) -> Output:
    """The memory's anchors, active and pending, most used first."""
    found = run.api().anchors(memory_id, owner=owner)
    return Output([dataclasses.asdict(a) for a in found], [_anchors_table(found)])


def _anchors_table(anchors: list[Anchor]) -> RenderableType:
    if not anchors:
        return "no anchors"
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


@anchors_app.command("add")
@with_run(remote=True)
def anchors_add(
    run: Run, memory_id: IdArgument, text: AnchorTextArgument, owner: OwnerOption = None
) -> Output:
    """Attach a manual anchor to the memory (active at once)."""
    anchor = run.api().add_anchor(memory_id, text, owner=owner)
    return Output([dataclasses.asdict(anchor)], [f"anchored {anchor.memory_id}: {anchor.text}"])


@anchors_app.command("remove")
@with_run(remote=True)
def anchors_remove(
    run: Run, memory_id: IdArgument, text: AnchorTextArgument, owner: OwnerOption = None
) -> Output:
    """Detach an anchor from the memory."""
    run.api().remove_anchor(memory_id, text, owner=owner)
    return Output(
        [{"removed": text, "memory_id": memory_id}], [f"removed anchor from {memory_id}: {text}"]
    )


@app.command()
@with_run(remote=True)
def variant(
    run: Run,
    owner: Annotated[str, typer.Argument(metavar="OWNER")],
    choice: Annotated[
        VariantChoice | None,
        typer.Argument(help="Pin to learned or baseline; none unpins. Absent: show."),
    ] = None,
) -> Output:
    """Show or pin the A/B variant serving OWNER (baseline: plain search)."""
    service = run.api()
    if choice is not None:
        service.pin_variant(owner, _PINS[choice])
    serving = service.variant_for(owner)
    return Output([{"owner": owner, "variant": serving}], [f"{owner}: {serving}"])

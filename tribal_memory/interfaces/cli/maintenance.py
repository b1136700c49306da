"""``check``, ``backup`` and ``restore``: keep a data dir consistent and safe."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

from tribal_memory.interfaces.cli.output import Output, fail
from tribal_memory.interfaces.cli.root import app
from tribal_memory.interfaces.cli.run import Run, with_run


@app.command()
@with_run
def optimize(run: Run) -> Output:
    """Compact the memory table, fold new rows into its indexes, drop old versions.

    Runs by itself after enough writes; run it after a bulk change, or when
    ``tribal-memory stats`` shows many small fragments or unindexed rows.
    """
    service = run.service()
    before = service.table_health()
    started = time.perf_counter()
    service.optimize()
    seconds = time.perf_counter() - started
    after = service.table_health()
    changes = ", ".join(f"{name} {before[name]} -> {after[name]}" for name in before)
    return Output(
        [{"before": before, "after": after, "seconds": round(seconds, 3)}],
        [f"optimized in {seconds:.2f} s: {changes}"],
    )


@app.command()
@with_run
def check(
    run: Run,
    repair: Annotated[
        bool,
        typer.Option(
            "--repair",
            help="First move misfiled memories to their own ids and delete SQL rows that "
            "point at missing memories.",
        ),
    ] = False,
) -> None:
    """Check that ids are unique and capture's, and nothing points at a missing memory.

    Exits 1 when the store is inconsistent (after --repair: when it still is).
    """
    report = run.service().check_consistency(repair=repair)
    ok = f"ok: {report.memories} memories, no duplicate or misfiled ids, no orphaned rows"
    run.show(Output([report.as_dict()], [ok] if report.ok else []))
    if not report.ok:
        orphans = ", ".join(f"{table}: {len(ids)}" for table, ids in report.orphans.items())
        fail(
            f"inconsistent store: {len(report.duplicate_ids)} duplicate memory ids; "
            f"{len(report.misfiled)} memories not under capture's id; "
            f"rows pointing at missing memories: {orphans or 'none'}"
            + ("" if repair else " (tribal-memory check --repair fixes the last two)")
        )


@app.command()
@with_run
def backup(
    run: Run,
    destination: Annotated[
        Path, typer.Argument(metavar="DIR", help="New (or empty) directory for the backup.")
    ],
) -> Output:
    """Snapshot the data dir into DIR, also while a server is writing to it.

    DIR is itself a data dir: serve it with --data-dir DIR, or copy it back
    with 'tribal-memory restore DIR'.
    """
    from tribal_memory.ops.backup import create_backup

    report = create_backup(run.settings(), destination)
    return Output(
        [report.as_dict()],
        [
            f"backed up {report.memories} memories (table version {report.table_version}) "
            f"to {report.path}"
        ],
    )


@app.command()
@with_run
def restore(
    run: Run,
    backup_dir: Annotated[
        Path, typer.Argument(metavar="DIR", help="A directory made by 'tribal-memory backup'.")
    ],
) -> Output:
    """Copy a backup into the data dir, which must not exist yet or be empty.

    Stop the server first; start it again afterwards.
    """
    from tribal_memory.ops.backup import restore_backup

    target = run.settings().data_dir
    manifest = restore_backup(backup_dir, target)
    return Output(
        [{"data_dir": str(target), **manifest}],
        [f"restored {manifest.get('memories')} memories into {target}"],
    )

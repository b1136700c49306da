"""``check``, ``backup`` and ``restore``: keep a data dir consistent and safe."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

from tribal_memory.interfaces.cli.output import _fail
from tribal_memory.interfaces.cli.root import DataDirOption, JsonOption, _Run, app


@app.command()
def optimize(
    ctx: typer.Context,
    data_dir: DataDirOption = None,
    json_out: JsonOption = None,
) -> None:
    """Compact the memory table, fold new rows into its indexes, drop old versions.

    Runs by itself after enough writes; run it after a bulk change, or when
    ``tribal-memory stats`` shows many small fragments or unindexed rows.
    """
    run = _Run(ctx, data_dir, json_out)
    with run.service() as service:
        before = service.table_health()
        started = time.perf_counter()
        service.optimize()
        seconds = time.perf_counter() - started
        after = service.table_health()
    if run.json:
        run.emit({"before": before, "after": after, "seconds": round(seconds, 3)})
        return
    changes = ", ".join(f"{name} {before[name]} -> {after[name]}" for name in before)
    run.out.print(f"optimized in {seconds:.2f} s: {changes}")


@app.command()
def check(
    ctx: typer.Context,
    repair: Annotated[
        bool,
        typer.Option("--repair", help="Delete SQL rows that point at missing memories first."),
    ] = False,
    data_dir: DataDirOption = None,
    json_out: JsonOption = None,
) -> None:
    """Check that memory ids are unique and nothing points at a missing memory.

    Exits 1 when the store is inconsistent (after --repair: when it still is).
    """
    run = _Run(ctx, data_dir, json_out)
    with run.service() as service:
        report = service.check_consistency(repair=repair)
    if run.json:
        run.emit(report.as_dict())
    elif report.ok:
        run.out.print(f"ok: {report.memories} memories, no duplicate ids, no orphaned rows")
    if not report.ok:
        orphans = ", ".join(f"{table}: {len(ids)}" for table, ids in report.orphans.items())
        _fail(
            f"inconsistent store: {len(report.duplicate_ids)} duplicate memory ids; "
            f"rows pointing at missing memories: {orphans or 'none'}"
            + ("" if repair else " (tribal-memory check --repair drops such rows)")
        )


@app.command()
def backup(
    ctx: typer.Context,
    destination: Annotated[
        Path, typer.Argument(metavar="DIR", help="New (or empty) directory for the backup.")
    ],
    data_dir: DataDirOption = None,
    json_out: JsonOption = None,
) -> None:
    """Snapshot the data dir into DIR, also while a server is writing to it.

    DIR is itself a data dir: serve it with --data-dir DIR, or copy it back
    with 'tribal-memory restore DIR'.
    """
    from tribal_memory.ops.backup import create_backup

    run = _Run(ctx, data_dir, json_out)
    report = create_backup(run.settings(), destination)
    if run.json:
        run.emit(report.as_dict())
    else:
        run.out.print(
            f"backed up {report.memories} memories (table version {report.table_version}) "
            f"to {report.path}"
        )


@app.command()
def restore(
    ctx: typer.Context,
    backup_dir: Annotated[
        Path, typer.Argument(metavar="DIR", help="A directory made by 'tribal-memory backup'.")
    ],
    data_dir: DataDirOption = None,
    json_out: JsonOption = None,
) -> None:
    """Copy a backup into the data dir, which must not exist yet or be empty.

    Stop the server first; start it again afterwards.
    """
    from tribal_memory.ops.backup import restore_backup

    run = _Run(ctx, data_dir, json_out)
    target = run.settings().data_dir
    manifest = restore_backup(backup_dir, target)
    if run.json:
        run.emit({"data_dir": str(target), **manifest})
    else:
        run.out.print(f"restored {manifest.get('memories')} memories into {target}")

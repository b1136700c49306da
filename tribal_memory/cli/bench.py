"""``tribal-memory bench``: benchmark sub-commands."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from tribal_memory.cli.root import DataDirOption, JsonOption, _Run, app

bench_app = typer.Typer(help="Benchmarks.", no_args_is_help=True)
app.add_typer(bench_app, name="bench")

_BENCH_COLUMNS = ("recall@5", "recall@10", "recall@25", "hit@10", "mrr", "p50_ms", "p95_ms")


@bench_app.command("locomo")
def bench_locomo(
    ctx: typer.Context,
    path: Annotated[Path, typer.Argument(help="A LoCoMo-format JSON file.")],
    out: Annotated[Path | None, typer.Option("--out", help="Write the JSON report here.")] = None,
    limit_samples: Annotated[
        int | None, typer.Option(min=1, help="Only the first N conversations.")
    ] = None,
    data_dir: DataDirOption = None,
    json_out: JsonOption = None,
) -> None:
    """Retrieval benchmark on LoCoMo: recall@k, hit@10, MRR and latency per variant."""
    run = _Run(ctx, data_dir, json_out)
    from tribal_memory.bench.locomo import run_locomo_bench

    report = run_locomo_bench(path, out, limit_samples=limit_samples, progress=not run.json)
    if run.json:
        run.emit(report)
        return
    table = Table(
        "variant", *_BENCH_COLUMNS, title=f"{path.name}: {report.get('n_questions')} questions"
    )
    for name, metrics in report.get("variants", {}).items():
        table.add_row(name, *(_metric(metrics.get(column), column) for column in _BENCH_COLUMNS))
    run.out.print(table)
    run.out.print(f"ingest: {report.get('ingest_per_s')} memories/s")
    if out is not None:
        run.out.print(f"report written to {out}")


def _metric(value: object, column: str) -> str:
    if not isinstance(value, int | float):
        return "-"
    return f"{value:.1f}" if column.endswith("_ms") else f"{value:.3f}"

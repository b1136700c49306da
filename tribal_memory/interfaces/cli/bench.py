"""``tribal-memory bench``: benchmark sub-commands."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import RenderableType
from rich.table import Table

from tribal_memory.base.errors import InvalidInput
from tribal_memory.interfaces.cli.output import Output
from tribal_memory.interfaces.cli.root import app
from tribal_memory.interfaces.cli.run import Run, with_run

bench_app = typer.Typer(help="Benchmarks.", no_args_is_help=True)
app.add_typer(bench_app, name="bench")

OutOption = Annotated[Path | None, typer.Option("--out", help="Write the JSON report here.")]
LimitSamplesOption = Annotated[
    int | None, typer.Option(min=1, help="Only the first N conversations.")
]

_BENCH_COLUMNS = ("recall@5", "recall@10", "recall@25", "hit@10", "mrr", "p50_ms", "p95_ms")


@bench_app.command("locomo")
@with_run(data_dir=False)
def bench_locomo(
    run: Run,
    path: Annotated[Path, typer.Argument(help="A LoCoMo-format JSON file.")],
    out: OutOption = None,
    limit_samples: LimitSamplesOption = None,
) -> Output:
    """Retrieval benchmark on LoCoMo: recall@k, hit@10, MRR and latency per variant."""
    from tribal_memory.bench.locomo import run_locomo_bench

    report = run_locomo_bench(path, out, limit_samples=limit_samples, progress=not run.json)
    table = Table(
        "variant", *_BENCH_COLUMNS, title=f"{path.name}: {report.get('n_questions')} questions"
    )
    for name, metrics in report.get("variants", {}).items():
        table.add_row(name, *(_metric(metrics.get(column), column) for column in _BENCH_COLUMNS))
    text: list[RenderableType] = [table, f"ingest: {report.get('ingest_per_s')} memories/s"]
    return Output([report], [*text, *_written(out)])


@bench_app.command("calibration")
@with_run(data_dir=False)
def bench_calibration(
    run: Run,
    path: Annotated[Path, typer.Argument(help="A LoCoMo-format JSON file.")],
    out: OutOption = None,
    fit: Annotated[
        bool, typer.Option("--fit", help="Also fit the relevance model on the fit half.")
    ] = False,
    limit_samples: LimitSamplesOption = None,
) -> Output:
    """Calibrated scores: AUROC of the top hit's score, answerable against off-topic questions."""
    from tribal_memory.bench.calibration import run_calibration_bench

    try:
        report = run_calibration_bench(
            path, out, refit=fit, limit_samples=limit_samples, progress=not run.json
        )
    except ValueError as error:
        raise InvalidInput(str(error)) from error
    columns = ("answerable_keep", "off_topic_inject", "nonsense_inject", "evidence_kept")
    text: list[RenderableType] = []
    halves = [("served", report)]
    if "fitted" in report:
        halves.append(("fitted", report["fitted"]))
    for label, figures in halves:
        for half in ("fit", "held_out"):
            part = figures[half]
            table = Table(
                "min_score",
                *columns,
                title=f"{label} model, {half} half: AUROC {part['auroc']} "
                f"(ranking score {part['auroc_rank_score']})",
            )
            for threshold, row in part["by_min_score"].items():
                table.add_row(threshold, *(f"{row[c]:.3f}" for c in columns))
            text.append(table)
    if "fitted" in report:
        fitted = report["fitted"]
        text.append(
            f"fitted: intercept {fitted['intercept']}, weights {fitted['weights']}, "
            f"min_score {fitted['min_score']}"
        )
    return Output([report], [*text, *_written(out)])


def _written(out: Path | None) -> list[str]:
    return [] if out is None else [f"report written to {out}"]


def _metric(value: object, column: str) -> str:
    if not isinstance(value, int | float):
        return "-"
    return f"{value:.1f}" if column.endswith("_ms") else f"{value:.3f}"


_LEARN_COLUMNS = (
    "n",
    "recall@5",
    "recall@10",
    "recall@25",
    "hit@5",
    "mrr",
    "used_in_top10",
    "p50_ms",
)


@bench_app.command("learn")
@with_run(data_dir=False)
def bench_learn(
    run: Run,
    path: Annotated[
        Path | None, typer.Argument(help="A LoCoMo-format JSON file (omit with --suite).")
    ] = None,
    suite: Annotated[
        str | None,
        typer.Option("--suite", help="A suite shipped with the project, e.g. team-facts."),
    ] = None,
    out: OutOption = None,
    seed: Annotated[int, typer.Option(help="Seed of the question split.")] = 0,
    seeds: Annotated[
        str | None,
        typer.Option(
            help="Several split seeds, comma-separated (e.g. 0,1,2,3,4): one run each, "
            "reported as means with standard deviations and each seed's lift."
        ),
    ] = None,
    rounds: Annotated[int, typer.Option(min=1, help="Times each fed question is replayed.")] = 3,
    feedback_k: Annotated[
        int,
        typer.Option(
            min=1,
            help="Hits the replaying agent is shown; gold among them is reported used "
            "(over 10: an oracle, labelled so).",
        ),
    ] = 10,
    feedback: Annotated[
        str,
        typer.Option(
            "--feedback",
            help="shown: report the gold among the hits shown; session: also search "
            "again (question + answer) in the same session and report what that found; "
            "noisy: as shown, but each used gold is missed with probability 0.2 and one "
            "shown non-gold hit is reported with probability 0.2.",
        ),
    ] = "shown",
    fed_limit: Annotated[
        int | None,
        typer.Option(
            min=1, help="Replay only this many fed questions per store (the learning curve)."
        ),
    ] = None,
    variants: Annotated[
        str | None,
        typer.Option(help="Variants to measure, comma-separated (default: all of them)."),
    ] = None,
    limit_samples: LimitSamplesOption = None,
    agents: Annotated[
        int,
        typer.Option(
            min=1,
            max=2,
            help="2: the memories are shared, agent A gives the feedback and agent B "
            "asks the new questions too (team learning, other_agent in the report).",
        ),
    ] = 1,
) -> Output:
    """Learning benchmark: feed back half the questions, measure new, repeated, reworded."""
    from tribal_memory.bench.learn import VARIANTS, run_learn_bench
    from tribal_memory.bench.learn_data import learn_stores
    from tribal_memory.bench.learn_seeds import combine
    from tribal_memory.bench.report import write_report

    if (path is None) == (suite is None):
        raise InvalidInput("give either a LoCoMo-format PATH or --suite NAME")
    if feedback not in ("shown", "session", "noisy"):
        raise InvalidInput(f"--feedback must be shown, session or noisy, not {feedback!r}")
    chosen = _names(variants, tuple(VARIANTS), "variant") if variants else tuple(VARIANTS)
    reports = []
    for split in _seeds(seeds) if seeds else (seed,):
        stores, dataset, protocol = learn_stores(path, suite, split, limit_samples)
        reports.append(
            run_learn_bench(
                stores,
                dataset=dataset,
                protocol=protocol,
                seed=split,
                rounds=rounds,
                feedback_k=feedback_k,
                session=feedback == "session",
                noisy=feedback == "noisy",
                fed_limit=fed_limit,
                variants=chosen,
                agents=agents,
                log=None if run.json else run.out.print,
            )
        )
    report = combine(reports) if seeds else reports[0]
    write_report(report, out)
    if run.json:  # the tables read fields the report may lack: built for a terminal only
        return Output([report])
    return Output([report], [*_learn_tables(report, agents), *_learn_lines(report), *_written(out)])


def _seeds(text: str) -> list[int]:
    """``--seeds``: comma-separated integers.

    Raises:
        InvalidInput: a value that is not an integer, or none at all.
    """
    try:
        found = [int(part) for part in text.split(",") if part.strip()]
    except ValueError as exc:
        raise InvalidInput(f"--seeds takes comma-separated integers, not {text!r}") from exc
    if not found:
        raise InvalidInput("--seeds needs at least one seed")
    return found


def _names(text: str, known: tuple[str, ...], what: str) -> tuple[str, ...]:
    """Comma-separated names, each one of ``known``.

    Raises:
        InvalidInput: an unknown name (the known ones are listed).
    """
    names = tuple(part.strip() for part in text.split(",") if part.strip())
    unknown = [name for name in names if name not in known]
    if unknown or not names:
        raise InvalidInput(f"unknown {what} {unknown or text!r}; known: {', '.join(known)}")
    return names


def _learn_row(metrics: dict[str, Any]) -> list[str]:
    return [_metric(metrics.get(c), c) if c != "n" else str(metrics["n"]) for c in _LEARN_COLUMNS]


def _learn_tables(report: dict[str, Any], agents: int) -> list[Table]:
    """One table per question set; with two agents, also the other agent's."""
    tables = []
    for set_name in ("new", "new_fed", "new_unfed", "repeat", "reword"):
        table = Table("variant", *_LEARN_COLUMNS, "cache hits", "false hits", title=set_name)
        for name, sets in report["variants"].items():
            metrics = sets[set_name]
            table.add_row(
                name,
                *_learn_row(metrics),
                f"{metrics['cache_hit_rate']:.3f}",
                f"{metrics['false_hit_rate']:.3f}",
            )
        tables.append(table)
    if agents == 2:
        table = Table("variant", *_LEARN_COLUMNS, title="other agent (gave no feedback)")
        for name, sets in report["variants"].items():
            for set_name in ("new", "new_fed", "new_unfed"):
                table.add_row(f"{name} {set_name}", *_learn_row(sets["other_agent"][set_name]))
        tables.append(table)
    return tables


def _learn_lines(report: dict[str, Any]) -> list[str]:
    """Feedback coverage, latency after feedback and the targets."""
    after = report["after_feedback"]
    return [
        f"feedback: {report['feedback']} (top {report['feedback_k']} shown); coverage "
        f"{report['feedback_coverage']:.3f} of fed gold evidence",
        f"after feedback: plain search p50 {after['search_p50_ms']} ms, "
        f"learned search p50 {after['learned_p50_ms']} ms",
        *_target_lines(report),
    ]


def _target_lines(report: dict[str, Any]) -> list[str]:
    return [
        f"{'met' if target['met'] else 'NOT met':8s} {target['name']}: {target['value']} "
        f"(target {target['target']})"
        for target in report["targets"]
    ]


_PERF_COLUMNS = (
    ("search_p50_ms", "p50 ms"),
    ("search_p95_ms", "p95 ms"),
    ("filtered_p50_ms", "5% p50"),
    ("cache_hit_p50_ms", "cache p50"),
    ("get_p50_ms", "get p50"),
    ("after_feedback_search_p50_ms", "fed p50"),
    ("after_feedback_learned_p50_ms", "fed learned p50"),
    ("after_feedback_interleaved_p50_ms", "after each feedback p50"),
    ("query_embed_p50_ms", "embed ms"),
    ("cpu_ms_per_search", "CPU ms/search"),
    ("baseline_search_p50_ms", "plain p50"),
    ("capture_per_s", "capture/s"),
    ("embed_per_s", "embed/s"),
    ("rss_mb", "RSS MiB"),
)


def _sizes(text: str) -> list[int]:
    try:
        sizes = [int(part) for part in text.split(",") if part.strip()]
    except ValueError as exc:
        raise InvalidInput(f"--sizes must be comma-separated integers, not {text!r}") from exc
    if not sizes:
        raise InvalidInput("--sizes must name at least one size")
    return sizes


@bench_app.command("perf")
@with_run(data_dir=False)
def bench_perf(
    run: Run,
    out: OutOption = None,
    sizes: Annotated[
        str, typer.Option("--sizes", help="Comma-separated store sizes (memories).")
    ] = "10000",
    cache_dir: Annotated[
        Path | None,
        typer.Option(
            "--cache-dir",
            help="Cache of corpus embeddings (default: the user cache dir).",
            file_okay=False,
        ),
    ] = None,
    samples: Annotated[int, typer.Option(min=5, help="Timed requests per latency.")] = 300,
    warmup: Annotated[int, typer.Option(min=0, help="Untimed requests before each.")] = 30,
    capture_n: Annotated[
        int,
        typer.Option(
            "--capture-n",
            min=2,
            help="New facts for capture throughput (half with, half without the "
            "near-duplicate check).",
        ),
    ] = 2048,
    clients: Annotated[int, typer.Option(min=0, help="Concurrent locust clients (0: skip).")] = 16,
    concurrent_size: Annotated[
        int | None,
        typer.Option(
            "--concurrent-size",
            help="The store size (one of --sizes) the concurrent clients run at "
            "(default: the largest).",
        ),
    ] = None,
    locust_s: Annotated[
        int, typer.Option("--locust-s", min=1, help="Seconds of the locust run.")
    ] = 20,
    feedback_searches: Annotated[
        int,
        typer.Option(
            "--feedback-searches",
            min=0,
            help="Searches with feedback replayed on each built store before the "
            "after-feedback latencies (0: skip).",
        ),
    ] = 3000,
    seed: Annotated[int, typer.Option(help="Seed of the generated corpus.")] = 0,
    profile: Annotated[
        Path | None,
        typer.Option(
            "--profile",
            help="Profile in-process search at the smallest size; "
            "write pyinstrument's report here.",
        ),
    ] = None,
    store_uri: Annotated[
        str | None,
        typer.Option(
            "--store-uri",
            help="Put each size's LanceDB store under this URI (e.g. s3://bucket/perf, "
            "reached with the AWS_* environment LanceDB reads) instead of the temp data "
            "dir; the stores are left there.",
        ),
    ] = None,
    keep_data: Annotated[
        Path | None,
        typer.Option(
            "--keep-data",
            metavar="<dir>",
            help="Move each size's data dir here once measured (data-<n>) instead of removing it.",
        ),
    ] = None,
) -> Output:
    """Speed and memory of a real server process: search, cache hit, capture, RSS, load."""
    from tribal_memory.bench.perf import run_perf_bench

    report = run_perf_bench(
        _sizes(sizes),
        out,
        cache_dir=cache_dir,
        samples=samples,
        warmup=warmup,
        capture_n=capture_n,
        clients=clients,
        concurrent_size=concurrent_size,
        locust_s=locust_s,
        feedback_searches=feedback_searches,
        seed=seed,
        profile=profile,
        store_uri=store_uri,
        keep_data=keep_data,
        command=" ".join(["tribal-memory", *sys.argv[1:]]),
        log=None if run.json else run.err.print,
    )
    # The text reads fields the report may lack: built for a terminal only.
    return Output([report], [] if run.json else [*_perf_text(report), *_written(out)])


def _perf_text(report: dict[str, Any]) -> list[RenderableType]:
    """The machine, a table of figures per size, ratios, the concurrent run and targets."""
    machine = report["machine"]
    text: list[RenderableType] = [
        f"{machine['cpu']}, {machine['cores']} cores, {machine['ram_gib']} GiB; "
        f"load average at start {machine['load_avg_1_5_15_at_start']}"
    ]
    table = Table("memories", *(label for _, label in _PERF_COLUMNS), title="bench perf")
    for size, figures in report["sizes"].items():
        table.add_row(size, *(_perf_value(figures.get(c)) for c, _ in _PERF_COLUMNS))
    text.append(table)
    for size, figures in report["sizes"].items():
        text.append(
            f"@{size}: search p50 is {figures['search_vs_baseline_p50']:.2f}x the plain "
            f"baseline's (numpy cosine + rank-bm25); capture is "
            f"{figures['capture_vs_embed']:.2f}x raw embedding"
        )
    concurrent = report.get("concurrent")
    if concurrent:
        text.append(
            f"{concurrent['clients']} clients @{concurrent['memories']}: "
            f"{concurrent['rps']} requests/s ({concurrent.get('vs_sequential')}x one "
            f"sequential client's {concurrent.get('sequential_rps')}), p50 "
            f"{concurrent['p50_ms']} ms, p99 {concurrent['p99_ms']} ms, "
            f"{concurrent['errors']} errors"
        )
        mixed = concurrent.get("mixed")
        if mixed:
            text.append(
                f"mixed load (80% search, 10% capture, 10% feedback): {mixed['rps']} "
                f"requests/s, p99 {mixed['p99_ms']} ms, {mixed['errors']} errors"
            )
    return [*text, *_target_lines(report)]


def _perf_value(value: object) -> str:
    return f"{value:.1f}" if isinstance(value, int | float) else "-"


_DOCS_COLUMNS = ("recall@5", "recall@10", "hit@10", "mrr", "ndcg@10", "p50_ms")


@bench_app.command("documents")
@with_run(data_dir=False)
def bench_documents(
    run: Run,
    docs_dir: Annotated[
        Path | None,
        typer.Option(
            "--docs-dir",
            file_okay=False,
            help="The reST sources (default: /usr/share/doc/python3.11/html/_sources, "
            "from `apt-get install python3.11-doc`).",
        ),
    ] = None,
    out: OutOption = None,
    modes: Annotated[
        str | None,
        typer.Option("--modes", help="Comma-separated search modes (default: all)."),
    ] = None,
) -> Output:
    """Search modes on long structured documents: recall@k, MRR per mode and question kind."""
    from tribal_memory.bench.documents import MODES, run_documents_bench

    chosen = MODES if modes is None else _modes(modes, MODES)
    report = run_documents_bench(
        docs_dir, out, modes=chosen, log=None if run.json else run.err.print
    )
    title = (
        f"{report['dataset']}: {report['n_questions']} questions, "
        f"{report['n_documents']} documents, {report['n_chunks']} chunks"
    )
    table = Table("mode", "questions", *_DOCS_COLUMNS, title=title)
    for mode, figures in report["modes"].items():
        table.add_row(mode, "all", *(_metric(figures.get(c), c) for c in _DOCS_COLUMNS))
        for category, sub in figures["per_category"].items():
            cells = (_metric(sub.get(c), c) for c in _DOCS_COLUMNS)
            table.add_row("", f"{category} ({sub['n']})", *cells)
    text: list[RenderableType] = [table]
    for name, diff in report["comparisons"].items():
        text.append(
            f"{name}: recall@10 {diff['recall@10']:+.3f}, MRR {diff['mrr']:+.3f} "
            f"({diff['recall@10_up']} questions up, {diff['recall@10_down']} down)"
        )
    return Output([report], [*text, *_written(out)])


def _modes(text: str, known: tuple[str, ...]) -> list[Any]:
    chosen = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [m for m in chosen if m not in known]
    if unknown or not chosen:
        raise InvalidInput(f"--modes takes some of {', '.join(known)}; not {text!r}")
    return chosen

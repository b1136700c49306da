"""``tribal-memory bench perf``: latency, throughput and memory of a real server process.

For each corpus size the benchmark starts ``python -m tribal_memory.interfaces.api.server``
on 127.0.0.1 over a fresh temp data dir, loads the generated corpus
(:mod:`tribal_memory.bench.perf_corpus`) through ``POST /v1/import`` with
embeddings computed once and cached outside the repository, and measures over
HTTP with a keep-alive client, after a warm-up:

- hybrid search, k=10, query embedding included (p50/p95), over the whole
  store and with an owner filter selecting 5% of it;
- a query-cache hit (the query made cache-eligible by three rounds of feedback);
- plain and learned search on the store a replay of agents' feedback leaves
  (:mod:`tribal_memory.bench.perf_feedback`), before the capture step below
  adds memories, so that they search the store the fresh searches did;
- batch capture of new short facts (``POST /v1/memories/batch``, real model)
  against the raw ``embed_batch`` throughput of the same model on the same
  texts, interleaved chunk by chunk so machine load hits both alike;
- the server's resident memory while ingesting and at the end (``/proc``);
- the query embedding alone, in-process: the floor of a search;
- the plain baseline (:mod:`tribal_memory.bench.perf_baseline`), in-process.

At the largest size, locust drives the server with concurrent clients. With
``profile``, the in-process search path at the smallest size is profiled with
pyinstrument and the time split by where it goes.

One size's figures are measured by :mod:`tribal_memory.bench.perf_size`; this
module runs the sizes, checks the targets and writes the report.
"""

from __future__ import annotations

import os
import platform
import shutil
import tempfile
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import platformdirs

from tribal_memory.base.config import Settings
from tribal_memory.base.errors import InvalidInput
from tribal_memory.bench.perf_corpus import FILTER_OWNER, generate, questions
from tribal_memory.bench.perf_http import CAPTURE_BATCH, SEARCH_K, SPIN_SETTLE_S, Log
from tribal_memory.bench.perf_server import read_memory_mb
from tribal_memory.bench.perf_size import measure_size, store_settings
from tribal_memory.bench.report import write_report
from tribal_memory.embeddings.base import Embedder


def default_cache_dir() -> Path:
    """Where corpus embeddings are cached: ``<user cache dir>/tribal-memory/bench-perf``."""
    return Path(platformdirs.user_cache_dir("tribal-memory")) / "bench-perf"


def machine() -> dict[str, Any]:
    """The machine: cores, CPU model, RAM (GiB), Python, OS, and load averages now."""
    cpu = "unknown"
    ram_gib: float | None = None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                ram_gib = round(int(line.split()[1]) / 1024**2, 1)
    except OSError:
        pass
    load = [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else []
    return {
        "cores": os.cpu_count(),
        "cpu": cpu,
        "ram_gib": ram_gib,
        "python": platform.python_version(),
        "os": platform.platform(),
        "load_avg_1_5_15_at_start": load,
        "note": (
            "shared machine: other processes may be running; a load average near or "
            "above the core count inflates every figure"
        ),
    }


def _settings_report(options: dict[str, Any], model_id: str) -> dict[str, Any]:
    """What the report's figures were measured with, in words and numbers."""
    return {
        **{k: v for k, v in options.items() if k not in ("cache_dir", "keep_data")},
        "k": SEARCH_K,
        "model": model_id,
        "search_request": "POST /v1/search {query, k: 10} (hybrid, default learned variant)",
        "filtered_request": f"owner {FILTER_OWNER!r}, include_shared false: 5% of the store",
        "client": "httpx, one keep-alive connection, sequential requests",
        "embeddings": (
            "the corpus is loaded through POST /v1/import with embeddings cached under "
            "cache_dir; capture throughput always embeds with the real model"
        ),
        "baseline": "in-process numpy cosine + rank-bm25, top 50 each, 0.6/0.4 min-max fusion",
        "capture": (
            f"POST /v1/memories/batch of {CAPTURE_BATCH} facts (at most capture_n / 2), "
            "batches alternating with and without the near-duplicate check after one "
            "untimed warm-up batch of each; raw embedding of each batch's texts in this "
            f"process, then a pause of {SPIN_SETTLE_S} s before it is sent"
        ),
    }


def _target(
    name: str, value: float | None, limit: float, *, at_most: bool = True
) -> dict[str, Any]:
    """A target row: ``value`` against ``limit`` (at most, or at least), ``met`` a bool."""
    met = value is not None and (value <= limit if at_most else value >= limit)
    sign = "<=" if at_most else ">="
    return {"name": name, "value": value, "target": f"{sign} {limit}", "met": met}


def targets(report: dict[str, Any]) -> list[dict[str, Any]]:
    """Each speed target of issue 5 against the measured figure (``met``: bool)."""
    rows: list[dict[str, Any]] = []

    def add(name: str, value: float | None, limit: float, at_most: bool = True) -> None:
        rows.append(_target(name, value, limit, at_most=at_most))

    for size, figures in report["sizes"].items():
        large = int(size) >= 100_000
        p50, p95 = (30, 60) if large else (20, 40)
        add(f"search p50 ms @{size}", figures["search_p50_ms"], p50)
        add(f"search p95 ms @{size}", figures["search_p95_ms"], p95)
        if large:
            add(f"filtered p50 ms @{size}", figures["filtered_p50_ms"], p50)
            add(f"filtered p95 ms @{size}", figures["filtered_p95_ms"], p95)
        add(f"cache hit p50 ms @{size}", figures["cache_hit_p50_ms"], 5)
        fresh = figures["search_p50_ms"]
        for name in ("after_feedback_search_p50_ms", "after_feedback_learned_p50_ms"):
            if name in figures:  # issue 14: feedback must not slow the store down
                add(
                    f"{name} @{size} (fresh search p50 x 1.2)", figures[name], round(1.2 * fresh, 2)
                )
        add(f"capture / raw embedding @{size}", figures["capture_vs_embed"], 0.8, at_most=False)
        add(
            f"capture without near-duplicate check / raw embedding @{size}",
            figures.get("capture_no_near_duplicates_vs_embed"),
            0.8,
            at_most=False,
        )
    concurrent = report.get("concurrent")
    if concurrent:
        add("concurrent errors", concurrent["errors"], 0)
    return [*rows, *throughput_targets(report)]


def throughput_targets(report: dict[str, Any]) -> list[dict[str, Any]]:
    """Issue 30's throughput and latency targets against the measured figures (``met``: bool)."""
    rows: list[dict[str, Any]] = []
    for size, figures in report["sizes"].items():
        n = int(size)
        if n <= 10_000:
            rows.append(_target(f"search p50 ms @{size} (issue 30)", figures["search_p50_ms"], 10))
            rows.append(
                _target(
                    f"search p50 / brute-force baseline @{size} (issue 30)",
                    figures["search_vs_baseline_p50"],
                    0.7,
                )
            )
        elif n <= 100_000:
            rows.append(_target(f"search p50 ms @{size} (issue 30)", figures["search_p50_ms"], 15))
        rows.append(
            _target(f"cache hit p50 ms @{size} (issue 30)", figures["cache_hit_p50_ms"], 1.5)
        )
        if n <= 100_000:
            rows.append(
                _target(
                    f"capture / raw embedding @{size} (issue 30)",
                    figures["capture_vs_embed"],
                    0.9,
                    at_most=False,
                )
            )
        if n >= 1_000_000:
            rows += million_targets(size, figures)
    concurrent = report.get("concurrent")
    if concurrent and "vs_sequential" in concurrent:
        at = concurrent["memories"]
        rows += [
            _target(
                f"concurrent / sequential rps @{at}",
                concurrent["vs_sequential"],
                1.7,
                at_most=False,
            ),
            _target(f"concurrent p99 ms @{at}", concurrent["p99_ms"], 250),
            _target(f"mixed load errors @{at}", concurrent["mixed"]["errors"], 0),
        ]
    return rows


def million_targets(size: str, figures: dict[str, Any]) -> list[dict[str, Any]]:
    """Issue 30's targets for one million memories in one store (``met``: bool).

    RSS and disk are MiB in the report; the targets (3 GB, 6 GB) are decimal.
    """
    rows = [
        _target(f"search p50 ms @{size} (issue 30)", figures["search_p50_ms"], 40),
        _target(f"search p95 ms @{size} (issue 30)", figures["search_p95_ms"], 80),
        _target(f"1% filtered p50 ms @{size}", figures.get("filtered_1pct_p50_ms"), 40),
        _target(f"1% filtered p95 ms @{size}", figures.get("filtered_1pct_p95_ms"), 80),
        _target(f"ANN recall@10 @{size}", figures["ann_recall_at_10"], 0.98, at_most=False),
        _target(
            f"ANN recall@10, 1% filtered @{size}",
            figures.get("ann_recall_at_10_filtered_1pct"),
            0.98,
            at_most=False,
        ),
        _target(f"server RSS MiB @{size}", figures["rss_peak_mb"], round(3e9 / 2**20, 1)),
    ]
    if figures.get("data_dir_mb") is not None:
        rows.append(_target(f"data dir MiB @{size}", figures["data_dir_mb"], round(6e9 / 2**20, 1)))
    return rows


def _measure_sizes(
    report: dict[str, Any],
    sizes: Sequence[int],
    *,
    embedder: Embedder,
    options: dict[str, Any],
    profile: Path | None,
    log: Log,
) -> None:
    """Measure each size, smallest first, into ``report``'s ``sizes`` and ``concurrent``.

    Locust runs at ``options["concurrent_size"]`` (when ``options["clients"]`` > 0); with
    ``profile``, the in-process search path is profiled at the smallest into
    ``report["profile"]``. Each size's data dir is removed once measured, or
    moved into ``options["keep_data"]`` when that is set.
    """
    ordered = sorted(set(sizes))
    seed, samples = options["seed"], options["samples"]
    work_dir = Path(tempfile.mkdtemp(prefix="tribal-perf-"))
    try:
        for n in ordered:
            figures, locust = measure_size(
                n,
                embedder=embedder,
                options=options,
                work_dir=work_dir,
                concurrent=options["clients"] > 0 and n == options["concurrent_size"],
                log=log,
            )
            report["sizes"][str(n)] = figures
            if locust is not None:
                report["concurrent"] = locust
            if profile is not None and n == ordered[0]:
                log(f"[{n}] profiling the in-process search path")
                from tribal_memory.bench.perf_profile import profile_search

                asked = questions(generate(n, seed), max(50, min(samples, 500)), seed)
                report["profile"] = profile_search(
                    store_settings(options, work_dir / f"data-{n}"),
                    embedder,
                    asked,
                    samples,
                    profile,
                )
            if options.get("keep_data") is not None:
                options["keep_data"].mkdir(parents=True, exist_ok=True)
                shutil.move(work_dir / f"data-{n}", options["keep_data"] / f"data-{n}")
            shutil.rmtree(work_dir / f"data-{n}", ignore_errors=True)
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)


def _concurrent_size(sizes: Sequence[int], chosen: int | None) -> int:
    """The size the concurrent clients run at: ``chosen``, or the largest of ``sizes``.

    Raises:
        InvalidInput: ``chosen`` is not one of ``sizes``.
    """
    if chosen is None:
        return max(sizes)
    if chosen not in sizes:
        raise InvalidInput(f"--concurrent-size {chosen} is not one of --sizes {list(sizes)}")
    return chosen


def run_perf_bench(
    sizes: Sequence[int],
    out: Path | None,
    *,
    cache_dir: Path | None = None,
    samples: int = 300,
    warmup: int = 30,
    capture_n: int = 2048,
    clients: int = 16,
    concurrent_size: int | None = None,
    locust_s: int = 20,
    feedback_searches: int = 3000,
    seed: int = 0,
    profile: Path | None = None,
    store_uri: str | None = None,
    keep_data: Path | None = None,
    command: str | None = None,
    log: Log | None = None,
) -> dict[str, Any]:
    """Run the benchmark at each of ``sizes`` and return (and write to ``out``) the report.

    Args:
        sizes: Corpus sizes (memories in one store), each run on a fresh server.
        out: Where to write the JSON report; None: only returned.
        cache_dir: Cache of corpus embeddings (default :func:`default_cache_dir`).
        samples: Timed requests per latency figure.
        warmup: Untimed requests before each latency figure.
        capture_n: New facts captured for the capture throughput.
        clients: Concurrent locust users.
        concurrent_size: The size locust runs at, one of ``sizes`` (None: the largest).
        locust_s: Seconds of the locust run.
        feedback_searches: Searches with feedback replayed on each built store
            before the ``after_feedback_*`` figures (0: skip that phase).
        seed: Seed of the generated corpus and questions.
        profile: When given, profile the in-process search path at the smallest
            size and write pyinstrument's text report here.
        store_uri: LanceDB location under which each size's store is made
            (``<store_uri>/data-<n>``, e.g. ``s3://bucket/perf``; reached with
            the ``AWS_*`` environment LanceDB reads); None: in each size's
            temp data dir. The SQL tables stay in the data dir's SQLite file,
            and ``data_dir_mb`` then counts only that. Stores made there are
            left in place.
        keep_data: Directory each size's data dir is moved into once measured
            (``<keep_data>/data-<n>``, to inspect or measure again); None:
            removed.
        command: The command line to record in the report.
        log: Progress messages; None for none.

    Returns:
        ``{"machine", "sizes": {"<n>": {...}}, "concurrent": {...}, "targets",
        ...}``; latencies in ms (higher is slower), throughputs per second,
        memory in MiB. ``concurrent`` is null when ``clients`` is 0.

    Raises:
        InvalidInput: no size, a size under 100, or ``concurrent_size`` not
            one of ``sizes``.
        TribalError: the server or locust failed (the detail names the log).
    """
    if not sizes or min(sizes) < 100:
        raise InvalidInput("give at least one size, each of 100 memories or more")
    concurrent_at = _concurrent_size(sizes, concurrent_size)
    say: Log = log or (lambda _message: None)
    report: dict[str, Any] = {
        "benchmark": "perf",
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(),
    }
    from tribal_memory.embeddings.fastembed import FastEmbedEmbedder

    # The same ONNX thread settings as the server, so the floors compare like with like.
    defaults = Settings()
    embedder = FastEmbedEmbedder(
        threads=defaults.embedding_threads, query_threads=defaults.embedding_query_threads
    )
    options = {
        "seed": seed,
        "samples": samples,
        "warmup": warmup,
        "capture_n": capture_n,
        "clients": clients,
        "concurrent_size": concurrent_at,
        "locust_s": locust_s,
        "cache_dir": cache_dir or default_cache_dir(),
        "feedback_searches": feedback_searches,
        "store_uri": store_uri,
        "keep_data": keep_data,
    }
    report["settings"] = _settings_report(options, embedder.model_id)
    report["sizes"] = {}
    report["concurrent"] = None
    _measure_sizes(report, sizes, embedder=embedder, options=options, profile=profile, log=say)
    report["bench_process_peak_rss_mb"] = read_memory_mb(os.getpid()).get("peak_mb")
    report["load_avg_1_5_15_at_end"] = [round(x, 2) for x in os.getloadavg()]
    report["targets"] = targets(report)
    report["command"] = command
    write_report(report, out)
    return report


__all__ = ["default_cache_dir", "machine", "run_perf_bench", "targets", "throughput_targets"]

"""One size of ``tribal-memory bench perf``: every figure for a store of ``n`` memories.

A server over a fresh data dir is loaded with the generated corpus and
measured over HTTP (:mod:`tribal_memory.bench.perf_http`); once it stops, the
vector index's recall is checked on its data dir and the plain baseline
(:mod:`tribal_memory.bench.perf_baseline`) is measured in-process.
:mod:`tribal_memory.bench.perf` runs this at each size and writes the report.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tribal_memory.base.config import Settings
from tribal_memory.base.errors import StoreUnavailable
from tribal_memory.base.models import SearchFilters
from tribal_memory.bench.perf_baseline import PlainBaseline
from tribal_memory.bench.perf_concurrent import concurrent_figures
from tribal_memory.bench.perf_corpus import (
    FILTER_OWNER,
    SMALL_OWNER,
    Fact,
    cached_embeddings,
    generate,
    questions,
)
from tribal_memory.bench.perf_cpu import cpu_figures
from tribal_memory.bench.perf_feedback import after_feedback
from tribal_memory.bench.perf_footprint import PeakSampler, footprint_figures, peak_mb
from tribal_memory.bench.perf_http import (
    CAPTURE_BATCH,
    SEARCH_K,
    Log,
    capture_figures,
    check_response,
    load_corpus,
    p50_p95,
    search_figures,
    timed,
    wait_until_indexed,
)
from tribal_memory.bench.perf_server import ServerProcess
from tribal_memory.embeddings.base import Embedder, Vector
from tribal_memory.store.lance_footprint import dir_bytes
from tribal_memory.store.lance_table import read_ivf_segments


@dataclass(frozen=True)
class _SizeInputs:
    """What one size is measured with.

    The corpus and its vectors, the questions (over the whole store and over
    :data:`FILTER_OWNER`'s and :data:`SMALL_OWNER`'s memories) and the new facts the capture figures
    store, in batches of ``capture_batch``.
    """

    facts: list[Fact]
    vectors: Vector
    from_cache: bool
    asked: list[str]
    asked_owned: list[str]
    asked_small: list[str]
    capture_facts: list[Fact]
    capture_batch: int


def _size_inputs(n: int, *, embedder: Embedder, options: dict[str, Any], log: Log) -> _SizeInputs:
    """Generate the corpus of ``n`` memories, embed it (or read the cache), pick the questions."""
    seed, samples = options["seed"], options["samples"]
    facts = generate(n, seed)
    log(f"[{n}] corpus generated; embedding it (or reading the cache)")
    vectors, from_cache = cached_embeddings(
        facts,
        embedder,
        options["cache_dir"],
        progress=lambda done, total: log(f"  embedded {done}/{total}"),
    )
    asked = questions(facts, max(50, min(samples, 500)), seed)
    asked_owned = questions(facts, max(50, min(samples, 500)), seed, owner=FILTER_OWNER)
    asked_small = questions(facts, max(50, min(samples, 500)), seed, owner=SMALL_OWNER)
    # Timed capture batches, plus a warm-up batch of each kind (see capture_vs_embed).
    capture_batch = max(1, min(CAPTURE_BATCH, options["capture_n"] // 2))
    capture_facts = generate(
        options["capture_n"] + 2 * capture_batch,
        seed + 1,
        exclude=frozenset(f.content for f in facts),
    )
    return _SizeInputs(
        facts, vectors, from_cache, asked, asked_owned, asked_small, capture_facts, capture_batch
    )


def store_settings(options: dict[str, Any], data_dir: Path) -> Settings:
    """Settings that open the store the server of ``data_dir`` wrote.

    Its LanceDB table is under ``options["store_uri"]`` (one prefix per data
    dir) when that is set, else in ``data_dir``.
    """
    store_uri = options.get("store_uri")
    lancedb_uri = f"{store_uri.rstrip('/')}/{data_dir.name}" if store_uri else ""
    return Settings(data_dir=data_dir, lancedb_uri=lancedb_uri)


def measure_size(
    n: int,
    *,
    embedder: Embedder,
    options: dict[str, Any],
    work_dir: Path,
    concurrent: bool,
    log: Log,
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Every figure for a store of ``n`` memories; returns (figures, locust results or None)."""
    inputs = _size_inputs(n, embedder=embedder, options=options, log=log)
    data_dir = work_dir / f"data-{n}"
    figures: dict[str, Any] = {"memories": n, "embeddings_from_cache": inputs.from_cache}
    served, locust = _measure_server(
        n,
        inputs,
        embedder=embedder,
        options=options,
        work_dir=work_dir,
        concurrent=concurrent,
        log=log,
    )
    figures.update(served)
    log(f"[{n}] CPU time per search, in-process")
    figures.update(
        cpu_figures(
            store_settings(options, data_dir),
            embedder,
            inputs.asked,
            options["samples"],
            warmup=_other_questions(inputs, options["samples"], options["seed"]),
        )
    )
    log(f"[{n}] vector index recall against exact search")
    figures.update(
        ann_recall(
            store_settings(options, data_dir),
            embedder,
            dict(
                zip(
                    RECALL_OWNERS,
                    (inputs.asked, inputs.asked_owned, inputs.asked_small),
                    strict=True,
                )
            ),
        )
    )
    log(f"[{n}] baseline: numpy cosine + rank-bm25, in-process")
    figures.update(
        _baseline(
            inputs.facts,
            inputs.vectors,
            embedder,
            inputs.asked,
            samples=options["samples"],
            warmup=options["warmup"],
        )
    )
    figures["search_vs_baseline_p50"] = round(
        figures["search_p50_ms"] / figures["baseline_search_p50_ms"], 3
    )
    if options.get("store_uri"):
        # With the store on object storage, only the local part (SQLite) is counted.
        figures["data_dir_mb"] = round(dir_bytes(data_dir) / 1024**2, 1)
    else:
        log(f"[{n}] data dir: one optimize(), then its size by part")
        figures.update(footprint_figures(data_dir))
    return figures, locust


def _other_questions(inputs: _SizeInputs, count: int, seed: int) -> list[str]:
    """Up to ``count`` questions that are neither asked nor fed back in the timed figures."""
    asked = set(inputs.asked)
    # seed + 2 draws the after-feedback phase's questions (perf_feedback).
    return [q for q in questions(inputs.facts, 2 * count, seed + 3) if q not in asked][:count]


def _measure_server(
    n: int,
    inputs: _SizeInputs,
    *,
    embedder: Embedder,
    options: dict[str, Any],
    work_dir: Path,
    concurrent: bool,
    log: Log,
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The figures measured over HTTP on a server over a fresh ``data-<n>`` dir.

    Returns:
        (figures, locust results or None): memory, ingest, search,
        after-feedback and capture figures, in that order; locust's results
        only when ``concurrent``.
    """
    seed, samples, warmup = options["seed"], options["samples"], options["warmup"]
    figures: dict[str, Any] = {}
    locust: dict[str, Any] | None = None
    data_dir = work_dir / f"data-{n}"
    lancedb_uri = store_settings(options, data_dir).lancedb_uri
    with (
        ServerProcess(data_dir, work_dir / f"server-{n}.log", lancedb_uri) as server,
        httpx.Client(base_url=server.base_url, timeout=600.0) as client,
    ):
        figures["rss_idle_mb"] = server.memory_mb().get("rss_mb")
        with PeakSampler(work_dir / f"data-{n}") as disk:
            ingest_s, curve = load_corpus(
                client, server, inputs.facts, inputs.vectors, embedder, log
            )
            figures["settle_s"] = round(wait_until_indexed(client), 1)
        # The IVF segments the timed searches read (each one adds to every vector search).
        try:
            figures["ann_segments_at_search"] = read_ivf_segments(lancedb_uri)
        except StoreUnavailable:  # a location this process cannot read by itself
            figures["ann_segments_at_search"] = None
        figures["data_dir_peak_mb"] = peak_mb(disk)
        figures["ingest_s"] = round(ingest_s, 1)
        figures["ingest_per_s"] = round(n / ingest_s, 1)
        figures["rss_while_loading_mb"] = curve
        log(f"[{n}] searching ({warmup} warm-up + {samples} timed, each kind)")
        figures.update(
            search_figures(
                client,
                embedder,
                inputs.asked,
                inputs.asked_owned,
                inputs.asked_small,
                samples=samples,
                warmup=warmup,
            )
        )
        if options["feedback_searches"]:
            log(f"[{n}] after feedback ({options['feedback_searches']} searches with feedback)")
            figures.update(
                after_feedback(
                    client,
                    inputs.facts,
                    searches=options["feedback_searches"],
                    seed=seed,
                    samples=samples,
                    warmup=warmup,
                    log=log,
                )
            )
        # After the feedback phase: its searches then run on the store the fresh ones
        # ran on, not on one grown by the captured facts (20% more at 10k).
        log(f"[{n}] capture vs raw embedding ({len(inputs.capture_facts)} new facts, two kinds)")
        figures.update(
            capture_figures(client, embedder, inputs.capture_facts, inputs.capture_batch)
        )
        if concurrent:
            log(
                f"[{n}] locust: 1 client, {options['clients']} clients and "
                f"{options['clients']} mixed agents, {options['locust_s']} s each"
            )
            locust = concurrent_figures(
                server.base_url,
                [q for q in inputs.asked if q != inputs.asked[0]],  # asked[0] is the cached query
                work_dir,
                clients=options["clients"],
                seconds=options["locust_s"],
            )
            locust["memories"] = n
        memory = server.memory_mb()
        figures["rss_mb"] = memory.get("rss_mb")
        figures["rss_peak_mb"] = memory.get("peak_mb")
        stats = client.get("/v1/stats")
        check_response(stats, "stats")
        figures["index_cache_mb"] = round(stats.json()["cache_bytes"] / 1024**2, 1)
    return figures, locust


def _baseline(
    facts: Sequence[Fact],
    vectors: Vector,
    embedder: Embedder,
    asked: Sequence[str],
    *,
    samples: int,
    warmup: int,
) -> dict[str, Any]:
    """Build time (s) and search latency (ms) of the in-process plain baseline."""
    started = time.perf_counter()
    baseline = PlainBaseline([f.content for f in facts], vectors, embedder)
    figures: dict[str, Any] = {"baseline_build_s": round(time.perf_counter() - started, 2)}
    baseline_samples = samples if len(facts) <= 20_000 else max(20, samples // 5)

    def baseline_search(query: str) -> object:
        return baseline.search(query, SEARCH_K)

    timed(baseline_search, asked, min(warmup, 5))
    times = timed(baseline_search, asked, baseline_samples)
    figures["baseline_search_p50_ms"], figures["baseline_search_p95_ms"] = p50_p95(times)
    return figures


RECALL_OWNERS: dict[str, str | None] = {
    "": None,
    "_filtered": FILTER_OWNER,
    "_filtered_1pct": SMALL_OWNER,
}
"""Suffix of an ANN figure -> the owner its searches are filtered to (None: the whole store)."""


def ann_recall(
    settings: Settings, embedder: Embedder, asked: Mapping[str, Sequence[str]]
) -> dict[str, Any]:
    """recall@10 of the store's vector search against exact search, and its latency.

    ``asked`` maps a suffix of :data:`RECALL_OWNERS` to its questions. Opens
    the store ``settings`` name (a stopped server's, or a kept one with
    another ``ann_nprobes``) and compares, per question (at most 100 of each
    kind), the ids of ``vector_search`` with those of
    ``vector_search(exact=True)``; with no IVF index yet both are exact and
    recall is 1.0.

    Returns:
        ``ann_index``, ``ann_segments``, ``ann_probes`` (partitions probed;
        None without an index), and per suffix ``ann_recall_at_10<suffix>``
        (higher is better) and ``ann_p50_ms<suffix>`` (the vector search
        alone, in-process; lower is faster).
    """
    from tribal_memory.service.memory_service import MemoryService
    from tribal_memory.store.lance_index import probes_for
    from tribal_memory.store.lancedb import LanceMemoryStore

    found: dict[str, Any] = {}
    with MemoryService(settings, embedder=embedder) as service:
        store = service.store
        # The IVF index and exact search are LanceDB's: this measures that store.
        assert isinstance(store, LanceMemoryStore)
        found["ann_index"] = store.index_state()["ann"]
        ann = store.ann_index_stats()
        found["ann_segments"] = ann["segments"] if ann is not None else None
        found["ann_quantised"] = bool(ann["quantised"]) if ann is not None else None
        found["ann_probes"] = (
            probes_for(settings.ann_nprobes, ann["trained_rows"]) if ann is not None else None
        )
        for suffix, queries in asked.items():
            filters = SearchFilters(owner=RECALL_OWNERS[suffix])
            recalls, times = [], []
            for query in queries[:100]:
                vector = embedder.embed(query, query=True)
                started = time.perf_counter()
                approx = {s.memory_id for s in store.vector_search(vector, filters, SEARCH_K)}
                times.append((time.perf_counter() - started) * 1000)
                truth = store.vector_search(vector, filters, SEARCH_K, exact=True)
                exact = {s.memory_id for s in truth}
                recalls.append(len(approx & exact) / max(1, len(exact)))
            found[f"ann_recall_at_10{suffix}"] = round(sum(recalls) / max(1, len(recalls)), 4)
            found[f"ann_p50_ms{suffix}"] = p50_p95(times)[0]
    return found

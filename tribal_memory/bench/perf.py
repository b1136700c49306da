"""``tribal-memory bench perf``: latency, throughput and memory of a real server process.

For each corpus size the benchmark starts ``python -m tribal_memory.interfaces.api.server``
on 127.0.0.1 over a fresh temp data dir, loads the generated corpus
(:mod:`tribal_memory.bench.perf_corpus`) through ``POST /v1/import`` with
embeddings computed once and cached outside the repository, and measures over
HTTP with a keep-alive client, after a warm-up:

- hybrid search, k=10, query embedding included (p50/p95), over the whole
  store and with an owner filter selecting 5% of it;
- a query-cache hit (the query made cache-eligible by three rounds of feedback);
- batch capture of new short facts (``POST /v1/memories/batch``, real model)
  against the raw ``embed_batch`` throughput of the same model on the same
  texts, interleaved chunk by chunk so machine load hits both alike;
- the server's resident memory while ingesting and at the end (``/proc``);
- the query embedding alone, in-process: the floor of a search;
- the plain baseline (:mod:`tribal_memory.bench.perf_baseline`), in-process.

At the largest size, locust drives the server with concurrent clients. With
``profile``, the in-process search path at the smallest size is profiled with
pyinstrument and the time split by where it goes.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import platformdirs

from tribal_memory.base.config import Settings
from tribal_memory.base.errors import InvalidInput, TribalError
from tribal_memory.base.models import Memory, SearchFilters, memory_id_for
from tribal_memory.bench.metrics import percentile
from tribal_memory.bench.perf_baseline import PlainBaseline
from tribal_memory.bench.perf_corpus import (
    FILTER_OWNER,
    Fact,
    cached_embeddings,
    generate,
    questions,
)
from tribal_memory.bench.perf_server import ServerProcess, read_memory_mb, run_locust
from tribal_memory.embeddings.base import Embedder, Vector
from tribal_memory.ops.transfer.records import FORMAT, VERSION, dumps, memory_record

Log = Callable[[str], None]

IMPORT_CHUNK = 2000
"""Memories per ``POST /v1/import`` request while loading a corpus (about 5 MB)."""
CAPTURE_BATCH = 256
"""Memories per ``POST /v1/memories/batch`` request in the capture measurement."""
SEARCH_K = 10


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


def _import_body(facts: Sequence[Fact], vectors: Vector, embedder: Embedder) -> bytes:
    now = datetime.now(UTC)
    header = {
        "type": "header",
        "format": FORMAT,
        "version": VERSION,
        "embedding_model": embedder.model_id,
        "embedding_dim": embedder.dim,
        "exported_at": now.isoformat(),
        "owner": None,
    }
    lines = [dumps(header)]
    for fact, vector in zip(facts, vectors, strict=True):
        memory = Memory(
            memory_id=memory_id_for(fact.owner, fact.content),
            content=fact.content,
            owner=fact.owner,
            kind="fact",
            tags=(),
            source=None,
            doc_id=None,
            chunk_index=None,
            parent_id=None,
            created_at=now,
            updated_at=now,
            event_time=None,
            metadata={},
        )
        lines.append(dumps(memory_record(memory, vector)))
    end = {"type": "end", "counts": {"memory": len(facts), "relation": 0, "row": 0}}
    lines.append(dumps(end))
    return "".join(lines).encode()


def _load(
    client: httpx.Client,
    server: ServerProcess,
    facts: Sequence[Fact],
    vectors: Vector,
    embedder: Embedder,
    log: Log,
) -> tuple[float, list[list[float]]]:
    """Import the corpus; returns (seconds, [[memories loaded, server RSS MiB], ...])."""
    curve: list[list[float]] = []
    started = time.perf_counter()
    for start in range(0, len(facts), IMPORT_CHUNK):
        end = start + IMPORT_CHUNK
        body = _import_body(facts[start:end], vectors[start:end], embedder)
        response = client.post(
            "/v1/import", content=body, headers={"content-type": "application/x-ndjson"}
        )
        _check(response, "import")
        loaded = min(end, len(facts))
        curve.append([loaded, server.memory_mb().get("rss_mb", 0.0)])
        log(f"  loaded {loaded}/{len(facts)} memories, server RSS {curve[-1][1]:.0f} MiB")
    return time.perf_counter() - started, curve


def _check(response: httpx.Response, what: str) -> None:
    if response.status_code >= 400:
        raise TribalError(f"{what} failed: HTTP {response.status_code}: {response.text[:300]}")


def _timed(call: Callable[[str], object], inputs: Sequence[str], samples: int) -> list[float]:
    """Milliseconds of ``samples`` calls, cycling through ``inputs``."""
    times: list[float] = []
    for i in range(samples):
        text = inputs[i % len(inputs)]
        started = time.perf_counter()
        call(text)
        times.append((time.perf_counter() - started) * 1000)
    return times


def _search_call(
    client: httpx.Client, extra: dict[str, Any], expect_cached: bool | None = None
) -> Callable[[str], object]:
    def call(query: str) -> object:
        response = client.post("/v1/search", json={"query": query, "k": SEARCH_K, **extra})
        _check(response, "search")
        body: dict[str, Any] = response.json()
        if expect_cached is not None and body["cached"] != expect_cached:
            how = "was not answered" if expect_cached else "was unexpectedly answered"
            raise TribalError(f"search of {query!r} {how} from the query cache")
        return body

    return call


def _make_cached(client: httpx.Client, query: str) -> None:
    """Three searches with feedback using their top hit: enough for a cache hit (defaults)."""
    for _ in range(3):
        response = client.post("/v1/search", json={"query": query, "k": SEARCH_K, "feedback": True})
        _check(response, "search with feedback")
        body = response.json()
        used = [body["hits"][0]["memory_id"]] if body["hits"] else []
        feedback = {"retrieval_id": body["retrieval_id"], "used_ids": used}
        _check(client.post("/v1/feedback", json=feedback), "feedback")


def _replay_feedback(
    client: httpx.Client, facts: Sequence[Fact], fed: Sequence[str], rounds: int
) -> int:
    """Search each of ``fed`` ``rounds`` times with feedback, as an agent shown the top 10 would.

    The agent reports as used the hits that answer the question (the facts it
    was generated from) and nothing when none was shown. Round after round
    this makes feedback weights, then anchors (two uses) and query-cache
    entries (three), the way agents using the server do (issue 14).

    Returns:
        The number of searches made (``len(fed) * rounds``).
    """
    answers = _answers(facts)
    searches = 0
    for _ in range(rounds):
        for query in fed:
            _search_and_report(client, query, answers)
            searches += 1
    return searches


def _after_feedback(
    client: httpx.Client,
    facts: Sequence[Fact],
    *,
    searches: int,
    seed: int,
    samples: int,
    warmup: int,
    log: Log,
) -> dict[str, Any]:
    """Replay ``searches`` searches with feedback, then time searches on the store they left.

    The questions are split: the fed ones are asked in 3 rounds (about
    ``searches`` in all); the timed ones were never fed back, so a learned
    search misses the cache and computes every learned part. Store health
    (``GET /v1/stats``) is read right after the replay.

    Returns:
        ``after_feedback_searches``, ``after_feedback_search_p50_ms`` /
        ``_p95_ms`` (plain hybrid, ``learned: []``),
        ``after_feedback_learned_p50_ms`` / ``_p95_ms`` (the default learned
        variant; ``after_feedback_learned_cache_hit_rate``: the share of those
        answered from the cache), ``after_feedback_interleaved_p50_ms`` /
        ``_p95_ms`` (each search right after a feedback: :func:`_interleaved`),
        ``after_feedback_fragments``, ``_small_fragments``,
        ``_unindexed_rows``, ``_versions``.
    """
    rounds = 3
    timed_n = max(50, min(samples, 300))
    pool = questions(facts, searches // rounds + timed_n, seed + 2)
    timed, fed = pool[:timed_n], pool[timed_n:]
    log(f"  replaying feedback: {len(fed)} questions x {rounds} rounds")
    started = time.perf_counter()
    done = _replay_feedback(client, facts, fed, rounds)
    figures: dict[str, Any] = {
        "after_feedback_searches": done,
        "after_feedback_replay_s": round(time.perf_counter() - started, 1),
    }
    stats = client.get("/v1/stats")
    _check(stats, "stats")
    health = stats.json()
    for name in ("fragments", "small_fragments", "unindexed_rows", "versions"):
        figures[f"after_feedback_{name}"] = health[name]
    plain = _search_call(client, {"learned": []})
    _timed(plain, timed, warmup)
    figures["after_feedback_search_p50_ms"], figures["after_feedback_search_p95_ms"] = _stats(
        _timed(plain, timed, samples)
    )
    learned = _search_call(client, {})
    _timed(learned, timed, warmup)
    times, hits = [], 0
    for i in range(samples):
        started = time.perf_counter()
        body: Any = learned(timed[i % len(timed)])
        times.append((time.perf_counter() - started) * 1000)
        hits += bool(body["cached"])
    figures["after_feedback_learned_p50_ms"], figures["after_feedback_learned_p95_ms"] = _stats(
        times
    )
    # Never fed back themselves, a few may still hit the cache through a fed question
    # within the semantic threshold that names the same numbers.
    figures["after_feedback_learned_cache_hit_rate"] = round(hits / samples, 4)
    figures.update(_interleaved(client, facts, timed, samples))
    return figures


def _answers(facts: Sequence[Fact]) -> dict[str, set[str]]:
    """Question -> the contents of the facts that answer it."""
    answers: dict[str, set[str]] = {}
    for fact in facts:
        answers.setdefault(fact.question, set()).add(fact.content)
    return answers


def _search_and_report(client: httpx.Client, query: str, answers: dict[str, set[str]]) -> float:
    """One search with feedback, then feedback on the hits that answer it; the search's ms."""
    started = time.perf_counter()
    response = client.post("/v1/search", json={"query": query, "k": SEARCH_K, "feedback": True})
    elapsed = (time.perf_counter() - started) * 1000
    _check(response, "search with feedback")
    body = response.json()
    gold = answers.get(query, set())
    used = [h["memory_id"] for h in body["hits"] if h["content"] in gold]
    feedback = {"retrieval_id": body["retrieval_id"], "used_ids": used}
    _check(client.post("/v1/feedback", json=feedback), "feedback")
    return elapsed


def _interleaved(
    client: httpx.Client, facts: Sequence[Fact], questions_: Sequence[str], samples: int
) -> dict[str, float]:
    """Time searches that each follow a feedback, as an agent's search -> use -> report loop.

    Every feedback changes the learned tables, so the search after it cannot
    reuse the learned indexes the previous one built; this is what an agent
    that reports after each answer meets. The first 10 are untimed.

    Returns:
        ``after_feedback_interleaved_p50_ms`` / ``_p95_ms``: the searches (with
        ``feedback: true``, default learned variant), not the feedback calls.
    """
    answers = _answers(facts)
    n = max(20, min(samples, 100))
    times = [
        _search_and_report(client, questions_[i % len(questions_)], answers) for i in range(n + 10)
    ]
    times = times[10:]
    p50, p95 = _stats(times)
    return {"after_feedback_interleaved_p50_ms": p50, "after_feedback_interleaved_p95_ms": p95}


def _stats(times: Sequence[float]) -> tuple[float, float]:
    return round(percentile(times, 50), 2), round(percentile(times, 95), 2)


def _capture_batch(
    client: httpx.Client, embedder: Embedder, chunk: Sequence[Fact], *, near_duplicates: bool
) -> tuple[float, float]:
    """(seconds of ``embed_batch`` in this process, seconds of the HTTP capture) of ``chunk``."""
    began = time.perf_counter()
    embedder.embed_batch([f.content for f in chunk])
    embed_s = time.perf_counter() - began
    body = {
        "memories": [{"content": f.content, "owner": f.owner} for f in chunk],
        "near_duplicates": near_duplicates,
    }
    began = time.perf_counter()
    response = client.post("/v1/memories/batch", json=body)
    capture_s = time.perf_counter() - began
    _check(response, "batch capture")
    created = sum(r["status"] == "created" for r in response.json()["results"])
    if created != len(chunk):
        raise TribalError(f"batch capture created {created} of {len(chunk)} new memories")
    return embed_s, capture_s


def _capture_vs_embed(
    client: httpx.Client, embedder: Embedder, facts: Sequence[Fact], batch: int
) -> dict[str, float]:
    """Captures/s over HTTP with and without the near-duplicate check, against raw embedding.

    Batches of ``batch`` facts alternate between the two kinds of capture,
    and each is embedded in this process just before it is sent, so a change
    in the machine's load touches both kinds and their raw embedding alike.
    The first batch of each kind is a warm-up, not timed: a server's first
    near-duplicate check per owner loads index pages that later ones find
    cached, as its first searches do. ``facts`` must hold at least four
    batches, so each kind has a timed one.

    Returns:
        ``capture_per_s`` / ``embed_per_s`` (with the check, the default) and
        ``capture_no_near_duplicates_per_s`` / ``..._embed_per_s`` (without),
        each over the same texts; per second, higher is faster.
    """
    embed_s = {True: 0.0, False: 0.0}  # keyed by "with the check"
    capture_s = {True: 0.0, False: 0.0}
    counted = {True: 0, False: 0}
    for number, start in enumerate(range(0, len(facts), batch)):
        chunk = facts[start : start + batch]
        check = number % 2 == 0
        embed, capture = _capture_batch(client, embedder, chunk, near_duplicates=check)
        if number >= 2:  # after the warm-up batch of each kind
            embed_s[check] += embed
            capture_s[check] += capture
            counted[check] += len(chunk)
    return {
        "capture_per_s": round(counted[True] / capture_s[True], 1),
        "embed_per_s": round(counted[True] / embed_s[True], 1),
        "capture_no_near_duplicates_per_s": round(counted[False] / capture_s[False], 1),
        "capture_no_near_duplicates_embed_per_s": round(counted[False] / embed_s[False], 1),
    }


def _query_embed_ms(embedder: Embedder, queries: Sequence[str], samples: int) -> list[float]:
    return _timed(lambda q: embedder.embed(q, query=True), queries, samples)


def _measure_size(
    n: int,
    *,
    embedder: Embedder,
    options: dict[str, Any],
    work_dir: Path,
    concurrent: bool,
    log: Log,
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Every figure for a store of ``n`` memories; returns (figures, locust results or None)."""
    seed, samples, warmup = options["seed"], options["samples"], options["warmup"]
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
    # Timed capture batches, plus a warm-up batch of each kind (see _capture_vs_embed).
    capture_batch = max(1, min(CAPTURE_BATCH, options["capture_n"] // 2))
    capture_facts = generate(
        options["capture_n"] + 2 * capture_batch,
        seed + 1,
        exclude=frozenset(f.content for f in facts),
    )
    data_dir = work_dir / f"data-{n}"
    figures: dict[str, Any] = {"memories": n, "embeddings_from_cache": from_cache}
    locust: dict[str, Any] | None = None
    with (
        ServerProcess(data_dir, work_dir / f"server-{n}.log") as server,
        httpx.Client(base_url=server.base_url, timeout=600.0) as client,
    ):
        figures["rss_idle_mb"] = server.memory_mb().get("rss_mb")
        ingest_s, curve = _load(client, server, facts, vectors, embedder, log)
        figures["ingest_s"] = round(ingest_s, 1)
        figures["ingest_per_s"] = round(n / ingest_s, 1)
        figures["rss_while_loading_mb"] = curve

        log(f"[{n}] searching ({warmup} warm-up + {samples} timed, each kind)")
        search = _search_call(client, {})
        _timed(search, asked, warmup)
        figures["search_p50_ms"], figures["search_p95_ms"] = _stats(_timed(search, asked, samples))
        filtered = _search_call(client, {"owner": FILTER_OWNER, "include_shared": False})
        _timed(filtered, asked_owned, warmup)
        times = _timed(filtered, asked_owned, samples)
        figures["filtered_p50_ms"], figures["filtered_p95_ms"] = _stats(times)
        figures["filtered_share"] = 1 / 20

        cached_query = asked[0]
        _make_cached(client, cached_query)
        hit = _search_call(client, {}, expect_cached=True)
        _timed(hit, [cached_query], warmup)
        figures["cache_hit_p50_ms"], figures["cache_hit_p95_ms"] = _stats(
            _timed(hit, [cached_query], samples)
        )

        floor = _query_embed_ms(embedder, asked, samples)
        figures["query_embed_p50_ms"] = round(percentile(floor, 50), 2)
        # A cache hit on the exact key embeds nothing, so it has no floor to compare with.
        for name in ("search_p50_ms", "search_p95_ms", "filtered_p50_ms", "filtered_p95_ms"):
            above = figures[name] - figures["query_embed_p50_ms"]
            figures[name.replace("_ms", "_above_embed_ms")] = round(above, 2)

        log(f"[{n}] capture vs raw embedding ({len(capture_facts)} new facts, two kinds)")
        capture = _capture_vs_embed(client, embedder, capture_facts, capture_batch)
        figures.update(capture)
        figures["capture_vs_embed"] = round(capture["capture_per_s"] / capture["embed_per_s"], 3)
        # The same without the near-duplicate search: what the storage path costs.
        figures["capture_no_near_duplicates_vs_embed"] = round(
            capture["capture_no_near_duplicates_per_s"]
            / capture["capture_no_near_duplicates_embed_per_s"],
            3,
        )

        if options["feedback_searches"]:
            log(f"[{n}] after feedback ({options['feedback_searches']} searches with feedback)")
            figures.update(
                _after_feedback(
                    client,
                    facts,
                    searches=options["feedback_searches"],
                    seed=seed,
                    samples=samples,
                    warmup=warmup,
                    log=log,
                )
            )

        if concurrent:
            log(f"[{n}] locust: {options['clients']} clients for {options['locust_s']} s")
            locust = run_locust(
                server.base_url,
                [q for q in asked if q != cached_query],
                work_dir,
                clients=options["clients"],
                seconds=options["locust_s"],
            )
            locust["memories"] = n
        memory = server.memory_mb()
        figures["rss_mb"] = memory.get("rss_mb")
        figures["rss_peak_mb"] = memory.get("peak_mb")

    log(f"[{n}] vector index recall against exact search")
    figures.update(_ann_recall(data_dir, embedder, asked, asked_owned))

    log(f"[{n}] baseline: numpy cosine + rank-bm25, in-process")
    started = time.perf_counter()
    baseline = PlainBaseline([f.content for f in facts], vectors, embedder)
    figures["baseline_build_s"] = round(time.perf_counter() - started, 2)
    baseline_samples = samples if n <= 20_000 else max(20, samples // 5)

    def baseline_search(query: str) -> object:
        return baseline.search(query, SEARCH_K)

    _timed(baseline_search, asked, min(warmup, 5))
    times = _timed(baseline_search, asked, baseline_samples)
    figures["baseline_search_p50_ms"], figures["baseline_search_p95_ms"] = _stats(times)
    figures["search_vs_baseline_p50"] = round(
        figures["search_p50_ms"] / figures["baseline_search_p50_ms"], 3
    )
    figures["data_dir_mb"] = round(
        sum(p.stat().st_size for p in data_dir.rglob("*") if p.is_file()) / 1024**2, 1
    )
    return figures, locust


def _ann_recall(
    data_dir: Path, embedder: Embedder, asked: Sequence[str], asked_owned: Sequence[str]
) -> dict[str, Any]:
    """recall@10 of the server's vector search against exact search over the same store.

    Opens the stopped server's data dir with the default settings and
    compares, per question (at most 100 of each kind), the ids of
    ``vector_search`` with those of ``vector_search(exact=True)``; with no IVF
    index yet both are exact and recall is 1.0.
    """
    from tribal_memory.service.memory_service import MemoryService
    from tribal_memory.store.lancedb import LanceMemoryStore

    found: dict[str, Any] = {}
    with MemoryService(Settings(data_dir=data_dir), embedder=embedder) as service:
        store = service.store
        # The IVF index and exact search are LanceDB's: this measures that store.
        assert isinstance(store, LanceMemoryStore)
        found["ann_index"] = store.index_state()["ann"]
        ann = store.ann_index_stats()
        found["ann_segments"] = ann["segments"] if ann is not None else None
        for name, queries, filters in (
            ("ann_recall_at_10", asked, SearchFilters()),
            ("ann_recall_at_10_filtered", asked_owned, SearchFilters(owner=FILTER_OWNER)),
        ):
            recalls = []
            for query in queries[:100]:
                vector = embedder.embed(query, query=True)
                found_ids = store.vector_search(vector, filters, SEARCH_K)
                approx = {s.memory.memory_id for s in found_ids}
                truth = store.vector_search(vector, filters, SEARCH_K, exact=True)
                exact = {s.memory.memory_id for s in truth}
                recalls.append(len(approx & exact) / max(1, len(exact)))
            found[name] = round(sum(recalls) / max(1, len(recalls)), 4)
    return found


def targets(report: dict[str, Any]) -> list[dict[str, Any]]:
    """Each speed target of issue 5 against the measured figure (``met``: bool)."""
    rows: list[dict[str, Any]] = []

    def add(name: str, value: float | None, limit: float, at_most: bool = True) -> None:
        met = value is not None and (value <= limit if at_most else value >= limit)
        sign = "<=" if at_most else ">="
        rows.append({"name": name, "value": value, "target": f"{sign} {limit}", "met": met})

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
    return rows


def run_perf_bench(
    sizes: Sequence[int],
    out: Path | None,
    *,
    cache_dir: Path | None = None,
    samples: int = 300,
    warmup: int = 30,
    capture_n: int = 2048,
    clients: int = 16,
    locust_s: int = 20,
    feedback_searches: int = 3000,
    seed: int = 0,
    profile: Path | None = None,
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
        clients: Concurrent locust users (at the largest size).
        locust_s: Seconds of the locust run.
        feedback_searches: Searches with feedback replayed on each built store
            before the ``after_feedback_*`` figures (0: skip that phase).
        seed: Seed of the generated corpus and questions.
        profile: When given, profile the in-process search path at the smallest
            size and write pyinstrument's text report here.
        command: The command line to record in the report.
        log: Progress messages; None for none.

    Returns:
        ``{"machine", "sizes": {"<n>": {...}}, "concurrent": {...}, "targets",
        ...}``; latencies in ms (higher is slower), throughputs per second,
        memory in MiB. ``concurrent`` is null when ``clients`` is 0.

    Raises:
        InvalidInput: no size, or a size under 100.
        TribalError: the server or locust failed (the detail names the log).
    """
    if not sizes or min(sizes) < 100:
        raise InvalidInput("give at least one size, each of 100 memories or more")
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
        "locust_s": locust_s,
        "cache_dir": cache_dir or default_cache_dir(),
        "feedback_searches": feedback_searches,
    }
    report["settings"] = {
        **{k: v for k, v in options.items() if k != "cache_dir"},
        "k": SEARCH_K,
        "model": embedder.model_id,
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
            "process just before it"
        ),
    }
    report["sizes"] = {}
    report["concurrent"] = None
    ordered = sorted(set(sizes))
    work_dir = Path(tempfile.mkdtemp(prefix="tribal-perf-"))
    try:
        for n in ordered:
            figures, locust = _measure_size(
                n,
                embedder=embedder,
                options=options,
                work_dir=work_dir,
                concurrent=clients > 0 and n == ordered[-1],
                log=say,
            )
            report["sizes"][str(n)] = figures
            if locust is not None:
                report["concurrent"] = locust
            if profile is not None and n == ordered[0]:
                say(f"[{n}] profiling the in-process search path")
                from tribal_memory.bench.perf_profile import profile_search

                asked = questions(generate(n, seed), max(50, min(samples, 500)), seed)
                report["profile"] = profile_search(
                    work_dir / f"data-{n}", embedder, asked, samples, profile
                )
            shutil.rmtree(work_dir / f"data-{n}", ignore_errors=True)
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)
    report["bench_process_peak_rss_mb"] = read_memory_mb(os.getpid()).get("peak_mb")
    report["load_avg_1_5_15_at_end"] = [round(x, 2) for x in os.getloadavg()]
    report["targets"] = targets(report)
    report["command"] = command
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(report, indent=2) + "\n")
    return report


__all__ = ["default_cache_dir", "machine", "run_perf_bench", "targets"]

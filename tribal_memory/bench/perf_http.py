"""The measurements ``bench perf`` makes over HTTP against a running server.

Loading a corpus through ``POST /v1/import``, timing searches (plain,
filtered, cache hits), and batch capture against the raw embedding throughput
of the same model. Latencies are in ms (higher is slower), throughputs per
second (higher is faster).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import httpx

from tribal_memory.base.errors import TribalError
from tribal_memory.base.models import Memory, memory_id_for
from tribal_memory.bench.metrics import percentile
from tribal_memory.bench.perf_corpus import FILTER_OWNER, SMALL_OWNER, Fact
from tribal_memory.bench.perf_server import ServerProcess
from tribal_memory.embeddings.base import Embedder, Vector
from tribal_memory.ops.transfer.records import FORMAT, VERSION, dumps, memory_record

Log = Callable[[str], None]

IMPORT_CHUNK = 2000
"""Memories per ``POST /v1/import`` request while loading a corpus (about 5 MB).

Past a tenth of the store, an import leaves its rows to the server's
automatic ``optimize()`` (see :func:`wait_until_indexed`), so the size of
the imports no longer sets how often a large store is rewritten.
"""


CAPTURE_BATCH = 256
"""Memories per ``POST /v1/memories/batch`` request in the capture measurement."""
SPIN_SETTLE_S = 0.2
"""Seconds between this process's raw embedding of a batch and the server's capture of it.

ONNX Runtime's worker threads spin-wait after a call: on 2 cores this
process burned a median 50 ms of CPU during a capture request sent right
after its raw embedding, against 10 ms after this pause, and the server's
capture of 256 facts at 10k took 0.994 s p50 against 0.962 (scratch, 15
batches of each, alternated). The pause keeps the benchmark's own spinning
out of the server's time; the raw embedding is timed before it.
"""
SEARCH_K = 10


def import_body(facts: Sequence[Fact], vectors: Vector, embedder: Embedder) -> bytes:
    """An export file (JSON lines) holding ``facts`` as memories with their ``vectors``."""
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


def load_corpus(
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
        body = import_body(facts[start:end], vectors[start:end], embedder)
        response = client.post(
            "/v1/import", content=body, headers={"content-type": "application/x-ndjson"}
        )
        check_response(response, "import")
        loaded = min(end, len(facts))
        curve.append([loaded, server.memory_mb().get("rss_mb", 0.0)])
        log(f"  loaded {loaded}/{len(facts)} memories, server RSS {curve[-1][1]:.0f} MiB")
    return time.perf_counter() - started, curve


SETTLE_TIMEOUT_S = 1800.0
"""Longest wait for the server's maintenance to fold a loaded corpus into its indexes."""


def wait_until_indexed(client: httpx.Client, timeout_s: float = SETTLE_TIMEOUT_S) -> float:
    """Seconds until ``GET /v1/stats`` reports no row outside the indexes and one table version.

    An import leaves its rows to the server's automatic ``optimize()``
    unless it grew the table by a tenth or more, so right after a bulk load
    the last rows may still be unindexed and a rewrite may be running; and
    each rewrite's superseded files stay until ``keep_versions_s`` passed,
    then are removed (gigabytes at a million memories). The timed searches
    start once both are done, so they measure the store, not the load's
    aftermath.

    Raises:
        TribalError: the rows are not indexed, or old versions are still
            kept, after ``timeout_s`` seconds.
    """
    started = time.perf_counter()
    while True:
        asked = time.perf_counter()
        response = client.get("/v1/stats")
        # Its counts per owner and kind scan the table (polled every 0.5 s, they kept a
        # core busy at a million memories): poll a fifth of the time at most.
        pause_s = max(0.5, 4 * (time.perf_counter() - asked))
        check_response(response, "stats")
        body = response.json()
        if int(body["unindexed_rows"]) == 0 and int(body["versions"]) <= 1:
            return time.perf_counter() - started
        if time.perf_counter() - started > timeout_s:
            raise TribalError(
                f"the loaded rows were not indexed, or old versions not removed, "
                f"within {timeout_s:.0f} s"
            )
        time.sleep(pause_s)


def check_response(response: httpx.Response, what: str) -> None:
    """Raise :class:`TribalError` naming ``what`` for an HTTP error status."""
    if response.status_code >= 400:
        raise TribalError(f"{what} failed: HTTP {response.status_code}: {response.text[:300]}")


def timed(call: Callable[[str], object], inputs: Sequence[str], samples: int) -> list[float]:
    """Milliseconds of ``samples`` calls, cycling through ``inputs``."""
    times: list[float] = []
    for i in range(samples):
        text = inputs[i % len(inputs)]
        started = time.perf_counter()
        call(text)
        times.append((time.perf_counter() - started) * 1000)
    return times


def search_call(
    client: httpx.Client, extra: dict[str, Any], expect_cached: bool | None = None
) -> Callable[[str], object]:
    """A function that runs one ``POST /v1/search`` of its query with ``extra`` in the body.

    With ``expect_cached``, it raises :class:`TribalError` when the answer's
    ``cached`` flag differs.
    """

    def call(query: str) -> object:
        response = client.post("/v1/search", json={"query": query, "k": SEARCH_K, **extra})
        check_response(response, "search")
        body: dict[str, Any] = response.json()
        if expect_cached is not None and body["cached"] != expect_cached:
            how = "was not answered" if expect_cached else "was unexpectedly answered"
            raise TribalError(f"search of {query!r} {how} from the query cache")
        return body

    return call


def get_by_id(client: httpx.Client, memory_id: str) -> object:
    """``GET /v1/memories/{memory_id}``; raises :class:`TribalError` for an HTTP error status."""
    response = client.get(f"/v1/memories/{memory_id}")
    check_response(response, "get by id")
    return response


def make_cached(client: httpx.Client, query: str) -> None:
    """Three searches with feedback using their top hit: enough for a cache hit (defaults)."""
    for _ in range(3):
        feedback_on_top(client, query)


def feedback_on_top(client: httpx.Client, query: str) -> None:
    """One search of ``query`` with feedback using its top hit (none used when it found none).

    Raises:
        TribalError: the search or the feedback failed (HTTP error status).
    """
    response = client.post("/v1/search", json={"query": query, "k": SEARCH_K, "feedback": True})
    check_response(response, "search with feedback")
    body = response.json()
    used = [body["hits"][0]["memory_id"]] if body["hits"] else []
    feedback = {"retrieval_id": body["retrieval_id"], "used_ids": used}
    check_response(client.post("/v1/feedback", json=feedback), "feedback")


def p50_p95(times: Sequence[float]) -> tuple[float, float]:
    """The median and 95th percentile of ``times``, rounded to 0.01."""
    return round(percentile(times, 50), 2), round(percentile(times, 95), 2)


def capture_batch(
    client: httpx.Client, embedder: Embedder, chunk: Sequence[Fact], *, near_duplicates: bool
) -> tuple[float, float]:
    """(seconds of ``embed_batch`` in this process, seconds of the HTTP capture) of ``chunk``.

    The capture is sent :data:`SPIN_SETTLE_S` after the embedding.
    """
    began = time.perf_counter()
    embedder.embed_batch([f.content for f in chunk])
    embed_s = time.perf_counter() - began
    time.sleep(SPIN_SETTLE_S)
    capture_s, created = post_capture(client, chunk, near_duplicates=near_duplicates)
    if created != len(chunk):
        raise TribalError(f"batch capture created {created} of {len(chunk)} new memories")
    return embed_s, capture_s


def post_capture(
    client: httpx.Client, chunk: Sequence[Fact], *, near_duplicates: bool
) -> tuple[float, int]:
    """(seconds of ``POST /v1/memories/batch`` of ``chunk``, memories it created).

    Raises:
        TribalError: the server answered with an error.
    """
    body = {
        "memories": [{"content": f.content, "owner": f.owner} for f in chunk],
        "near_duplicates": near_duplicates,
    }
    began = time.perf_counter()
    response = client.post("/v1/memories/batch", json=body)
    capture_s = time.perf_counter() - began
    check_response(response, "batch capture")
    return capture_s, sum(r["status"] == "created" for r in response.json()["results"])


def capture_vs_embed(
    client: httpx.Client, embedder: Embedder, facts: Sequence[Fact], batch: int
) -> dict[str, float]:
    """Captures/s over HTTP with and without the near-duplicate check, against raw embedding.

    Batches of ``batch`` facts alternate between the two kinds of capture,
    and each is embedded in this process just before it is sent (after
    :data:`SPIN_SETTLE_S`), so a change in the machine's load touches both
    kinds and their raw embedding alike.
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
        embed, capture = capture_batch(client, embedder, chunk, near_duplicates=check)
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


def query_embed_ms(embedder: Embedder, queries: Sequence[str], samples: int) -> list[float]:
    """Milliseconds of ``samples`` query embeddings in this process (a search's floor)."""
    return timed(lambda q: embedder.embed(q, query=True), queries, samples)


def search_figures(
    client: httpx.Client,
    embedder: Embedder,
    asked: Sequence[str],
    asked_owned: Sequence[str],
    asked_small: Sequence[str],
    *,
    samples: int,
    warmup: int,
) -> dict[str, Any]:
    """Search latencies over the whole store, filtered to one owner, and from the cache.

    Returns:
        ``search_p50_ms`` / ``_p95_ms``, ``filtered_*`` (:data:`FILTER_OWNER`,
        5% of the store), ``filtered_1pct_*`` (:data:`SMALL_OWNER`, 1%), ``cache_hit_*``
        (``asked[0]`` made cache-eligible first), ``get_*`` (``GET
        /v1/memories/{id}`` of each search's top hit, as an agent's
        ``memory_get`` follows its ``memory_search``), ``query_embed_p50_ms`` (the
        query embedding alone, in this process: a search's floor) and each
        search figure less that floor (``*_above_embed_ms``).
    """
    figures: dict[str, Any] = {}
    search = search_call(client, {})
    timed(search, asked, warmup)
    tops: list[str] = []  # each search's top hit, read by id below

    def search_noting_top(query: str) -> object:
        body: Any = search(query)
        if body["hits"]:
            tops.append(body["hits"][0]["memory_id"])
        return body

    times = timed(search_noting_top, asked, samples)
    figures["search_p50_ms"], figures["search_p95_ms"] = p50_p95(times)
    if tops:
        figures["get_p50_ms"], figures["get_p95_ms"] = p50_p95(
            timed(lambda memory_id: get_by_id(client, memory_id), tops, samples)
        )
    filtered = search_call(client, {"owner": FILTER_OWNER, "include_shared": False})
    timed(filtered, asked_owned, warmup)
    times = timed(filtered, asked_owned, samples)
    figures["filtered_p50_ms"], figures["filtered_p95_ms"] = p50_p95(times)
    figures["filtered_share"] = 1 / 20
    small = search_call(client, {"owner": SMALL_OWNER, "include_shared": False})
    timed(small, asked_small, warmup)
    times = timed(small, asked_small, samples)
    figures["filtered_1pct_p50_ms"], figures["filtered_1pct_p95_ms"] = p50_p95(times)

    cached_query = asked[0]
    make_cached(client, cached_query)
    hit = search_call(client, {}, expect_cached=True)
    timed(hit, [cached_query], warmup)
    figures["cache_hit_p50_ms"], figures["cache_hit_p95_ms"] = p50_p95(
        timed(hit, [cached_query], samples)
    )

    floor = query_embed_ms(embedder, asked, samples)
    figures["query_embed_p50_ms"] = round(percentile(floor, 50), 2)
    # A cache hit on the exact key embeds nothing, so it has no floor to compare with.
    for name in ("search_p50_ms", "search_p95_ms", "filtered_p50_ms", "filtered_p95_ms"):
        above = figures[name] - figures["query_embed_p50_ms"]
        figures[name.replace("_ms", "_above_embed_ms")] = round(above, 2)
    return figures


def capture_figures(
    client: httpx.Client, embedder: Embedder, facts: Sequence[Fact], batch: int
) -> dict[str, Any]:
    """:func:`capture_vs_embed` with the two ratios to raw embedding (higher is better)."""
    figures: dict[str, Any] = capture_vs_embed(client, embedder, facts, batch)
    figures["capture_vs_embed"] = round(figures["capture_per_s"] / figures["embed_per_s"], 3)
    # The same without the near-duplicate search: what the storage path costs.
    figures["capture_no_near_duplicates_vs_embed"] = round(
        figures["capture_no_near_duplicates_per_s"]
        / figures["capture_no_near_duplicates_embed_per_s"],
        3,
    )
    return figures

"""CPU time per search of ``bench perf``: what one search costs the machine, in-process.

Wall-clock latencies on a shared machine grow with other processes' load; the
CPU time a search spends in this process (every thread: the request's own,
ONNX's and LanceDB's) does much less, so it is the figure that says whether
a change made search cheaper (issue 30).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from tribal_memory.base.config import Settings
from tribal_memory.bench.perf_http import SEARCH_K
from tribal_memory.embeddings.base import Embedder


def cpu_figures(
    settings: Settings,
    embedder: Embedder,
    queries: Sequence[str],
    searches: int,
    *,
    warmup: Sequence[str] = (),
) -> dict[str, Any]:
    """CPU milliseconds per in-process hybrid search over the store ``settings`` open.

    Opens a :class:`~tribal_memory.service.memory_service.MemoryService` with
    ``settings`` (its data dir and LanceDB location; no server may be using
    them), runs ``optimize()`` so every row is indexed (the rows the
    benchmark captured last may not be yet: the server folds them in within
    ``optimize_interval_s``), searches each of ``warmup``
    (other questions than ``queries``: a server that has answered for a while,
    with index pages and the rows its searches read in memory, but not these
    questions' answers), then ``searches`` more (k=10, hybrid, the default
    learned variant, as the server runs them), cycling through ``queries``
    (all but the first, which the benchmark made a query-cache hit), and
    divides the process's
    CPU time (``time.process_time``: user + system, all threads) and the wall
    time by the number of searches. The query embedding alone is measured the
    same way over the same queries.

    Returns:
        ``{"cpu_ms_per_search", "wall_ms_per_search",
        "query_embed_cpu_ms", "cpu_searches"}``: milliseconds per search
        (lower is cheaper), rounded to 0.01.
    """
    from tribal_memory.service.memory_service import MemoryService

    queries = queries[1:] if len(queries) > 1 else queries
    with MemoryService(settings, embedder=embedder) as service:
        service.optimize()  # the rows captured last may wait for the server's next optimize()
        for query in warmup:
            service.search(query, k=SEARCH_K)
        cpu, wall = _per_call(lambda q: service.search(q, k=SEARCH_K), queries, searches)
    embed_cpu, _ = _per_call(lambda q: embedder.embed(q, query=True), queries, searches)
    return {
        "cpu_ms_per_search": round(cpu, 2),
        "wall_ms_per_search": round(wall, 2),
        "query_embed_cpu_ms": round(embed_cpu, 2),
        "cpu_searches": searches,
    }


def _per_call(call: Any, queries: Sequence[str], calls: int) -> tuple[float, float]:
    """(CPU ms, wall ms) per call of ``call`` over ``calls`` queries, cycling."""
    cpu_started, wall_started = time.process_time(), time.perf_counter()
    for i in range(calls):
        call(queries[i % len(queries)])
    cpu = time.process_time() - cpu_started
    wall = time.perf_counter() - wall_started
    return cpu * 1000 / calls, wall * 1000 / calls

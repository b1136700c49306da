"""The concurrent figures of ``bench perf``: many clients against one sequential client.

Issue 30: on two cores, 16 concurrent clients should get more requests per
second than one client sending the same searches back to back. Both run
against the same server in the same run (locust, its own process), so the
machine's load touches them alike; then an agent's mixed load (80% search,
10% capture, 10% feedback) is run and reported apart. It runs last, as its
captures add memories to the store.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tribal_memory.bench.perf_server import run_locust


def concurrent_figures(
    base_url: str, queries: Sequence[str], work_dir: Path, *, clients: int, seconds: int
) -> dict[str, Any]:
    """One client, then ``clients`` clients, then ``clients`` mixed agents, ``seconds`` each.

    Returns:
        The ``clients``-client search run's ``{"clients", "seconds",
        "requests", "rps", "p50_ms", "p99_ms", "errors"}`` (see
        :func:`~.perf_server.run_locust`) plus ``sequential_rps`` /
        ``sequential_p50_ms`` (one client, back to back), ``vs_sequential``
        (``rps / sequential_rps``, higher is better), ``mixed`` (``rps``,
        ``p50_ms``, ``p99_ms``, ``errors`` of the mixed load) and the load
        average (1, 5, 15 min) after each run.
    """
    sequential = run_locust(base_url, queries, work_dir, clients=1, seconds=seconds)
    load_after_sequential = _load()
    figures = run_locust(base_url, queries, work_dir, clients=clients, seconds=seconds)
    figures["sequential_rps"] = sequential["rps"]
    figures["sequential_p50_ms"] = sequential["p50_ms"]
    figures["sequential_errors"] = sequential["errors"]
    figures["vs_sequential"] = (
        round(figures["rps"] / sequential["rps"], 3) if sequential["rps"] else None
    )
    load_after_concurrent = _load()
    mixed = run_locust(
        base_url, queries, work_dir, clients=clients, seconds=seconds, user="MixedAgent"
    )
    figures["mixed"] = {
        "share": "80% search, 10% capture, 10% search with feedback + the feedback",
        **{name: mixed[name] for name in ("requests", "rps", "p50_ms", "p99_ms", "errors")},
    }
    figures["load_avg_1_5_15"] = {
        "after_sequential": load_after_sequential,
        "after_concurrent": load_after_concurrent,
        "after_mixed": _load(),
    }
    return figures


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else []

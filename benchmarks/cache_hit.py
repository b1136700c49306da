"""A query-cache hit and a read by id over HTTP against the request path's floor, on a small store.

Starts a server on a fresh data dir, captures ``--facts`` short facts, makes
one question cache-eligible (three searches with feedback on their top hit,
as ``bench perf`` does), then times ``--samples`` requests of each kind over
one keep-alive connection: ``GET /health`` (no handler thread, no store),
the cache hit (``POST /v1/search`` answered from the query cache), and the
hit's own ``took_ms`` (the search in the server, without the request path).
All times are milliseconds, p50 and p95, lower is better.

The code measured is the ``tribal_memory`` this script imports (and the
server, started with ``python -m``, imports from the working directory
first), so two commits compare by running the script from each checkout;
runs append to ``--out`` under their ``--label``:

    (cd /tmp/before && PYTHONPATH=. python /work/main/benchmarks/cache_hit.py \
        --label before --out /tmp/x.json)
    python benchmarks/cache_hit.py --label after --out /tmp/x.json
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

import tribal_memory
from tribal_memory.bench.perf_http import (
    check_response,
    feedback_on_top,
    get_by_id,
    make_cached,
    p50_p95,
    search_call,
    timed,
)
from tribal_memory.bench.perf_server import ServerProcess
from tribal_memory.bench.report import checkout_commit

QUESTION = "what is the colour of box 17"


def measure(facts: int, samples: int) -> dict[str, Any]:
    """p50 / p95 ms of ``GET /health``, a read by id, the cache hit and its ``took_ms``."""
    with tempfile.TemporaryDirectory(prefix="tribal-cache-hit-") as tmp:  # noqa: SIM117
        with ServerProcess(Path(tmp) / "data", Path(tmp) / "server.log") as server:
            with httpx.Client(base_url=server.base_url, timeout=60) as client:
                texts = [f"fact {i}: box {i} is painted shade {i * 7 % 97}" for i in range(facts)]
                for start in range(0, facts, 100):
                    batch = [{"content": t} for t in texts[start : start + 100]]
                    response = client.post("/v1/memories/batch", json={"memories": batch})
                    check_response(response, "capture")
                make_cached(client, QUESTION)
                hit = search_call(client, {}, expect_cached=True)
                for _ in range(samples // 5):  # warm-up
                    hit(QUESTION)
                health = timed(lambda _: client.get("/health"), [""], samples)
                cache_hit = timed(hit, [QUESTION], samples)
                took = [float(hit(QUESTION)["took_ms"]) for _ in range(samples)]  # type: ignore[index]
                after_feedback = []
                for i in range(samples // 5):
                    feedback_on_top(client, f"which shade is box {i % facts} painted")
                    after_feedback.append(float(hit(QUESTION)["took_ms"]))  # type: ignore[index]
                search = search_call(client, {})
                asked = [f"which shade is box {i} painted" for i in range(0, facts, 6)]
                tops = [search(q)["hits"][0]["memory_id"] for q in asked]  # type: ignore[index]
                get = timed(lambda memory_id: get_by_id(client, memory_id), tops, samples)
                return {
                    "health": p50_p95(health),
                    "get_by_id": p50_p95(get),
                    "cache_hit": p50_p95(cache_hit),
                    "cache_hit_took_ms": p50_p95(took),
                    "cache_hit_after_feedback_took_ms": p50_p95(after_feedback),
                }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--label", required=True, help="name of this run in --out")
    parser.add_argument("--out", type=Path, required=True, help="JSON file runs are appended to")
    parser.add_argument("--facts", type=int, default=300)
    parser.add_argument("--samples", type=int, default=500)
    args = parser.parse_args()
    package_dir = Path(tribal_memory.__file__).parent
    run = {
        "label": args.label,
        "commit": checkout_commit(package_dir),
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
        "load_avg_1_5_15_at_start": [round(x, 2) for x in os.getloadavg()],
        **measure(args.facts, args.samples),
    }
    report: dict[str, Any] = (
        json.loads(args.out.read_text())
        if args.out.exists()
        else {
            "benchmark": "cache_hit",
            "units": "ms, [p50, p95]; lower is better",
            "facts": args.facts,
            "samples": args.samples,
            "runs": [],
        }
    )
    report["runs"].append(run)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(run))


if __name__ == "__main__":
    main()

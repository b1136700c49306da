"""Search latency over HTTP in the seconds after a burst of captures, while new rows are unindexed.

Rows captured since the last ``optimize()`` are in no index, so every
search reads them in full until they are folded in. This starts a server
(``tribal-memory serve``) on a copy of a data dir ``bench perf
--keep-data`` kept, times ``--questions`` new questions, captures
``--captures`` new facts in batches of ``--batch`` (the near-duplicate
check on, as agents capture), then times ``--windows`` windows of
``--window-searches`` new questions each, right one after the other, and
reads ``GET /v1/stats`` before each: how many rows were still outside the
indexes, and how slow the searches were meanwhile. Plain hybrid search
(``learned: []``), one client, lower is better.

    python benchmarks/after_capture.py /tmp/kept100k/data-100000 --size 100000 \\
        --out benchmarks/results/after-capture-100k.json

The server imports the package ``PYTHONPATH`` names (as ``servers_ab.py``
does): ``PYTHONPATH=/path/to/other/checkout python benchmarks/after_capture.py
...`` measures another commit's server; the report's ``commit`` is the
checkout the server ran.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import httpx

import tribal_memory
from tribal_memory.bench.perf_corpus import Fact, generate, questions
from tribal_memory.bench.perf_http import (
    check_response,
    p50_p95,
    post_capture,
    search_call,
    timed,
)
from tribal_memory.bench.report import copied_data_dir, load_average, report_header, write_report
from tribal_memory.bench.server_process import tribal_server


def timed_searches(client: httpx.Client, asked: list[str]) -> dict[str, float]:
    """One ``POST /v1/search`` (plain hybrid, k 10) of each question: p50 and p95 ms."""
    p50, p95 = p50_p95(timed(search_call(client, {"learned": []}), asked, len(asked)))
    return {"p50_ms": p50, "p95_ms": p95}


def unindexed_rows(client: httpx.Client) -> int:
    """The most rows any index of the table lacks (``GET /v1/stats``)."""
    response = client.get("/v1/stats")
    check_response(response, "stats")
    return int(response.json()["unindexed_rows"])


def capture_burst(client: httpx.Client, facts: list[Fact], batch: int) -> float:
    """Capture ``facts`` in batches of ``batch`` (near-duplicate check on); seconds taken."""
    started = time.perf_counter()
    for start in range(0, len(facts), batch):
        post_capture(client, facts[start : start + batch], near_duplicates=True)
    return round(time.perf_counter() - started, 2)


def main() -> None:
    """Parse the arguments, run the phases on a server over a copy, write the JSON report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data_dir", type=Path, help="a data dir bench perf --keep-data kept")
    parser.add_argument("--size", type=int, required=True, help="its corpus size")
    parser.add_argument("--questions", type=int, default=300, help="timed before the captures")
    parser.add_argument("--captures", type=int, default=2048, help="new facts captured")
    parser.add_argument("--batch", type=int, default=256, help="facts per capture request")
    parser.add_argument("--windows", type=int, default=12, help="timed windows after them")
    parser.add_argument("--window-searches", type=int, default=100, help="questions per window")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    corpus = generate(args.size, 0)
    # Seed 13: questions bench perf (seed 0) and its feedback replay never asked.
    asked = questions(corpus, args.questions + args.windows * args.window_searches + 30, 13)
    new = generate(args.captures, 99, exclude=frozenset(f.content for f in corpus))
    report: dict[str, Any] = {
        **report_header("after_capture", Path(tribal_memory.__file__)),
        "memories": args.size,
        "captures": args.captures,
        "batch": args.batch,
        "request": "POST /v1/search {query, k: 10, learned: []}, one client, sequential",
        "units": "ms of wall time over HTTP, lower is better; t_s: seconds since the burst ended",
    }
    with copied_data_dir(args.data_dir) as data_dir:
        log = data_dir.parent / "server.log"
        with (
            tribal_server(log, data_dir=data_dir) as server,
            httpx.Client(base_url=server.base_url, timeout=120) as client,
        ):
            timed_searches(client, asked[:30])  # warm-up
            at = 30
            report["before"] = {
                "unindexed_rows": unindexed_rows(client),
                **timed_searches(client, asked[at : at + args.questions]),
            }
            at += args.questions
            report["capture_s"] = capture_burst(client, new, args.batch)
            ended = time.perf_counter()
            windows = []
            for _ in range(args.windows):
                window = {
                    "t_s": round(time.perf_counter() - ended, 1),
                    "unindexed_rows": unindexed_rows(client),
                }
                window.update(timed_searches(client, asked[at : at + args.window_searches]))
                at += args.window_searches
                windows.append(window)
                print(window, flush=True)
            report["windows"] = windows
        report["maintenance_runs"] = log.read_text().count("store maintenance started")
    indexed = [w["t_s"] for w in windows if w["unindexed_rows"] == 0]
    report["indexed_by_s"] = indexed[0] if indexed else None
    report["load_avg_1_5_15_at_end"] = load_average()
    report["command"] = (
        f"python benchmarks/after_capture.py {args.data_dir} --size {args.size} "
        f"--captures {args.captures} --batch {args.batch} --windows {args.windows} "
        f"--window-searches {args.window_searches} --out {args.out}"
    )
    write_report(report, args.out)


if __name__ == "__main__":
    main()

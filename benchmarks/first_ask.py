"""Search latency of questions asked for the first time and again: two variants of a store.

On a store ``bench perf --keep-data`` kept, starts a server per variant and
asks the same ``--questions`` of the corpus's questions in ``--rounds``
rounds over HTTP, none from the query cache (no feedback is given). The
first round is what a new question costs; the later ones what a question
costs once what it reads is cached. Per round: search p50 and p95 (ms,
lower is better), the server's RSS and its index cache (MiB). Variants alternate
``--repeats`` times. The variants are, by default, the key table
(``TRIBAL_ROW_KEYS_MAX_ROWS`` left at its default) against every candidate's
key read by row id (0); with ``--against DIR``, the two stores (of the same
corpus and size), each named by its Lance file format, or by its path when
both have the same.

    tribal-memory bench perf --sizes 1000000 --clients 0 --feedback-searches 0 \
        --keep-data /tmp/kept1m --out /tmp/perf-1m-settled.json
    python benchmarks/first_ask.py /tmp/kept1m/data-1000000 --size 1000000 \
        --out benchmarks/results/perf-1m-first-ask.json
"""

from __future__ import annotations

import argparse
import json
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from tribal_memory.base.config import DEFAULT_ROW_KEYS_MAX_ROWS
from tribal_memory.bench.perf_corpus import generate, questions
from tribal_memory.bench.perf_http import check_response, p50_p95, search_call, timed
from tribal_memory.bench.perf_server import ServerProcess
from tribal_memory.bench.report import load_average
from tribal_memory.store.lance_footprint import data_file_formats

KEY_TABLE_VARIANTS = {"key_table": str(DEFAULT_ROW_KEYS_MAX_ROWS), "keys_by_row_id": "0"}
"""Variant name: its ``TRIBAL_ROW_KEYS_MAX_ROWS``."""


def file_format(data_dir: Path) -> str:
    """The Lance file format of a kept store's data files (``"2.1"``; mixed: ``"2.1+2.2"``)."""
    return "+".join(sorted(data_file_formats(data_dir / "lancedb" / "memories.lance")))


def rounds(
    data_dir: Path, asked: list[str], count: int, env: dict[str, str]
) -> list[dict[str, Any]]:
    """Per round, search p50/p95 (ms) over ``asked``, then the server's RSS and cache (MiB)."""
    found = []
    with (
        tempfile.TemporaryDirectory() as tmp,
        ServerProcess(data_dir, Path(tmp) / "log", env=env) as server,
        httpx.Client(base_url=server.base_url, timeout=600.0) as client,
    ):
        search = search_call(client, {})
        for _ in range(count):
            p50, p95 = p50_p95(timed(search, asked, len(asked)))
            stats = client.get("/v1/stats")
            check_response(stats, "stats")
            found.append(
                {
                    "search_p50_ms": p50,
                    "search_p95_ms": p95,
                    "rss_mb": server.memory_mb().get("rss_mb"),
                    "index_cache_mb": round(stats.json()["cache_bytes"] / 1024**2, 1),
                }
            )
    return found


def main() -> None:
    """Parse the arguments, run the variants in turn, write the JSON report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data_dir", type=Path, help="a data dir bench perf --keep-data kept")
    parser.add_argument("--size", type=int, required=True, help="its corpus size")
    parser.add_argument("--questions", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--against", type=Path, help="a second kept data dir to compare")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    if args.against is None:
        variants = {
            name: (args.data_dir, {"TRIBAL_ROW_KEYS_MAX_ROWS": rows})
            for name, rows in KEY_TABLE_VARIANTS.items()
        }
    else:
        dirs = (args.data_dir, args.against)
        names = [f"file_format_{file_format(d)}" for d in dirs]
        if names[0] == names[1]:
            names = [str(d) for d in dirs]
        if names[0] == names[1]:
            parser.error("--against names the same data dir")
        variants = {name: (d, {}) for name, d in zip(names, dirs, strict=True)}
    asked = questions(generate(args.size, 0), args.questions, 0)
    report: dict[str, Any] = {
        "benchmark": "first_ask",
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "load_avg_1_5_15_at_start": load_average(),
        "memories": args.size,
        "questions": len(asked),
        "runs": [],
    }
    for repeat in range(args.repeats):
        for name, (data_dir, env) in variants.items():
            found = rounds(data_dir, asked, args.rounds, env)
            report["runs"].append(
                {"variant": name, "data_dir": str(data_dir), "repeat": repeat, "rounds": found}
            )
            print(name, repeat, found, flush=True)
    report["load_avg_1_5_15_at_end"] = load_average()
    report["command"] = (
        f"python benchmarks/first_ask.py {args.data_dir} --size {args.size} "
        f"--questions {args.questions} --rounds {args.rounds} --repeats {args.repeats} "
        + (f"--against {args.against} " if args.against else "")
        + f"--out {args.out}"
    )
    args.out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()

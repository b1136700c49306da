"""A server's memory through capture and ``optimize()`` cycles on a large kept store.

Copies a data dir ``bench perf --keep-data`` kept (so each run starts from
the same rows), starts a server on the copy with the automatic
``optimize()`` due after every ``--rows`` written rows and old versions
removed at once, asks ``--questions`` of the corpus's questions twice,
then runs ``--cycles`` cycles of: capture ``--rows`` new facts (two
batches, near-duplicate check on), wait until they are indexed, ask the
questions again. At a million memories every few such cycles rebuild the
IVF index (its segment cap), which is what this looks at: does the
replaced index's data stay in LanceDB's index cache?

Per step: the server's RSS and index cache (MiB), the IVF index's name
(its kind and trained rows) and segments, the seconds the indexing took,
and for the asking steps search p50 / p95 (ms, lower is better).

The code measured is the ``tribal_memory`` this script imports (the server,
started with ``python -m``, imports from the working directory first), so
two commits compare by running the script from each checkout; runs append
to ``--out`` under their ``--label``:

    (cd /tmp/before && PYTHONPATH=. python /work/main/benchmarks/index_cache_cycles.py \\
        /tmp/kept1m/data-1000000 --size 1000000 --label before --out /tmp/x.json)
    python benchmarks/index_cache_cycles.py /tmp/kept1m/data-1000000 --size 1000000 \\
        --label after --out /tmp/x.json
"""

from __future__ import annotations

import argparse
import json
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import lancedb

import tribal_memory
from tribal_memory.bench.perf_corpus import Fact, generate, questions
from tribal_memory.bench.perf_http import (
    check_response,
    p50_p95,
    search_call,
    timed,
    wait_until_indexed,
)
from tribal_memory.bench.perf_server import ServerProcess
from tribal_memory.bench.report import checkout_commit, copied_data_dir, load_average
from tribal_memory.store.lance_index import ann_state
from tribal_memory.store.lance_rows import TABLE
from tribal_memory.store.lance_table import read_ivf_segments


def ivf_state(data_dir: Path) -> dict[str, Any]:
    """The IVF index's name and segments in ``data_dir``'s table (read by a handle of its own)."""
    uri = str(data_dir / "lancedb")
    indices = lancedb.connect(uri).open_table(TABLE).list_indices()
    return {"ivf": ann_state(indices)[0], "segments": read_ivf_segments(uri)}


def cycles(
    data_dir: Path, asked: list[str], new: list[Fact], count: int, rows: int
) -> list[dict[str, Any]]:
    """The steps' figures (see the module docstring) on a server over ``data_dir``."""
    env = {
        "TRIBAL_OPTIMIZE_EVERY_ROWS": str(rows),
        "TRIBAL_OPTIMIZE_INTERVAL_S": "0",
        "TRIBAL_KEEP_VERSIONS_S": "0",
    }
    steps: list[dict[str, Any]] = []
    with (
        tempfile.TemporaryDirectory() as tmp,
        ServerProcess(data_dir, Path(tmp) / "log", env=env) as server,
        httpx.Client(base_url=server.base_url, timeout=1800.0) as client,
    ):

        def step(name: str, **figures: Any) -> None:
            stats = client.get("/v1/stats")
            check_response(stats, "stats")
            steps.append(
                {
                    "step": name,
                    "rss_mb": server.memory_mb().get("rss_mb"),
                    "index_cache_mb": round(stats.json()["cache_bytes"] / 1024**2, 1),
                    **figures,
                }
            )
            print(json.dumps(steps[-1]), flush=True)

        search = search_call(client, {})

        def ask(name: str) -> None:
            p50, p95 = p50_p95(timed(search, asked, len(asked)))
            step(name, search_p50_ms=p50, search_p95_ms=p95)

        step("start", **ivf_state(data_dir))
        ask("asked")
        ask("asked again")
        for cycle in range(count):
            chunk = new[cycle * rows : (cycle + 1) * rows]
            for start in range(0, rows, rows // 2):
                body = {
                    "memories": [
                        {"content": f.content, "owner": f.owner}
                        for f in chunk[start : start + rows // 2]
                    ],
                    "near_duplicates": True,
                }
                check_response(client.post("/v1/memories/batch", json=body), "capture")
            settle_s = round(wait_until_indexed(client), 1)
            step(f"cycle {cycle} indexed", settle_s=settle_s, **ivf_state(data_dir))
            ask(f"cycle {cycle} asked")
    return steps


def main() -> None:
    """Parse the arguments, run the cycles on a copy of the store, append the run to ``--out``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data_dir", type=Path, help="a data dir bench perf --keep-data kept")
    parser.add_argument("--size", type=int, required=True, help="its corpus size")
    parser.add_argument("--questions", type=int, default=200)
    parser.add_argument("--cycles", type=int, default=3)
    parser.add_argument("--rows", type=int, default=512, help="facts captured per cycle (even)")
    parser.add_argument("--label", required=True, help="name of this run in --out")
    parser.add_argument("--out", type=Path, required=True, help="JSON file runs are appended to")
    args = parser.parse_args()
    facts = generate(args.size, 0)
    asked = questions(facts, args.questions, 0)
    new = generate(args.cycles * args.rows, 7, exclude=frozenset(f.content for f in facts))
    del facts
    run: dict[str, Any] = {
        "label": args.label,
        "commit": checkout_commit(Path(tribal_memory.__file__).parent),
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
        "load_avg_1_5_15_at_start": load_average(),
    }
    with copied_data_dir(args.data_dir) as copy:
        run["steps"] = cycles(copy, asked, new, args.cycles, args.rows)
    run["load_avg_1_5_15_at_end"] = load_average()
    report: dict[str, Any] = (
        json.loads(args.out.read_text())
        if args.out.exists()
        else {
            "benchmark": "index_cache_cycles",
            "memories": args.size,
            "questions": len(asked),
            "rows_per_cycle": args.rows,
            "units": "MiB (rss_mb, index_cache_mb), ms (search, lower is better), s (settle_s)",
            "command": (
                f"python benchmarks/index_cache_cycles.py {args.data_dir} --size {args.size} "
                f"--questions {args.questions} --cycles {args.cycles} --rows {args.rows} "
                "--label LABEL --out OUT"
            ),
            "runs": [],
        }
    )
    report["runs"].append(run)
    args.out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()

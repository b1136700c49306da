"""IVF probes against recall and latency, on a store ``bench perf --keep-data`` kept.

For each ``ann_nprobes`` setting, opens the store in-process with it and
measures what ``bench perf`` does (``perf_size.ann_recall``): the partitions
probed (``ann_probes``, from ``lance_index.probes_for``), and for 100 of the
corpus's questions over the whole store, filtered to the 5% owner and to
the 1% owner, recall@10 against exact search (higher is better) and the
vector search's p50 (ms, lower is better).
Then, with ``--http``, starts a server over the data dir with the default
settings and times searches as ``bench perf`` does (``search_figures``), plus its ANN recall.

    tribal-memory bench perf --sizes 1000000 --clients 0 --feedback-searches 0 \
        --keep-data /tmp/kept --out /tmp/perf-1m.json
    python benchmarks/nprobes_sweep.py /tmp/kept/data-1000000 --size 1000000 \
        --nprobes 16,32,64 --http --out benchmarks/results/perf-1m-nprobes.json
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

from tribal_memory.base.config import Settings
from tribal_memory.bench.perf_corpus import generate, questions
from tribal_memory.bench.perf_http import search_figures
from tribal_memory.bench.perf_server import ServerProcess
from tribal_memory.bench.perf_size import RECALL_OWNERS, ann_recall
from tribal_memory.embeddings.fastembed import FastEmbedEmbedder


def _asked(size: int, count: int) -> dict[str, list[str]]:
    """``count`` of the corpus's questions per suffix of ``RECALL_OWNERS``."""
    facts = generate(size, 0)
    return {suffix: questions(facts, count, 0, owner=o) for suffix, o in RECALL_OWNERS.items()}


def sweep(
    data_dir: Path, size: int, settings: list[int], embedder: FastEmbedEmbedder
) -> dict[str, Any]:
    """``ann_recall``'s figures (recall@10, vector-search p50 ms) per ``ann_nprobes`` setting."""
    asked = _asked(size, 100)
    found: dict[str, Any] = {}
    for count in settings:
        found[str(count)] = ann_recall(
            Settings(data_dir=data_dir, ann_nprobes=count), embedder, asked
        )
        print(count, found[str(count)], flush=True)
    return found


def served(data_dir: Path, size: int, embedder: FastEmbedEmbedder) -> dict[str, Any]:
    """``bench perf``'s search figures and ANN recall with the default settings."""
    asked = _asked(size, 300)
    with (
        tempfile.TemporaryDirectory() as tmp,
        ServerProcess(data_dir, Path(tmp) / "log") as server,
        httpx.Client(base_url=server.base_url, timeout=600.0) as client,
    ):
        figures = search_figures(
            client,
            embedder,
            asked[""],
            asked["_filtered"],
            asked["_filtered_1pct"],
            samples=300,
            warmup=30,
        )
        figures["rss_mb"] = server.memory_mb().get("rss_mb")
    figures.update(ann_recall(Settings(data_dir=data_dir), embedder, asked))
    return figures


def main() -> None:
    """Parse the arguments, sweep, time the server, write the JSON report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data_dir", type=Path, help="a data dir bench perf --keep-data kept")
    parser.add_argument("--size", type=int, required=True, help="its corpus size")
    parser.add_argument("--nprobes", default="16,32,64")
    parser.add_argument("--http", action="store_true", help="also time a server over it")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    defaults = Settings()
    embedder = FastEmbedEmbedder(
        threads=defaults.embedding_threads, query_threads=defaults.embedding_query_threads
    )
    report: dict[str, Any] = {
        "benchmark": "nprobes_sweep",
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "load_avg_1_5_15_at_start": [round(x, 2) for x in os.getloadavg()],
        "memories": args.size,
        "sweep": sweep(
            args.data_dir,
            args.size,
            [int(n) for n in args.nprobes.split(",")],
            embedder,
        ),
    }
    if args.http:
        report["server_defaults"] = served(args.data_dir, args.size, embedder)
    report["load_avg_1_5_15_at_end"] = [round(x, 2) for x in os.getloadavg()]
    report["command"] = "python benchmarks/nprobes_sweep.py " + " ".join(
        [str(args.data_dir), f"--size {args.size}", f"--nprobes {args.nprobes}"]
        + (["--http"] if args.http else [])
        + [f"--out {args.out}"]
    )
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()

"""IVF probes against recall and latency, on a store ``bench perf --keep-data`` kept.

For each ``ann_nprobes`` setting, opens the store in-process with it (the
partitions probed are ``lance_index.probes_for`` of it and the rows the
index was trained on, reported as ``probes``) and runs ``vector_search``
(k=10) for 100 of the corpus's questions over the whole store, filtered to
the 5% owner and to the 1% owner, comparing the ids with exact search
(recall@10, higher is better) and timing each (ms, lower is better).
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
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from tribal_memory.base.config import Settings
from tribal_memory.base.models import SearchFilters
from tribal_memory.bench.perf_corpus import FILTER_OWNER, SMALL_OWNER, generate, questions
from tribal_memory.bench.perf_http import search_figures
from tribal_memory.bench.perf_server import ServerProcess
from tribal_memory.bench.perf_size import _ann_recall
from tribal_memory.embeddings.fastembed import FastEmbedEmbedder
from tribal_memory.store.base import ScoredMemory
from tribal_memory.store.lance_index import probes_for
from tribal_memory.store.lancedb import LanceMemoryStore

OWNERS = {"all": None, "5%": FILTER_OWNER, "1%": SMALL_OWNER}


def sweep(uri: str, size: int, settings: list[int], embedder: FastEmbedEmbedder) -> dict[str, Any]:
    """recall@10 and p50 ms of vector search per ``ann_nprobes`` setting and filter."""
    facts = generate(size, 0)
    asked = {name: questions(facts, 100, 0, owner=owner) for name, owner in OWNERS.items()}
    vectors = {name: [embedder.embed(q, query=True) for q in qs] for name, qs in asked.items()}
    store = LanceMemoryStore(uri, embedder.model_id, embedder.dim)
    exact = {
        name: [_ids(store.vector_search(v, SearchFilters(owner=owner), 10, exact=True)) for v in vs]
        for (name, owner), vs in zip(OWNERS.items(), vectors.values(), strict=True)
    }
    trained = store.ann_index_stats()
    store.close()
    found: dict[str, Any] = {}
    for count in settings:
        store = LanceMemoryStore(uri, embedder.model_id, embedder.dim, ann_nprobes=count)
        rows = trained["trained_rows"] if trained else 0
        row: dict[str, Any] = {"probes": probes_for(count, rows), "trained_rows": rows}
        for name, owner in OWNERS.items():
            filters = SearchFilters(owner=owner)
            for vector in vectors[name][:10]:  # warm the index cache
                store.vector_search(vector, filters, 10, exact=False)
            recalls, times = [], []
            for vector, truth in zip(vectors[name], exact[name], strict=True):
                started = time.perf_counter()
                got = _ids(store.vector_search(vector, filters, 10))
                times.append((time.perf_counter() - started) * 1000)
                recalls.append(len(got & truth) / max(1, len(truth)))
            row[name] = {
                "recall_at_10": round(float(np.mean(recalls)), 4),
                "p50_ms": round(float(np.percentile(times, 50)), 2),
            }
        store.close()
        found[str(count)] = row
        print(count, row, flush=True)
    return found


def _ids(hits: list[ScoredMemory]) -> set[str]:
    return {hit.memory_id for hit in hits}


def served(data_dir: Path, size: int, embedder: FastEmbedEmbedder) -> dict[str, Any]:
    """``bench perf``'s search figures and ANN recall with the default settings."""
    facts = generate(size, 0)
    asked = questions(facts, 300, 0)
    owned = questions(facts, 300, 0, owner=FILTER_OWNER)
    small = questions(facts, 300, 0, owner=SMALL_OWNER)
    with (
        tempfile.TemporaryDirectory() as tmp,
        ServerProcess(data_dir, Path(tmp) / "log") as server,
        httpx.Client(base_url=server.base_url, timeout=600.0) as client,
    ):
        figures = search_figures(client, embedder, asked, owned, small, samples=300, warmup=30)
        figures["rss_mb"] = server.memory_mb().get("rss_mb")
    figures.update(
        _ann_recall(
            Settings(data_dir=data_dir),
            embedder,
            {"": asked, "_filtered": owned, "_filtered_1pct": small},
        )
    )
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
            str(args.data_dir / "lancedb"),
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

"""The store's IVF_FLAT vector index against quantised IVF indexes on bench perf's corpus.

For each index type, writes the first ``--size`` vectors of ``bench perf``'s
generated corpus (embeddings from its cache; missing ones are computed) to
a LanceDB table of row number and vector, builds the index as the store
builds its own (cosine, partitions of ``IVF_PARTITION_ROWS`` rows) and
reports its build time and size on disk. Then, for each result size ``k``
(10: what a user sees; 150: the candidate pool of one search path) and
each refine factor (0: none; LanceDB re-ranks ``k x factor`` rows by their
full vectors), it runs ``--queries`` of the corpus's questions with the
store's probes for that size (``lance_index.probes_for``), after one
untimed pass, and reports recall@k against exact cosine search (numpy,
higher is better) and the search's p50 / p95 (ms, lower is better,
in-process, no filter). Index types: ``flat`` (IVF_FLAT, the store's),
``sq`` (IVF_SQ, 8-bit scalar quantisation), ``rq`` (IVF_RQ, RaBitQ).

    python benchmarks/ivf_quantised.py --size 1000000 --kinds flat,sq \
        --out benchmarks/results/ivf-quantised-1m.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import lancedb
import numpy as np
import pyarrow as pa
from lancedb.index import IvfFlat, IvfRq, IvfSq

from tribal_memory.base.config import Settings
from tribal_memory.bench.metrics import percentile
from tribal_memory.bench.perf import default_cache_dir
from tribal_memory.bench.perf_corpus import cached_embeddings, generate, questions
from tribal_memory.embeddings.fastembed import FastEmbedEmbedder
from tribal_memory.store.lance_index import IVF_PARTITION_ROWS, probes_for

INDEXES = {"flat": IvfFlat, "sq": IvfSq, "rq": IvfRq}


def exact_top(unit: np.ndarray, queries: np.ndarray, k: int) -> list[set[int]]:
    """Row numbers of each query's ``k`` nearest rows by cosine (both unit length)."""
    found: list[set[int]] = []
    for start in range(0, len(queries), 50):
        sims = unit @ queries[start : start + 50].T
        top = np.argpartition(-sims, k, axis=0)[:k].T
        found.extend(set(map(int, row)) for row in top)
    return found


async def measure_index(
    root: Path,
    kind: str,
    vectors: np.ndarray,
    queries: np.ndarray,
    exact: dict[int, list[set[int]]],
    refines: list[int],
    probes: int,
) -> dict[str, Any]:
    """Build time, size and, per ``k`` and refine factor, recall@k and p50 / p95 ms."""
    db = await lancedb.connect_async(str(root / kind))
    flat = pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1)), vectors.shape[1])
    rows = pa.table({"i": pa.array(np.arange(len(vectors))), "vector": flat})
    table = await db.create_table("t", rows, mode="overwrite")
    config = INDEXES[kind](distance_type="cosine", target_partition_size=IVF_PARTITION_ROWS)
    began = time.perf_counter()
    await table.create_index("vector", config=config)
    figures: dict[str, Any] = {"build_s": round(time.perf_counter() - began, 1)}
    index_dir = root / kind / "t.lance" / "_indices"
    size = sum(f.stat().st_size for f in index_dir.rglob("*") if f.is_file())
    figures["index_mb"] = round(size / 2**20, 1)

    async def search(vector: np.ndarray, k: int, refine: int) -> set[int]:
        query = (
            table.query()
            .nearest_to(vector)
            .distance_type("cosine")
            .nprobes(probes)
            .limit(k)
            .select(["i"])
        )
        if refine:
            query = query.refine_factor(refine)
        return set((await query.to_arrow()).column("i").to_pylist())

    for vector in queries:  # one untimed pass: the index's partitions read once
        await search(vector, max(exact), 0)
    for k, truth in exact.items():
        for refine in refines:
            recalls, times = [], []
            for vector, wanted in zip(queries, truth, strict=True):
                began = time.perf_counter()
                got = await search(vector, k, refine)
                times.append((time.perf_counter() - began) * 1000)
                recalls.append(len(got & wanted) / k)
            figures[f"k{k}_refine{refine}"] = {
                "recall": round(float(np.mean(recalls)), 4),
                "p50_ms": round(percentile(times, 50), 2),
                "p95_ms": round(percentile(times, 95), 2),
            }
            print(kind, k, refine, figures[f"k{k}_refine{refine}"], flush=True)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, required=True, help="rows of the corpus indexed")
    parser.add_argument("--kinds", default="flat,sq", help=f"of {', '.join(INDEXES)}")
    parser.add_argument("--refine", default="0,2", help="refine factors (0: none)")
    parser.add_argument("--k", default="10,150", help="result sizes")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--work-dir", type=Path, help="where the tables go (default: a temp dir)")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    settings = Settings()
    embedder = FastEmbedEmbedder(
        threads=settings.embedding_threads, query_threads=settings.embedding_query_threads
    )
    facts = generate(args.size, 0)
    vectors, from_cache = cached_embeddings(facts, embedder, default_cache_dir())
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    asked = questions(facts, args.queries, 0)
    queries = np.stack([np.asarray(embedder.embed(q, query=True), np.float32) for q in asked])
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    units = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    exact = {k: exact_top(unit, units, k) for k in map(int, args.k.split(","))}
    del unit
    probes = probes_for(settings.ann_nprobes, args.size)
    refines = [int(r) for r in args.refine.split(",")]
    report: dict[str, Any] = {
        "benchmark": "ivf_quantised",
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
        "load_avg_1_5_15_at_start": [round(x, 2) for x in os.getloadavg()],
        "rows": args.size,
        "embeddings_from_cache": from_cache,
        "queries": len(asked),
        "probes": probes,
        "partition_rows": IVF_PARTITION_ROWS,
        "units": "recall in [0, 1] against exact cosine, higher is better; ms lower is better",
        "indexes": {},
    }
    with tempfile.TemporaryDirectory(prefix="tribal-ivf-", dir=args.work_dir) as tmp:
        for kind in args.kinds.split(","):
            report["indexes"][kind] = asyncio.run(
                measure_index(Path(tmp), kind, vectors, queries, exact, refines, probes)
            )
            args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report["indexes"]))


if __name__ == "__main__":
    main()

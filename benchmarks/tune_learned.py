"""Tune the learned layer's scoring settings on the *first* half of LoCoMo questions only.

The learning benchmark (``tribal-memory bench learn``) feeds back the first half
of each conversation's questions and reports on the second half. To choose
thresholds without looking at that second half, this script splits the first
half again (seed ``--inner-seed``): feedback on one part, measure on the other.
The learned state is built once per conversation; each grid point then only
re-scores (a fresh ``Retriever`` over the same tables), so the grid covers the
settings that act at query time.

    python benchmarks/tune_learned.py ../shared/data/locomo-dev.json \
        --out benchmarks/results/tune-learned-locomo-dev.json
    python benchmarks/tune_learned.py --suite team-facts --grid '{"usage_prior_weight": [0.3]}'

A suite's inner split keeps only the facts the benchmark feeds back
(:func:`suite_inner_split`).
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import tempfile
import time
from pathlib import Path
from typing import Any

from tribal_memory.base.config import Settings
from tribal_memory.bench.learn import (
    AGENT_FEEDBACK_K,
    _measure,
    _replay,
    _Rows,
    _summary,
)
from tribal_memory.bench.learn_data import BenchStore, load, locomo_stores, suite_stores
from tribal_memory.embeddings.fastembed import FastEmbedEmbedder
from tribal_memory.learned.learner import Learner
from tribal_memory.retrieval import Retriever
from tribal_memory.service.memory_service import MemoryService

GRID: dict[str, list[Any]] = {
    "feedback_similarity": [0.6, 0.7, 0.8],
    "max_boost": [0.2, 0.3, 0.5],
    "anchor_weight": [0.1, 0.2, 0.3],
    "anchor_min_match": [0.5, 0.7],
    "semantic_cache_threshold": [0.95, 0.97],
}
VARIANTS = ("plain", "+cache", "+expansion", "+feedback", "+anchors", "learned")


def inner_split(store: BenchStore, seed: int) -> BenchStore:
    """The store with its fed half split again: feedback on one part, measure the other."""
    fed = list(store.fed)
    random.Random(f"inner:{seed}:{store.owner}").shuffle(fed)
    half = len(fed) // 2
    return BenchStore(store.owner, store.memories, fed[:half], fed[half:])


def suite_inner_split(store: BenchStore, seed: int) -> BenchStore:
    """A suite store (:func:`suite_stores`) cut down to its fed facts, split again.

    Half of the fed facts keep their feedback (on their first phrasing); the
    measured questions are their other phrasings and every phrasing of the
    other half, so both ``new_fed`` and ``new_unfed`` exist without asking a
    question of the facts the benchmark itself holds out.
    """
    fed_facts = [q.gold[0] for q in store.fed]
    random.Random(f"inner:{seed}:{store.owner}").shuffle(fed_facts)
    kept = set(fed_facts[: len(fed_facts) // 2])
    inner = set(fed_facts)
    fed = [q for q in store.fed if q.gold[0] in kept]
    new = [q for q in store.new if q.gold[0] in inner]
    new += [q for q in store.fed if q.gold[0] in inner - kept]
    return BenchStore(store.owner, store.memories, fed, new)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", type=Path, nargs="?", help="LoCoMo-format file")
    parser.add_argument("--suite", help="a project suite (e.g. team-facts) instead of a file")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--inner-seed", type=int, default=1)
    parser.add_argument("--limit-samples", type=int)
    parser.add_argument("--grid", type=json.loads, default=None, help="JSON {setting: [values]}")
    args = parser.parse_args()
    grid = args.grid or GRID
    points = [dict(zip(grid, values, strict=True)) for values in itertools.product(*grid.values())]
    embedder = FastEmbedEmbedder(Settings().embedding_model)
    if args.suite:
        stores = [
            suite_inner_split(s, args.inner_seed) for s in suite_stores(args.suite, args.seed)
        ]
    elif args.path:
        stores = [
            inner_split(s, args.inner_seed)
            for s in locomo_stores(args.path, args.seed, args.limit_samples)
        ]
    else:
        parser.error("give a LoCoMo-format PATH or --suite")
    rows = [_Rows() for _ in points]
    started = time.perf_counter()
    for number, store in enumerate(stores, start=1):
        with (
            tempfile.TemporaryDirectory(prefix="tribal-tune-") as tmp,
            MemoryService(Settings(data_dir=Path(tmp)), embedder=embedder) as service,
        ):
            load(service, store.memories)
            used, _, _ = _replay(service, store, rounds=3, feedback_k=AGENT_FEEDBACK_K)
            for point, point_rows in zip(points, rows, strict=True):
                settings = Settings(data_dir=Path(tmp), **point)
                service.learner = Learner(settings, service.db, service.store, embedder)
                service.retriever = Retriever(settings, service.store, embedder, service.learner)
                names = VARIANTS if len(points) == 1 else ("plain", "learned")
                _measure(service, store, used, point_rows, names)
        # Conversation ids are evaluation data: progress names only their position.
        print(
            f"conversation {number}/{len(stores)} done ({time.perf_counter() - started:.0f} s)",
            flush=True,
        )
    results = []
    for point, point_rows in zip(points, rows, strict=True):
        summary = {
            name: {s: _summary(point_rows.rows[name][s]) for s in ("new", "new_fed", "new_unfed")}
            for name in point_rows.rows
            if point_rows.rows[name]["new"]
        }
        results.append({"settings": point, "variants": summary})
        line = " ".join(f"{k}={v}" for k, v in point.items())
        for name, sets in summary.items():
            print(
                f"{line} | {name:10s} new R@10 {sets['new']['recall@10']:.3f}"
                f" fed {sets['new_fed']['recall@10']:.3f}"
                f" unfed {sets['new_unfed']['recall@10']:.3f}"
                f" false {sets['new']['false_hit_rate']:.3f} p50 {sets['new']['p50_ms']}"
            )
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        report = {
            "dataset": args.suite or str(args.path),
            "protocol": "inner split of the fed half",
            "seed": args.seed,
            "inner_seed": args.inner_seed,
            "results": results,
        }
        args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()

"""Offline simulation of query-independent feedback signals on many inner splits.

Usage::

    python benchmarks/prior_sim.py ../shared/data/locomo-dev.json --out F
    python benchmarks/prior_sim.py --suite team-facts --out F

``tune_learned.py`` measures the server itself, but on one inner split only,
whose 40-odd fed questions make a point's figure move by a question or two.
This script averages over many inner splits instead, by simulating what the
learned layer's usage signals do to the plain ranking:

1. Each store is built once in a real service; every fed and new question of
   the benchmark's split (seed 0) is asked once with plain hybrid search, and
   its top ``POOL`` (memory key, fused score) is kept.
2. Per inner split (the fed half split again as ``tune_learned.py`` does,
   seeds 1..N): the agent's feedback is the gold among the plain top 10 of
   each fed question; after three rounds a used (query, memory) weight is
   0.875 and a skipped one -0.271 (learning rate 0.5, penalty rate 0.1).
3. A measured question's pool is re-scored the way ``Retriever._rank`` applies
   the usage priors: ``score x (1 + min(max_boost, usage_w x used) - skip_w x
   skipped)``, ``used`` and ``skipped`` each the memory's summed weights
   capped at 1. Optionally a co-use lift: ``+ co_w x score x`` the best score
   among the pool's memories used together with it for one fed question.

It ignores the similarity boosts, expansion and anchors (which change no
inner-split top 10 on this data, see the README) and that the server's own
replay asks with learning on in rounds 2-3. On inner seed 1 it reproduces the
server's ``tune_learned.py`` figures within about half a point. The pools are
kept in ``~/.cache/tribal-memory/prior-sim/`` (evaluation data stays out of
the repository); the report holds only averages.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import random
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from tribal_memory.bench.learn import BenchStore, locomo_stores, suite_stores
from tribal_memory.bench.metrics import hit_at, recall_at
from tribal_memory.config import Settings
from tribal_memory.embeddings.fastembed import FastEmbedEmbedder
from tribal_memory.models import LearnedParts, SearchFilters
from tribal_memory.service import MemoryService

POOL = 150
SHOWN = 10
USED_WEIGHT = 0.875  # 0.5 -> 0.75 -> 0.875 over three rounds
SKIPPED_WEIGHT = 0.271  # -0.1 -> -0.19 -> -0.271
GRID: dict[str, list[float]] = {
    "usage_prior_weight": [0.0, 0.3],
    "skip_prior_weight": [0.0, 0.05, 0.1, 0.15, 0.2, 0.3],
    "co_use_weight": [0.0],
}
CACHE = Path.home() / ".cache" / "tribal-memory" / "prior-sim"


def _pools(stores: list[BenchStore], label: str) -> list[dict[str, Any]]:
    """Per store: each question's split, gold keys and plain top ``POOL``; cached on disk."""
    digest = hashlib.sha256(
        json.dumps([[m.content for m in s.memories] for s in stores]).encode()
    ).hexdigest()[:16]
    path = CACHE / f"{label}-{digest}.json"
    if path.exists():
        cached: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))
        return cached
    embedder = FastEmbedEmbedder(Settings().embedding_model)
    found = []
    for store in stores:
        with (
            tempfile.TemporaryDirectory(prefix="tribal-sim-") as tmp,
            MemoryService(Settings(data_dir=Path(tmp)), embedder=embedder) as service,
        ):
            for start in range(0, len(store.memories), 64):
                service.capture_batch(store.memories[start : start + 64])
            service.optimize()
            filters = SearchFilters(owner=store.owner, include_shared=False)
            questions = []
            for split, asked in (("fed", store.fed), ("new", store.new)):
                for question in asked:
                    result = service.search(
                        question.text, k=POOL, filters=filters, learned=LearnedParts.none()
                    )
                    pool = [[str(h.memory.metadata.get("key")), h.score] for h in result.hits]
                    questions.append({"split": split, "gold": list(question.gold), "pool": pool})
        found.append({"owner": store.owner, "questions": questions})
    CACHE.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(found), encoding="utf-8")
    return found


def _inner(store: dict[str, Any], seed: int, suite: bool) -> tuple[list[Any], list[Any]]:
    """(fed, measured) questions of one inner split, as ``tune_learned.py`` splits them."""
    fed = [q for q in store["questions"] if q["split"] == "fed"]
    new = [q for q in store["questions"] if q["split"] == "new"]
    rng = random.Random(f"inner:{seed}:{store['owner']}")
    if not suite:
        fed = list(fed)
        rng.shuffle(fed)
        return fed[: len(fed) // 2], fed[len(fed) // 2 :]
    facts = [q["gold"][0] for q in fed]
    rng.shuffle(facts)
    kept, inner = set(facts[: len(facts) // 2]), set(facts)
    measured = [q for q in new if q["gold"][0] in inner]
    measured += [q for q in fed if q["gold"][0] in inner - kept]
    return [q for q in fed if q["gold"][0] in kept], measured


def _rank(question: dict[str, Any], signals: dict[str, Any], point: dict[str, float]) -> list[str]:
    used, skipped, co_used = signals["used"], signals["skipped"], signals["co_used"]
    pool = {key: score for key, score in question["pool"]}
    rescored = []
    for key, score in question["pool"]:
        gain = min(0.3, point["usage_prior_weight"] * min(1.0, used.get(key, 0.0)))
        gain -= point["skip_prior_weight"] * min(1.0, skipped.get(key, 0.0))
        lift = max((pool[n] for n in co_used.get(key, ()) if n in pool), default=0.0)
        rescored.append((score * (1 + gain + point["co_use_weight"] * lift), key))
    rescored.sort(key=lambda pair: -pair[0])
    return [key for _, key in rescored]


def _signals(fed: list[dict[str, Any]]) -> tuple[dict[str, Any], set[str]]:
    used: dict[str, float] = defaultdict(float)
    skipped: dict[str, float] = defaultdict(float)
    co_used: dict[str, set[str]] = defaultdict(set)
    for question in fed:
        shown = [key for key, _ in question["pool"][:SHOWN]]
        chosen = [key for key in shown if key in question["gold"]]
        for key in shown:
            if key in chosen:
                used[key] += USED_WEIGHT
                co_used[key].update(c for c in chosen if c != key)
            else:
                skipped[key] += SKIPPED_WEIGHT
    return {"used": used, "skipped": skipped, "co_used": co_used}, set(used)


def evaluate(
    stores: list[dict[str, Any]], point: dict[str, float], seeds: range, suite: bool
) -> dict[str, Any]:
    """Mean recall@10 and hit@5 per set (new, new_fed, new_unfed) over the inner seeds."""
    per_seed = []
    for seed in seeds:
        rows: dict[str, list[tuple[float, float]]] = {"new": [], "new_fed": [], "new_unfed": []}
        for store in stores:
            fed, measured = _inner(store, seed, suite)
            signals, fed_keys = _signals(fed)
            for question in measured:
                ranked = _rank(question, signals, point)
                row = (recall_at(ranked, question["gold"], 10), hit_at(ranked, question["gold"], 5))
                rows["new"].append(row)
                rows["new_fed" if fed_keys & set(question["gold"]) else "new_unfed"].append(row)
        per_seed.append(
            {
                name: (float(np.mean([r[0] for r in got])), float(np.mean([r[1] for r in got])))
                for name, got in rows.items()
            }
        )
    return {
        name: {
            "recall@10": round(float(np.mean([s[name][0] for s in per_seed])), 4),
            "hit@5": round(float(np.mean([s[name][1] for s in per_seed])), 4),
        }
        for name in ("new", "new_fed", "new_unfed")
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", type=Path, nargs="?", help="LoCoMo-format file")
    parser.add_argument("--suite", help="a project suite (e.g. team-facts) instead of a file")
    parser.add_argument("--seeds", type=int, default=8, help="inner splits 1..N")
    parser.add_argument("--grid", type=json.loads, default=None, help="JSON {setting: [values]}")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    grid = {**GRID, **(args.grid or {})}
    if args.suite:
        stores, label = suite_stores(args.suite, 0), args.suite
    elif args.path:
        stores, label = locomo_stores(args.path, 0), args.path.stem
    else:
        parser.error("give a LoCoMo-format PATH or --suite")
    pools = _pools(stores, label)
    seeds = range(1, args.seeds + 1)
    results = []
    for values in itertools.product(*grid.values()):
        point = dict(zip(grid, values, strict=True))
        sets = evaluate(pools, point, seeds, bool(args.suite))
        results.append({"settings": point, "sets": sets})
        print(
            " ".join(f"{k}={v}" for k, v in point.items()),
            "|",
            " ".join(
                f"{name} R@10 {m['recall@10']:.4f} hit@5 {m['hit@5']:.4f}"
                for name, m in sets.items()
            ),
            flush=True,
        )
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        report = {
            "dataset": args.suite or str(args.path),
            "protocol": f"simulated usage signals, inner splits 1..{args.seeds} of the fed half",
            "results": results,
        }
        args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()

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
3. A measured question's pool is re-scored the way
   :func:`tribal_memory.retrieval.ranking.rank` applies the usage priors:
   ``score x (1 + min(max_boost, usage_w x used) - skip_w x skipped)``,
   ``used`` and ``skipped`` each the memory's summed weights capped at 1.
   Optionally a co-use lift: ``+ co_w x score x`` the best score among the
   pool's memories used together with it for one fed question;
   and optionally per-owner fusion weights (``fit_fusion`` 1: fitted over the
   pool, 2: within the shown top 10 only): the vector weight that ranks the
   used memories of the owner's fed questions highest re-fuses its measured
   questions' pools (vector and BM25 parts as the server normalised them,
   adjacent-turn smoothing as the server does it).

It ignores the similarity boosts, expansion and anchors (which change no
inner-split top 10 on this data, see docs/history.md) and that the server's own
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

from tribal_memory.base.config import Settings
from tribal_memory.base.models import SearchFilters
from tribal_memory.base.results import LearnedParts
from tribal_memory.bench.learn_data import BenchStore, load, locomo_stores, suite_stores
from tribal_memory.bench.metrics import hit_at, recall_at
from tribal_memory.embeddings.fastembed import FastEmbedEmbedder
from tribal_memory.service.memory_service import MemoryService

POOL = 150
SHOWN = 10
USED_WEIGHT = 0.875  # 0.5 -> 0.75 -> 0.875 over three rounds
SKIPPED_WEIGHT = 0.271  # -0.1 -> -0.19 -> -0.271
GRID: dict[str, list[float]] = {
    "usage_prior_weight": [0.0, 0.3],
    "skip_prior_weight": [0.0, 0.05, 0.1, 0.15, 0.2, 0.3],
    "co_use_weight": [0.0],
    "fit_fusion": [0],
}
FIT_WEIGHTS = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8)
NEIGHBOUR_WEIGHT = Settings().neighbour_weight
VECTOR_WEIGHT = Settings().vector_weight  # the pools' fusion
CACHE = Path.home() / ".cache" / "tribal-memory" / "prior-sim"


def _pools(stores: list[BenchStore], label: str) -> list[dict[str, Any]]:
    """Per store: each question's split, gold keys and plain top ``POOL``; cached on disk."""
    digest = hashlib.sha256(
        json.dumps([[m.content for m in s.memories] for s in stores]).encode()
    ).hexdigest()[:16]
    path = CACHE / f"{label}-{digest}-v2.json"
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
            load(service, store.memories)
            filters = SearchFilters(owner=store.owner, include_shared=False)
            questions = []
            for split, asked in (("fed", store.fed), ("new", store.new)):
                for question in asked:
                    result = service.search(
                        question.text, k=POOL, filters=filters, learned=LearnedParts.none()
                    )
                    pool = [
                        [
                            str(h.memory.metadata.get("key")),
                            h.score,
                            h.vector_score or 0.0,
                            h.text_score or 0.0,
                            h.memory.doc_id,
                            h.memory.chunk_index,
                        ]
                        for h in result.hits
                    ]
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


def _refused(question: dict[str, Any], vector_weight: float) -> dict[str, float]:
    """The pool's scores fused again with ``vector_weight``, then smoothed as the server does."""
    fused = {e[0]: vector_weight * e[2] + (1 - vector_weight) * e[3] for e in question["pool"]}
    at = {(e[4], e[5]): fused[e[0]] for e in question["pool"] if e[4] is not None}
    smoothed = {}
    for key, _, _, _, doc, index in question["pool"]:
        near = max(at.get((doc, index - 1), 0.0), at.get((doc, index + 1), 0.0)) if doc else 0.0
        smoothed[key] = (fused[key] + NEIGHBOUR_WEIGHT * near) / (1 + NEIGHBOUR_WEIGHT)
    return smoothed


def _fitted_weight(fed: list[dict[str, Any]], shown_only: bool) -> float:
    """The vector weight that ranks the memories used for ``fed`` highest (mean reciprocal rank).

    Only what the agent was shown (the plain top ``SHOWN``) can have been used.
    ``shown_only``: rank the used memories among the shown ones alone, their
    neighbour smoothing held at its value (what a server that logs only the
    hits it returned can compute); else among the whole pool.
    """
    taught = []
    for question in fed:
        used = [e[0] for e in question["pool"][:SHOWN] if e[0] in question["gold"]]
        if used:
            taught.append((question, used))

    def scores(question: dict[str, Any], weight: float) -> dict[str, float]:
        if not shown_only:
            return _refused(question, weight)
        smoothing = 1 + NEIGHBOUR_WEIGHT
        return {
            e[0]: (weight * e[2] + (1 - weight) * e[3]) / smoothing
            + e[1]
            - (VECTOR_WEIGHT * e[2] + (1 - VECTOR_WEIGHT) * e[3]) / smoothing
            for e in question["pool"][:SHOWN]
        }

    def fit(weight: float) -> float:
        total = 0.0
        for question, used in taught:
            ranked = scores(question, weight)
            order = sorted(ranked, key=lambda key: -ranked[key])
            total += float(np.mean([1 / (order.index(u) + 1) for u in used]))
        return total

    return max(FIT_WEIGHTS, key=fit)


def _rank(
    question: dict[str, Any],
    signals: dict[str, Any],
    point: dict[str, float],
    vector_weight: float | None = None,
) -> list[str]:
    used, skipped, co_used = signals["used"], signals["skipped"], signals["co_used"]
    pool = (
        {entry[0]: entry[1] for entry in question["pool"]}
        if vector_weight is None
        else _refused(question, vector_weight)
    )
    rescored = []
    for key, score in pool.items():
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
        shown = [entry[0] for entry in question["pool"][:SHOWN]]
        chosen = [key for key in shown if key in question["gold"]]
        for key in shown:
            if key in chosen:
                used[key] += USED_WEIGHT
                co_used[key].update(c for c in chosen if c != key)
            else:
                skipped[key] += SKIPPED_WEIGHT
    return {"used": used, "skipped": skipped, "co_used": co_used}, set(used)


def evaluate(
    stores: list[dict[str, Any]], point: dict[str, float], seeds: list[int], suite: bool
) -> dict[str, Any]:
    """Mean recall@10 and hit@5 per set (new, new_fed, new_unfed) over the inner seeds."""
    per_seed = []
    for seed in seeds:
        rows: dict[str, list[tuple[float, float]]] = {"new": [], "new_fed": [], "new_unfed": []}
        for store in stores:
            fed, measured = _inner(store, seed, suite)
            signals, fed_keys = _signals(fed)
            fitting = point["fit_fusion"]
            weight = _fitted_weight(fed, shown_only=fitting == 2) if fitting else None
            for question in measured:
                ranked = _rank(question, signals, point, weight)
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


def liftable(stores: list[dict[str, Any]], seeds: list[int], suite: bool) -> dict[str, Any]:
    """What a usage prior could lift: measured questions' pool memories outside the top 10.

    Over the inner seeds, counts the gold memories of the measured questions
    (``new_fed`` and ``new_unfed``): in the plain top ``SHOWN``, below it but
    in the pool and used for a fed question (what a usage prior can lift),
    below it and never used, and outside the pool; and how many pool
    memories below the top ``SHOWN`` were used for a fed question but are
    not gold for the measured one (what the same prior lifts by mistake),
    with the share of them at ranks 11-15.
    """
    counts: dict[str, int] = defaultdict(int)
    for seed in seeds:
        for store in stores:
            fed, measured = _inner(store, seed, suite)
            signals, fed_keys = _signals(fed)
            used = signals["used"]
            for question in measured:
                name = "new_fed" if fed_keys & set(question["gold"]) else "new_unfed"
                keys = [entry[0] for entry in question["pool"]]
                for gold in question["gold"]:
                    if gold in keys[:SHOWN]:
                        where = "top"
                    elif gold in keys:
                        where = "below_used" if gold in used else "below_unused"
                    else:
                        where = "outside_pool"
                    counts[f"{name}_gold_{where}"] += 1
                for rank, key in enumerate(keys[SHOWN:], start=SHOWN + 1):
                    if key in used and key not in question["gold"]:
                        counts[f"{name}_used_not_gold_below"] += 1
                        counts[f"{name}_used_not_gold_at_11_15"] += rank <= 15
                    elif key in used:
                        counts[f"{name}_gold_used_at_11_15"] += rank <= 15
    return dict(sorted(counts.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", type=Path, nargs="?", help="LoCoMo-format file")
    parser.add_argument("--suite", help="a project suite (e.g. team-facts) instead of a file")
    parser.add_argument(
        "--seeds",
        type=lambda text: [int(seed) for seed in text.split(",")],
        default=list(range(1, 9)),
        help="inner split seeds, comma-separated (default 1..8)",
    )
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
    seeds = args.seeds
    fed = [q for store in pools for q in store["questions"] if q["split"] == "fed"]
    co_used = sum(len({e[0] for e in q["pool"][:SHOWN]} & set(q["gold"])) >= 2 for q in fed)
    print(f"fed questions with 2 or more gold in the top {SHOWN}: {co_used} of {len(fed)}")
    ceiling = liftable(pools, seeds, bool(args.suite))
    print("gold and used memories of the measured questions, summed over the seeds:", ceiling)
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
            "protocol": f"simulated usage signals, inner splits {seeds} of the fed half",
            "fed_questions": len(fed),
            "fed_with_two_or_more_gold_shown": co_used,
            "liftable": ceiling,
            "results": results,
        }
        args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()

"""The fusion's vector weight on the project's fact suite: which weight suits facts.

Usage: ``python benchmarks/fact_sweep.py [--suite team-facts] [--weights 0.3,0.5,0.7]
[--out FILE]``

Every fact and distractor of the suite goes into one real store; each of its
questions (all phrasings) is asked with plain hybrid search (no learned
parts) under each vector weight, and hit@5 is reported on the odd-numbered
questions (the inner half, where a weight may be chosen) and the
even-numbered ones. :mod:`cold_sweep` does the same for LoCoMo turns; the
server's default weighs both (see docs/history.md, how the defaults were chosen).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from tribal_memory.base.config import Settings
from tribal_memory.base.models import SearchFilters
from tribal_memory.base.results import LearnedParts
from tribal_memory.bench.learn_data import suite_stores
from tribal_memory.bench.metrics import hit_at
from tribal_memory.embeddings.fastembed import FastEmbedEmbedder
from tribal_memory.retrieval import Retriever
from tribal_memory.service.memory_service import MemoryService


def sweep(suite: str, weights: list[float]) -> list[dict[str, float]]:
    """``[{vector_weight, inner_hit@5, outer_hit@5}]`` for each weight."""
    store = suite_stores(suite, 0)[0]
    questions = store.fed + store.new
    filters = SearchFilters(owner=store.owner, include_shared=False)
    model = FastEmbedEmbedder()
    rows = []
    with (
        tempfile.TemporaryDirectory() as tmp,
        MemoryService(Settings(data_dir=Path(tmp)), embedder=model) as service,
    ):
        for start in range(0, len(store.memories), 64):
            service.capture_batch(store.memories[start : start + 64])
        service.optimize()
        for weight in weights:
            settings = Settings(data_dir=Path(tmp), vector_weight=weight)
            service.retriever = Retriever(settings, service.store, model, service.learner)
            halves: dict[str, list[float]] = {"inner": [], "outer": []}
            for number, question in enumerate(questions):
                hits = service.search(
                    question.text, k=10, filters=filters, learned=LearnedParts.none()
                ).hits
                keys = [str(h.memory.metadata.get("key")) for h in hits]
                # Numbered from 1: the 1st, 3rd, ... question form the inner half.
                halves["outer" if number % 2 else "inner"].append(hit_at(keys, question.gold, 5))
            rows.append(
                {
                    "vector_weight": weight,
                    **{f"{half}_hit@5": round(sum(v) / len(v), 4) for half, v in halves.items()},
                }
            )
    return rows


def main() -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default="team-facts")
    parser.add_argument("--weights", default="0.3,0.4,0.5,0.6,0.7")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    rows = sweep(args.suite, [float(w) for w in args.weights.split(",")])
    for row in rows:
        print(json.dumps(row))
    if args.out:
        args.out.write_text(json.dumps({"suite": args.suite, "settings": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()

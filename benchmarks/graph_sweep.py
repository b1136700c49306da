"""The graph-expansion weight of ``hybrid_expanded`` search on LoCoMo conversations.

Usage: ``python benchmarks/graph_sweep.py ../shared/data/locomo-dev.json
[--weights 0,0.05,0.1,0.15,0.2,0.3] [--out FILE]``

Each conversation goes into one real store (as ``tribal-memory bench locomo``
loads it); each question is asked with ``hybrid_expanded`` search, no learned
parts, under each weight (0 is plain hybrid). A turn's related candidates are
the other turns of its session (LoCoMo has no relations), so this measures a
session-level lift. recall@10 and MRR are reported on the odd-numbered
questions (the inner half, where a weight may be chosen, numbered as
:mod:`cold_sweep` numbers them), the even-numbered ones, all, and per
category.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections import defaultdict
from pathlib import Path

from tribal_memory.base.config import Settings
from tribal_memory.base.models import SearchFilters
from tribal_memory.base.results import LearnedParts
from tribal_memory.bench.metrics import recall_at, reciprocal_rank
from tribal_memory.documents.locomo import load_locomo
from tribal_memory.embeddings.fastembed import FastEmbedEmbedder
from tribal_memory.retrieval import Retriever
from tribal_memory.service.memory_service import MemoryService

CATEGORIES = (1, 2, 3, 4)


def _mean(values: list[float]) -> float:
    return round(sum(values) / len(values), 4) if values else 0.0


def sweep(path: Path, weights: list[float]) -> list[dict[str, object]]:
    """One row per weight: recall@10 (inner, outer, all, per category) and MRR."""
    model = FastEmbedEmbedder()
    # weight -> [(category, recall@10, reciprocal rank, inner?)]
    rows: dict[float, list[tuple[int, float, float, bool]]] = defaultdict(list)
    number = 0
    for sample in load_locomo(path):
        asked = [q for q in sample.questions if q.category in CATEGORIES and q.evidence]
        with (
            tempfile.TemporaryDirectory(prefix="tribal-graph-") as tmp,
            MemoryService(Settings(data_dir=Path(tmp)), embedder=model) as service,
        ):
            memories = list(sample.memories)
            for start in range(0, len(memories), 64):
                service.capture_batch(memories[start : start + 64])
            service.optimize()
            filters = SearchFilters(owner=sample.sample_id, include_shared=False)
            for weight in weights:
                settings = Settings(data_dir=Path(tmp), graph_expansion_weight=weight)
                service.retriever = Retriever(
                    settings, service.store, model, service.learner, graph=service.graph
                )
                for offset, question in enumerate(asked):
                    hits = service.search(
                        question.question,
                        k=25,
                        filters=filters,
                        mode="hybrid_expanded",
                        learned=LearnedParts.none(),
                    ).hits
                    ranked = [str(h.memory.metadata.get("dia_id")) for h in hits]
                    rows[weight].append(
                        (
                            question.category,
                            recall_at(ranked, question.evidence, 10),
                            reciprocal_rank(ranked, question.evidence),
                            # Numbered from 1 over all conversations: 1st, 3rd, ... are inner.
                            (number + offset) % 2 == 0,
                        )
                    )
        number += len(asked)
        print(f"conversation done ({number} questions)", flush=True)
    report = []
    for weight in weights:
        got = rows[weight]
        report.append(
            {
                "graph_expansion_weight": weight,
                "inner_recall@10": _mean([r for _, r, _, inner in got if inner]),
                "outer_recall@10": _mean([r for _, r, _, inner in got if not inner]),
                "recall@10": _mean([r for _, r, _, _ in got]),
                "mrr": _mean([rr for _, _, rr, _ in got]),
                "per_category": {
                    str(c): _mean([r for cat, r, _, _ in got if cat == c]) for c in CATEGORIES
                },
            }
        )
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", type=Path, help="LoCoMo-format file")
    parser.add_argument(
        "--weights",
        type=lambda text: [float(w) for w in text.split(",")],
        default=[0.0, 0.05, 0.1, 0.15, 0.2, 0.3],
    )
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    report = sweep(args.path, args.weights)
    for row in report:
        print(json.dumps(row), flush=True)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        document = {"dataset": str(args.path), "mode": "hybrid_expanded", "results": report}
        args.out.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()

"""Fusion sweep on a LoCoMo-format file: recall@10/25 of hybrid search under
several fusion settings, from one set of cached candidates.

Usage: ``python benchmarks/fusion_sweep.py [PATH] [--out FILE]``

Each conversation is ingested once; for every question of categories 1-4 the
top 100 vector and BM25 candidates are fetched once, and every setting below
re-fuses those same candidates (so the sweep measures fusion alone). Use it on
development data only: picking a setting on a held-out file would tune on it.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from tribal_memory.base.config import Settings
from tribal_memory.base.models import SearchFilters
from tribal_memory.base.results import Hit
from tribal_memory.bench.locomo import CATEGORIES
from tribal_memory.bench.metrics import recall_at
from tribal_memory.documents.locomo import LocomoQuestion, load_locomo
from tribal_memory.embeddings.fastembed import FastEmbedEmbedder
from tribal_memory.retrieval.fusion import fuse
from tribal_memory.service.memory_service import MemoryService
from tribal_memory.store.base import ScoredMemory

DEFAULT_DATA = Path(__file__).resolve().parent.parent.parent / "shared/data/locomo-dev.json"
Candidates = list[tuple[LocomoQuestion, list[ScoredMemory], list[ScoredMemory]]]
Fusion = Callable[[Sequence[ScoredMemory], Sequence[ScoredMemory]], list[Hit]]


def collect(path: Path, depth: int = 100) -> Candidates:
    """Vector and BM25 candidates (``depth`` each) for every scored question."""
    model = FastEmbedEmbedder()
    found: Candidates = []
    for sample in load_locomo(path):
        with (
            tempfile.TemporaryDirectory() as tmp,
            MemoryService(Settings(data_dir=Path(tmp)), embedder=model) as service,
        ):
            memories = list(sample.memories)
            for start in range(0, len(memories), 128):
                service.capture_batch(memories[start : start + 128])
            filters = SearchFilters(owner=sample.sample_id, include_shared=False)
            for q in sample.questions:
                if q.category not in CATEGORIES or not q.evidence:
                    continue
                vector = model.embed(q.question, query=True)
                found.append(
                    (
                        q,
                        service.store.vector_search(vector, filters, depth),
                        service.store.text_search(q.question, filters, depth),
                    )
                )
    return found


def _min_max(candidates: Sequence[ScoredMemory]) -> list[ScoredMemory]:
    if not candidates:
        return []
    high = max(c.score for c in candidates)
    low = min(c.score for c in candidates)
    span = high - low
    return [ScoredMemory(c.memory, (c.score - low) / span if span else 1.0) for c in candidates]


def settings_to_try() -> dict[str, Fusion]:
    """Named fusion settings; ``weighted w=0.6 pool=50`` is the shipped default."""
    tried: dict[str, Fusion] = {}
    for pool in (25, 50, 100):
        for w in (0.3, 0.4, 0.5, 0.6):
            tried[f"weighted w={w} pool={pool}"] = lambda v, t, w=w, pool=pool: fuse(
                v[:pool], t[:pool], k=25, vector_weight=w
            )
    for pool in (50, 100):
        tried[f"rrf k=60 pool={pool}"] = lambda v, t, pool=pool: fuse(
            v[:pool], t[:pool], k=25, method="rrf"
        )
    for w in (0.3, 0.4, 0.5, 0.6):
        tried[f"min-max cosine w={w} pool=50"] = lambda v, t, w=w: fuse(
            _min_max(v[:50]), t[:50], k=25, vector_weight=w
        )
    tried["bm25 only"] = lambda v, t: fuse([], t, k=25, vector_weight=0.0)
    return tried


def sweep(candidates: Candidates) -> dict[str, dict[str, float]]:
    """recall@10 and recall@25 of every setting over the cached candidates."""
    report: dict[str, dict[str, float]] = {}
    for name, fusion in settings_to_try().items():
        r10 = r25 = 0.0
        for question, vector, text in candidates:
            ranked = [str(h.memory.metadata.get("dia_id")) for h in fusion(vector, text)]
            r10 += recall_at(ranked, question.evidence, 10)
            r25 += recall_at(ranked, question.evidence, 25)
        n = len(candidates) or 1
        report[name] = {"recall@10": round(r10 / n, 4), "recall@25": round(r25 / n, 4)}
    return report


def main() -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", type=Path, nargs="?", default=DEFAULT_DATA)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    report = sweep(collect(args.path))
    for name, figures in report.items():
        r10, r25 = figures["recall@10"], figures["recall@25"]
        print(f"{name:32s} recall@10 {r10:.4f}  recall@25 {r25:.4f}")
    if args.out:
        args.out.write_text(json.dumps({"dataset": str(args.path), "settings": report}, indent=2))


if __name__ == "__main__":
    main()

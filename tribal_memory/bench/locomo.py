"""LoCoMo retrieval benchmark: evidence-turn recall of vector and hybrid search.

Protocol: each conversation (sample) is ingested into its own fresh store
(every dialog turn one memory, see :mod:`tribal_memory.documents.locomo`); every
question of categories 1-4 (multi-hop, temporal, open-domain, single-hop;
category 5, adversarial, has no answer in the conversation) is asked with
``k = 25`` and scored against its evidence ``dia_id``s: recall@5/10/25 (share
of evidence turns in the top k), hit@10, MRR (first evidence turn within the
top 25; 0 if none) and nDCG@10. Latency is the wall time of one
``MemoryService.search`` call, query embedding included. Ingest throughput is
memories captured per second (embedding + near-duplicate check + write).

Beside the server's ``vector`` and ``hybrid`` search, two yardsticks rank the
same memories in process (:mod:`tribal_memory.bench.locomo_baselines`):
``bm25`` (rank-bm25 with stop words removed) and ``lin`` (min-max linear
fusion of cosine and rank-bm25, 0.6 / 0.4); their latency is the ranking
alone, query embedding excluded.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from tribal_memory.base.config import Settings
from tribal_memory.base.models import SearchFilters
from tribal_memory.base.results import SearchMode
from tribal_memory.bench.locomo_baselines import ConversationBaselines
from tribal_memory.bench.metrics import hit_at, ndcg_at, percentile, recall_at, reciprocal_rank
from tribal_memory.bench.report import machine_line, stderr_line, write_report
from tribal_memory.documents.locomo import LocomoQuestion, LocomoSample, load_locomo
from tribal_memory.embeddings.base import Embedder
from tribal_memory.embeddings.fastembed import FastEmbedEmbedder
from tribal_memory.service.memory_service import MemoryService

CATEGORIES = (1, 2, 3, 4)
DEPTH = 25
VARIANTS: dict[str, SearchMode] = {
    "vector": "vector",
    "hybrid": "hybrid",
    "hybrid_expanded": "hybrid_expanded",
}
BASELINES = ("bm25", "lin")
_BATCH = 64

Progress = Callable[[str], None]


def _ingest(service: MemoryService, sample: LocomoSample) -> float:
    started = time.perf_counter()
    memories = list(sample.memories)
    for start in range(0, len(memories), _BATCH):
        service.capture_batch(memories[start : start + _BATCH])
    service.optimize()
    return time.perf_counter() - started


def _row(ranked: list[str], question: LocomoQuestion, elapsed_ms: float) -> dict[str, float]:
    gold = question.evidence
    return {
        "recall@5": recall_at(ranked, gold, 5),
        "recall@10": recall_at(ranked, gold, 10),
        "recall@25": recall_at(ranked, gold, 25),
        "hit@10": hit_at(ranked, gold, 10),
        "mrr": reciprocal_rank(ranked, gold),
        "ndcg@10": ndcg_at(ranked, gold, 10),
        "ms": elapsed_ms,
        "category": float(question.category),
    }


def _baselines(service: MemoryService, owner: str) -> ConversationBaselines:
    """The yardsticks over the memories (and the vectors) the server stored for ``owner``."""
    ids: list[str] = []
    texts: list[str] = []
    vectors = []
    for memories, batch in service.store.scan(SearchFilters(owner=owner, include_shared=False)):
        ids.extend(str(m.metadata.get("dia_id")) for m in memories)
        texts.extend(m.content for m in memories)
        vectors.append(batch)
    return ConversationBaselines(ids, texts, np.vstack(vectors))


def _score_sample(
    service: MemoryService, sample: LocomoSample, rows: dict[str, list[dict[str, float]]]
) -> None:
    filters = SearchFilters(owner=sample.sample_id, include_shared=False)
    baselines = _baselines(service, sample.sample_id)
    for question in sample.questions:
        if question.category not in CATEGORIES or not question.evidence:
            continue
        for name, mode in VARIANTS.items():
            started = time.perf_counter()
            result = service.search(question.question, k=DEPTH, filters=filters, mode=mode)
            elapsed_ms = (time.perf_counter() - started) * 1000
            ranked = [str(h.memory.metadata.get("dia_id")) for h in result.hits]
            rows[name].append(_row(ranked, question, elapsed_ms))
        query_vector = service.embedder.embed(question.question, query=True)
        started = time.perf_counter()
        ranked_by = baselines.rank(question.question, query_vector, DEPTH)
        elapsed_ms = (time.perf_counter() - started) * 1000 / len(BASELINES)
        for name in BASELINES:
            rows[name].append(_row(ranked_by[name], question, elapsed_ms))


def _summary(rows: list[dict[str, float]]) -> dict[str, Any]:
    metrics = ("recall@5", "recall@10", "recall@25", "hit@10", "mrr", "ndcg@10")
    n = len(rows) or 1
    summary: dict[str, Any] = {m: round(sum(r[m] for r in rows) / n, 4) for m in metrics}
    latencies = [r["ms"] for r in rows]
    summary["p50_ms"] = round(percentile(latencies, 50), 2)
    summary["p95_ms"] = round(percentile(latencies, 95), 2)
    summary["per_category"] = {
        str(c): {
            "n": len(sub),
            "recall@10": round(sum(r["recall@10"] for r in sub) / (len(sub) or 1), 4),
        }
        for c in CATEGORIES
        if (sub := [r for r in rows if int(r["category"]) == c])
    }
    return summary


def run_locomo_bench(
    path: Path,
    out: Path | None,
    *,
    limit_samples: int | None = None,
    progress: bool = True,
    embedder: Embedder | None = None,
    settings_overrides: dict[str, Any] | None = None,
    log: Progress | None = None,
) -> dict[str, Any]:
    """Run the benchmark on the LoCoMo-format file at ``path``.

    Args:
        path: LoCoMo-format JSON (e.g. ``../shared/data/locomo-dev.json``).
        out: Where to write the JSON report (None: don't write).
        limit_samples: Only the first N conversations (for quick runs).
        progress: Print one line per conversation to stderr via ``log``.
        embedder: A loaded embedder to reuse (default: the configured model).
        settings_overrides: Settings fields to override (e.g. ``{"vector_weight": 0.5}``).
        log: Where progress lines go (default: ``print`` to stderr).

    Returns:
        ``{"dataset", "n_questions", "variants": {name: {"recall@5", "recall@10",
        "recall@25", "hit@10", "mrr", "ndcg@10", "p50_ms", "p95_ms",
        "per_category"}}, "ingest_per_s", "n_memories", "settings", "machine"}``.

    Raises:
        InvalidInput: ``path`` is not a readable LoCoMo-format file.
    """
    samples = load_locomo(path)[:limit_samples]
    overrides = settings_overrides or {}
    emit = log or stderr_line
    rows: dict[str, list[dict[str, float]]] = {name: [] for name in (*VARIANTS, *BASELINES)}
    ingest_seconds = 0.0
    n_memories = 0
    settings = Settings(**overrides)
    model = embedder or FastEmbedEmbedder(settings.embedding_model)
    for sample in samples:
        with tempfile.TemporaryDirectory(prefix="tribal-bench-") as tmp:
            settings = Settings(data_dir=Path(tmp), **overrides)
            with MemoryService(settings, embedder=model) as service:
                ingest_seconds += _ingest(service, sample)
                n_memories += len(sample.memories)
                _score_sample(service, sample, rows)
        if progress:
            done = len(rows["hybrid"])
            emit(f"{sample.sample_id}: {len(sample.memories)} turns, {done} questions so far")
    report: dict[str, Any] = {
        "dataset": str(path),
        "n_questions": len(rows["hybrid"]),
        "variants": {name: _summary(r) for name, r in rows.items()},
        "ingest_per_s": round(n_memories / ingest_seconds, 1) if ingest_seconds else 0.0,
        "n_memories": n_memories,
        "settings": {
            "embedding_model": model.model_id,
            "fusion": settings.fusion,
            "fusion_normalisation": settings.fusion_normalisation,
            "vector_weight": settings.vector_weight,
            "neighbour_weight": settings.neighbour_weight,
            "candidate_pool": settings.candidate_pool,
        },
        "machine": machine_line(),
    }
    write_report(report, out)
    return report

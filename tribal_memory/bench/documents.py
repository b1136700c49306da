"""Documents benchmark: each search mode on long structured documents (issue 18).

Protocol: every document of a question set
(:mod:`tribal_memory.bench.documents_data`; by default chapters of the Python
3.11 documentation as Debian's ``python3.11-doc`` ships their reST sources)
is converted to Markdown headings (:mod:`tribal_memory.bench.rest_markdown`)
and ingested with :meth:`MemoryService.ingest_document` into one fresh store,
under its path with ``.md``. Every question is asked in every mode with
``k = 20`` over the whole store and scored against its gold chunks:
recall@5/10/20 (share of the gold chunks in the top k), hit@10, MRR (first
gold chunk within the top 20; 0 if none) and nDCG@10. Latency is the wall
time of one ``MemoryService.search`` call, query embedding included. Each
figure is reported over all questions and per category, and the comparisons
(graph-expanded against plain hybrid) as differences, with the questions
whose recall@10 went up and down.

Summary hits (modes ``title``, ``summary``, ``automatic``): a section
summary *covers* the chunks it ``summarizes`` (a document summary covers
none), so ``modes`` scores each hit by the gold chunks it is or covers:
recall@k is the share of gold chunks covered by the top k hits, MRR the
first hit covering one, nDCG@10 gains 1 per hit that covers a gold chunk no
earlier hit did. With no summary among the hits these are the plain chunk
metrics. ``modes_chunks_only`` scores the same lists with the summaries
taken out (a summary earns nothing). The questions are split in two halves
by a fixed seed (:data:`SPLIT_SEED`): ``automatic``'s rules were developed on
``dev`` only; ``splits`` reports each half.
"""

from __future__ import annotations

import math
import random
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tribal_memory.base.config import Settings
from tribal_memory.base.errors import NotFound
from tribal_memory.base.models import SUMMARY_KIND, SearchFilters
from tribal_memory.base.results import SearchMode
from tribal_memory.bench.documents_data import (
    DEFAULT_DOCS_DIR,
    DocQuestion,
    QuestionSet,
    StoredChunk,
    gold_chunks,
    load_questions,
    markdown_path,
)
from tribal_memory.bench.metrics import hit_at, ndcg_at, percentile, recall_at, reciprocal_rank
from tribal_memory.bench.report import machine_line, stderr_line, write_report
from tribal_memory.bench.rest_markdown import rest_to_markdown
from tribal_memory.embeddings.base import Embedder
from tribal_memory.embeddings.fastembed import FastEmbedEmbedder
from tribal_memory.service.memory_service import MemoryService

MODES: tuple[SearchMode, ...] = (
    "hybrid",
    "vector",
    "text",
    "hybrid_expanded",
    "title",
    "summary",
    "automatic",
)
"""The modes asked by default; a new search mode is one more name here."""
COMPARISONS: tuple[tuple[str, str], ...] = (("hybrid_expanded", "hybrid"),)
"""(mode, baseline) pairs reported as differences when both modes ran."""
DEPTH = 20
SPLIT_SEED = 18
"""Seed of the shuffle that splits the questions into the dev and held-out halves."""
METRICS = ("recall@5", "recall@10", "recall@20", "hit@10", "mrr", "ndcg@10")

Progress = Callable[[str], None]


def _ingest(
    service: MemoryService, docs_dir: Path, documents: Sequence[str], emit: Progress
) -> tuple[float, float]:
    """Ingest every document; returns (wall seconds, CPU seconds of this process)."""
    started, cpu = time.perf_counter(), time.process_time()
    for number, document in enumerate(documents, start=1):
        text = (docs_dir / document).read_text(encoding="utf-8")
        result = service.ingest_document(markdown_path(document), rest_to_markdown(text))
        emit(f"[{number}/{len(documents)}] {document}: {result.chunks} chunks")
    service.optimize()
    return time.perf_counter() - started, time.process_time() - cpu


def _stored_chunks(
    service: MemoryService, documents: Sequence[str]
) -> dict[str, list[StoredChunk]]:
    """The stored chunks of each document, keyed by its reST name."""
    by_source = {markdown_path(d): d for d in documents}
    chunks: dict[str, list[StoredChunk]] = defaultdict(list)
    for memories, _ in service.store.scan(SearchFilters(kinds=("chunk",))):
        for memory in memories:
            if memory.source in by_source:
                heading = str(memory.metadata.get("heading", ""))
                chunks[by_source[memory.source]].append(
                    StoredChunk(memory.memory_id, memory.content, heading)
                )
    return chunks


def _row(ranked: list[str], gold: set[str], elapsed_ms: float) -> dict[str, float]:
    return {
        "recall@5": recall_at(ranked, gold, 5),
        "recall@10": recall_at(ranked, gold, 10),
        "recall@20": recall_at(ranked, gold, 20),
        "hit@10": hit_at(ranked, gold, 10),
        "mrr": reciprocal_rank(ranked, gold),
        "ndcg@10": ndcg_at(ranked, gold, 10),
        "ms": elapsed_ms,
    }


def _covering_row(
    ranked: list[str], covers: dict[str, frozenset[str]], gold: set[str], elapsed_ms: float
) -> dict[str, float]:
    """:func:`_row` where each hit counts as the chunks it covers (see the module docstring)."""
    found: list[set[str]] = []  # gold chunks newly covered by each hit
    seen: set[str] = set()
    for memory_id in ranked:
        new = set(covers.get(memory_id, frozenset({memory_id}))) & gold - seen
        seen |= new
        found.append(new)

    def recall(k: int) -> float:
        return len(set().union(*found[:k])) / len(gold)

    first = next((rank for rank, new in enumerate(found, start=1) if new), None)
    dcg = sum(1.0 / math.log2(i + 2) for i, new in enumerate(found[:10]) if new)
    ideal = sum(1.0 / math.log2(i + 2) for i in range(min(10, len(gold))))
    return {
        "recall@5": recall(5),
        "recall@10": recall(10),
        "recall@20": recall(20),
        "hit@10": 1.0 if any(found[:10]) else 0.0,
        "mrr": 1.0 / first if first is not None else 0.0,
        "ndcg@10": dcg / ideal if ideal else 0.0,
        "ms": elapsed_ms,
    }


def _covers(service: MemoryService) -> dict[str, frozenset[str]]:
    """``{summary id: ids of the chunks it summarizes}`` of every summary stored."""
    ids = [
        m.memory_id
        for batch, _ in service.store.scan(SearchFilters(kinds=(SUMMARY_KIND,)))
        for m in batch
    ]
    covers: dict[str, set[str]] = {i: set() for i in ids}
    for relation in service.core.graph.edges_of(ids):
        if relation.type == "summarizes" and relation.source_id in covers:
            covers[relation.source_id].add(relation.target_id)
    return {i: frozenset(chunks) for i, chunks in covers.items()}


def split_halves(questions: Sequence[DocQuestion]) -> dict[str, set[str]]:
    """The question ids in two halves, ``dev`` and ``held_out``, shuffled by :data:`SPLIT_SEED`."""
    ids = sorted(q.question_id for q in questions)
    random.Random(SPLIT_SEED).shuffle(ids)
    half = len(ids) // 2
    return {"dev": set(ids[:half]), "held_out": set(ids[half:])}


def _mean(rows: Sequence[dict[str, float]], metric: str) -> float:
    return round(sum(r[metric] for r in rows) / (len(rows) or 1), 4)


def _summary(rows: list[dict[str, float]], categories: list[str]) -> dict[str, Any]:
    summary: dict[str, Any] = {m: _mean(rows, m) for m in METRICS}
    latencies = [r["ms"] for r in rows]
    summary["p50_ms"] = round(percentile(latencies, 50), 2)
    summary["p95_ms"] = round(percentile(latencies, 95), 2)
    by_category: dict[str, list[dict[str, float]]] = defaultdict(list)
    for category, row in zip(categories, rows, strict=True):
        by_category[category].append(row)
    summary["per_category"] = {
        category: {"n": len(sub), **{m: _mean(sub, m) for m in METRICS}}
        for category, sub in sorted(by_category.items())
    }
    return summary


def _compare(
    rows: dict[str, list[dict[str, float]]], summaries: dict[str, Any], mode: str, baseline: str
) -> dict[str, Any]:
    """``mode`` minus ``baseline``: overall, per category, and questions up or down at recall@10."""
    ours, theirs = summaries[mode], summaries[baseline]
    pairs = list(zip(rows[mode], rows[baseline], strict=True))
    return {
        **{m: round(ours[m] - theirs[m], 4) for m in METRICS},
        "p50_ms": round(ours["p50_ms"] - theirs["p50_ms"], 2),
        "per_category": {
            category: {
                m: round(figures[m] - theirs["per_category"][category][m], 4) for m in METRICS
            }
            for category, figures in ours["per_category"].items()
        },
        "recall@10_up": sum(1 for a, b in pairs if a["recall@10"] > b["recall@10"]),
        "recall@10_down": sum(1 for a, b in pairs if a["recall@10"] < b["recall@10"]),
    }


Rows = dict[str, list[dict[str, float]]]


def ask(
    service: MemoryService,
    questions: Sequence[DocQuestion],
    gold: dict[str, set[str]],
    modes: Sequence[SearchMode],
) -> tuple[Rows, Rows, list[dict[str, Any]]]:
    """Every question in every mode.

    Returns:
        Metric rows per mode with summaries covering their chunks, the same
        with summaries taken out, and per question its first gold rank (of a
        chunk or a covering summary) and the mode each search ran (with
        ``automatic``'s reason).
    """
    covers = _covers(service)
    rows: Rows = {mode: [] for mode in modes}
    chunk_rows: Rows = {mode: [] for mode in modes}
    per_question: list[dict[str, Any]] = []
    for question in questions:
        ranks: dict[str, int | None] = {}
        ran: dict[str, str] = {}
        wanted = gold[question.question_id]
        for mode in modes:
            started = time.perf_counter()
            result = service.search(question.text, k=DEPTH, mode=mode)
            elapsed_ms = (time.perf_counter() - started) * 1000
            ranked = [hit.memory.memory_id for hit in result.hits]
            rows[mode].append(_covering_row(ranked, covers, wanted, elapsed_ms))
            chunks = [i for i in ranked if i not in covers]
            chunk_rows[mode].append(_row(chunks, wanted, elapsed_ms))
            found = [bool(covers.get(i, frozenset({i})) & wanted) for i in ranked]
            ranks[mode] = next((r for r, hit in enumerate(found, start=1) if hit), None)
            if mode == "automatic":
                ran[mode] = f"{result.mode}: {result.mode_reason}"
        per_question.append(
            {
                "id": question.question_id,
                "category": question.category,
                "n_gold": len(wanted),
                "first_gold_rank": ranks,
                **({"automatic": ran["automatic"]} if ran else {}),
            }
        )
    return rows, chunk_rows, per_question


def summarise(
    rows: Rows, questions: Sequence[DocQuestion], only: set[str] | None = None
) -> dict[str, Any]:
    """Per mode the figures of :func:`_summary`, over the questions in ``only`` (None: all)."""
    keep = [only is None or q.question_id in only for q in questions]
    categories = [q.category for q, k in zip(questions, keep, strict=True) if k]
    return {
        mode: _summary([r for r, k in zip(mode_rows, keep, strict=True) if k], categories)
        for mode, mode_rows in rows.items()
    }


def run_documents_bench(
    docs_dir: Path | None = None,
    out: Path | None = None,
    *,
    modes: Sequence[SearchMode] = MODES,
    question_set: QuestionSet | None = None,
    embedder: Embedder | None = None,
    settings_overrides: dict[str, Any] | None = None,
    log: Progress | None = None,
) -> dict[str, Any]:
    """Run the documents benchmark (see the module docstring).

    Args:
        docs_dir: Directory holding the set's reST documents (default:
            :data:`~tribal_memory.bench.documents_data.DEFAULT_DOCS_DIR`).
        out: Where to write the JSON report (None: don't write).
        modes: Search modes to ask, in report order.
        question_set: The questions and their documents (default: the shipped
            ``python-docs-questions``).
        embedder: A loaded embedder to reuse (default: the configured model).
        settings_overrides: Settings fields to override.
        log: Where progress lines go (default: stderr).

    Returns:
        ``{"dataset", "source", "docs_dir", "n_documents", "n_chunks",
        "n_questions", "questions_per_category", "depth", "n_summaries",
        "ingest_s", "ingest_cpu_s" (CPU seconds of this process, load-independent),
        "modes": {mode: {"recall@5", "recall@10", "recall@20", "hit@10",
        "mrr", "ndcg@10", "p50_ms", "p95_ms", "per_category": {category:
        {"n", metric...}}}}, "comparisons": {"<mode> - <baseline>": {metric
        differences, "p50_ms", "per_category", "recall@10_up",
        "recall@10_down"}}, "modes_chunks_only": {mode: {metric}}, "splits":
        {"dev" | "held_out": {"seed", "ids", "modes"}}, "questions": [{"id",
        "category", "n_gold", "first_gold_rank": {mode: rank or None},
        "automatic": "<mode ran>: <reason>"}], "settings", "machine"}``.
        Metrics are means in [0, 1], higher is better; ``modes`` counts a
        summary hit as the chunks it covers (see the module docstring).

    Raises:
        NotFound: a document of the set is not in ``docs_dir``.
        InvalidInput: a malformed question set, or a question whose gold
            phrases pick out no chunk (see
            :func:`~tribal_memory.bench.documents_data.gold_chunks`).
    """
    questions = question_set or load_questions()
    docs_dir = docs_dir or DEFAULT_DOCS_DIR
    missing = [d for d in questions.documents if not (docs_dir / d).is_file()]
    if missing:
        raise NotFound(
            f"{len(missing)} document(s) of {questions.name} not in {docs_dir} (first: "
            f"{missing[0]}); install them with `apt-get install python3.11-doc` or pass --docs-dir"
        )
    emit = log or stderr_line
    overrides = settings_overrides or {}
    model = embedder or FastEmbedEmbedder(Settings(**overrides).embedding_model)
    with tempfile.TemporaryDirectory(prefix="tribal-bench-docs-") as tmp:
        settings = Settings(data_dir=Path(tmp), **overrides)
        with MemoryService(settings, embedder=model) as service:
            ingest_s, ingest_cpu_s = _ingest(service, docs_dir, questions.documents, emit)
            chunks = _stored_chunks(service, questions.documents)
            gold = gold_chunks(questions.questions, chunks)
            emit(f"asking {len(questions.questions)} questions in {len(modes)} modes")
            rows, chunk_rows, per_question = ask(service, questions.questions, gold, modes)
            n_summaries = len(_covers(service))
    categories = [q.category for q in questions.questions]
    summaries: dict[str, Any] = summarise(rows, questions.questions)
    halves = split_halves(questions.questions)
    report: dict[str, Any] = {
        "dataset": questions.name,
        "source": questions.source,
        "docs_dir": str(docs_dir),
        "n_documents": len(questions.documents),
        "n_chunks": sum(len(c) for c in chunks.values()),
        "n_questions": len(questions.questions),
        "questions_per_category": {c: categories.count(c) for c in sorted(set(categories))},
        "depth": DEPTH,
        "n_summaries": n_summaries,
        "ingest_s": round(ingest_s, 1),
        "ingest_cpu_s": round(ingest_cpu_s, 1),
        "modes": summaries,
        "modes_chunks_only": {
            mode: {m: figures[m] for m in METRICS}
            for mode, figures in summarise(chunk_rows, questions.questions).items()
        },
        "splits": {
            name: {
                "seed": SPLIT_SEED,
                "ids": sorted(ids),
                "modes": summarise(rows, questions.questions, ids),
            }
            for name, ids in halves.items()
        },
        "comparisons": {
            f"{mode} - {baseline}": _compare(rows, summaries, mode, baseline)
            for mode, baseline in COMPARISONS
            if mode in summaries and baseline in summaries
        },
        "questions": per_question,
        "settings": {
            "embedding_model": model.model_id,
            "chunk_tokens": settings.chunk_tokens,
            "chunk_overlap_tokens": settings.chunk_overlap_tokens,
            "vector_weight": settings.vector_weight,
            "graph_expansion_weight": settings.graph_expansion_weight,
            "summaries": settings.summaries,
            "candidate_pool": settings.candidate_pool,
        },
        "machine": machine_line(),
    }
    write_report(report, out)
    return report

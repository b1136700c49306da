"""In-process harness for the learned search after feedback (issue 14), faster than ``bench perf``.

``build`` makes the store ``bench perf``'s after-feedback phase leaves (the
generated corpus, imported; then 1,000 questions x 3 rounds of search with
feedback, the agent using the hits that answer) in ``--store``, without a
server. ``time`` copies that store to a temp dir and, in one process, times
the three searches the phase times (plain ``learned: []``, the default
learned variant, and a learned search right after a feedback) on the same
300 never-fed questions, interleaving the kinds so load on the machine hits
them alike; it prints p50/p95 per kind and the ratios to plain, and with
``--answers FILE`` writes every answer (ids and scores; the learned layer's
clock frozen, so that weights decay alike) so two versions of the code can
be checked for identical rankings (``compare``; run both with the same
``PYTHONHASHSEED``: the anchor match's float sum follows string hashing).
``--profile P`` runs the learned and the after-a-feedback searches under
cProfile and writes ``P.learned.txt`` and ``P.interleaved.txt``.

    python benchmarks/after_feedback.py build --store /tmp/store-14-10k --size 10000
    python benchmarks/after_feedback.py time --store /tmp/store-14-10k --answers a.json
    python benchmarks/after_feedback.py compare a.json b.json
    python benchmarks/after_feedback.py gold --store /tmp/store-14-10k a.json b.json

``gold`` prints, for each answer file, the share of the timed questions
whose generating facts are in the top 10 (hit@10, recall@10), per kind:
whether answers that differ are better or worse.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tribal_memory.base.config import Settings
from tribal_memory.base.results import LearnedParts, SearchResult
from tribal_memory.bench.metrics import percentile
from tribal_memory.bench.perf import default_cache_dir
from tribal_memory.bench.perf_corpus import cached_embeddings, generate, questions
from tribal_memory.bench.perf_feedback import answers_of
from tribal_memory.bench.perf_http import import_body
from tribal_memory.embeddings.fastembed import FastEmbedEmbedder
from tribal_memory.service.memory_service import MemoryService
from tribal_memory.store import open_existing

K = 10
ROUNDS = 3
TIMED = 300


def _embedder() -> FastEmbedEmbedder:
    defaults = Settings()
    return FastEmbedEmbedder(
        threads=defaults.embedding_threads, query_threads=defaults.embedding_query_threads
    )


def _split(size: int, searches: int, seed: int) -> tuple[list[str], list[str]]:
    facts = generate(size, seed)
    pool = questions(facts, searches // ROUNDS + TIMED, seed + 2)
    return pool[:TIMED], pool[TIMED:]


def _search_and_report(service: MemoryService, query: str, gold: set[str]) -> SearchResult:
    result = service.recall_with_feedback(query, k=K)
    used = [h.memory.memory_id for h in result.hits if h.memory.content in gold]
    assert result.retrieval_id is not None
    service.record_usage_feedback(result.retrieval_id, used)
    return result


def build(store: Path, size: int, searches: int, seed: int) -> None:
    """Fill ``store`` with the corpus and replay ``searches`` searches with feedback."""
    if store.exists():
        shutil.rmtree(store)
    embedder = _embedder()
    facts = generate(size, seed)
    vectors, _ = cached_embeddings(facts, embedder, default_cache_dir())
    answers = answers_of(facts)
    _, fed = _split(size, searches, seed)
    started = time.perf_counter()
    with MemoryService(Settings(data_dir=store), embedder=embedder) as service:
        for start in range(0, size, 2000):
            service.import_jsonl(
                import_body(facts[start : start + 2000], vectors[start : start + 2000], embedder)
            )
        print(f"imported {size} in {time.perf_counter() - started:.0f} s", flush=True)
        for round_ in range(ROUNDS):
            for query in fed:
                _search_and_report(service, query, answers.get(query, set()))
            print(f"round {round_ + 1}: {time.perf_counter() - started:.0f} s", flush=True)
        service.store.optimize()
    print(f"built {store} in {time.perf_counter() - started:.0f} s")


def _answer(result: SearchResult) -> list[list[Any]]:
    return [
        [h.memory.memory_id, round(h.score, 5), h.expanded_from, round(h.boost, 5), h.anchor_match]
        for h in result.hits
    ]


def _freeze_clock() -> None:
    """Make the learned layer's clock stand still, so runs at different times give equal answers.

    Feedback weights decay with wall time; answers of two code versions run
    minutes apart would differ in the fifth decimal for that reason alone.
    """
    from tribal_memory.learned import feedback, learner, query_cache
    from tribal_memory.retrieval import pipeline

    frozen = datetime(2026, 11, 25, 18, 0, tzinfo=UTC)
    for module in (feedback, learner, pipeline, query_cache):
        module.utcnow = lambda: frozen  # type: ignore[attr-defined]


def run_times(store: Path, size: int, searches: int, seed: int, profile: Path | None) -> dict:
    """Time plain, learned and after-a-feedback searches on a copy of ``store``."""
    timed, _ = _split(size, searches, seed)
    answers = answers_of(generate(size, seed))
    embedder = _embedder()
    times: dict[str, list[float]] = {"plain": [], "learned": [], "interleaved": []}
    found: dict[str, list[Any]] = {"plain": [], "learned": [], "interleaved": []}
    with tempfile.TemporaryDirectory(prefix="tribal-af-") as tmp:
        data = Path(tmp) / "data"
        shutil.copytree(store, data)
        with MemoryService(Settings(data_dir=data), embedder=embedder) as service:
            plain = LearnedParts.none()
            for query in timed[:30]:  # warm-up
                service.search(query, k=K, learned=plain)
                service.search(query, k=K)
            learned_profiler = cProfile.Profile() if profile is not None else None
            for query in timed:
                started = time.perf_counter()
                result = service.search(query, k=K, learned=plain)
                times["plain"].append((time.perf_counter() - started) * 1000)
                found["plain"].append(_answer(result))
                if learned_profiler is not None:
                    learned_profiler.enable()
                started = time.perf_counter()
                result = service.search(query, k=K)
                times["learned"].append((time.perf_counter() - started) * 1000)
                if learned_profiler is not None:
                    learned_profiler.disable()
                found["learned"].append(_answer(result))
            # Each search right after a feedback (the search of the previous one).
            _search_and_report(service, timed[-1], answers.get(timed[-1], set()))
            profiler = cProfile.Profile() if profile is not None else None
            for query in timed[:100]:
                if profiler is not None:
                    profiler.enable()
                started = time.perf_counter()
                result = service.recall_with_feedback(query, k=K)
                times["interleaved"].append((time.perf_counter() - started) * 1000)
                if profiler is not None:
                    profiler.disable()
                found["interleaved"].append(_answer(result))
                gold = answers.get(query, set())
                used = [h.memory.memory_id for h in result.hits if h.memory.content in gold]
                assert result.retrieval_id is not None
                service.record_usage_feedback(result.retrieval_id, used)
    if profile is not None and profiler is not None and learned_profiler is not None:
        for name, done in (("learned", learned_profiler), ("interleaved", profiler)):
            with profile.with_suffix(f".{name}.txt").open("w") as out:
                pstats.Stats(done, stream=out).sort_stats("cumulative").print_stats(80)
    plain_p50 = percentile(times["plain"], 50)
    figures: dict[str, Any] = {}
    for name, values in times.items():
        p50 = percentile(values, 50)
        figures[name] = {
            "p50_ms": round(p50, 2),
            "p95_ms": round(percentile(values, 95), 2),
            "vs_plain": round(p50 / plain_p50, 3),
        }
    figures["interleaved"]["vs_learned"] = round(
        percentile(times["interleaved"], 50) / percentile(times["learned"], 50), 3
    )
    return {"figures": figures, "answers": found}


def compare(first: Path, second: Path) -> int:
    """Print where two answer files differ; 0 when the rankings are identical."""
    a, b = json.loads(first.read_text()), json.loads(second.read_text())
    differ = 0
    for kind in ("plain", "learned", "interleaved"):
        for i, (x, y) in enumerate(zip(a[kind], b[kind], strict=True)):
            if x != y:
                differ += 1
                if differ <= 5:
                    print(f"{kind} #{i}:\n  {x}\n  {y}")
        print(f"{kind}: {len(a[kind])} answers compared")
    print("identical" if not differ else f"{differ} answers differ")
    return 1 if differ else 0


def gold(store: Path, size: int, searches: int, seed: int, files: list[Path]) -> None:
    """Print, per answer file and kind, how many of the timed questions' answers are in the top 10.

    The answer files hold memory ids; the store (the one ``time`` copied)
    gives their contents, which are matched against the facts each
    question was generated from (hit@10: any found; recall@10: the share).
    """
    timed, _ = _split(size, searches, seed)
    answers = answers_of(generate(size, seed))
    opened = open_existing(Settings(data_dir=store).lancedb_uri)  # no model loaded
    if opened is None:
        raise SystemExit(f"no store at {store}")
    try:
        content = {m.memory_id: m.content for batch, _ in opened.scan() for m in batch}
    finally:
        opened.close()
    for path in files:
        found = json.loads(path.read_text())
        for kind in ("plain", "learned", "interleaved"):
            n, hit, recall = 0, 0.0, 0.0
            for query, hits in zip(timed, found[kind], strict=False):
                wanted = answers.get(query)
                if not wanted:
                    continue
                got = sum(1 for h in hits if content.get(h[0]) in wanted)
                n, hit, recall = n + 1, hit + (got > 0), recall + got / len(wanted)
            print(f"{path.name} {kind}: n {n}, hit@10 {hit / n:.4f}, recall@10 {recall / n:.4f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("action", choices=["build", "time", "compare", "gold"])
    parser.add_argument("files", nargs="*", type=Path)
    parser.add_argument("--store", type=Path)
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--searches", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--answers", type=Path)
    parser.add_argument("--profile", type=Path)
    args = parser.parse_intermixed_args()
    if args.action == "compare":
        return compare(*args.files)
    if args.store is None:
        parser.error("--store is required")
    if args.action == "gold":
        gold(args.store, args.size, args.searches, args.seed, args.files)
        return 0
    if args.answers is not None:
        _freeze_clock()
    if args.action == "build":
        build(args.store, args.size, args.searches, args.seed)
        return 0
    report = run_times(args.store, args.size, args.searches, args.seed, args.profile)
    print(json.dumps(report["figures"], indent=1))
    if args.answers is not None:
        args.answers.write_text(json.dumps(report["answers"]) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Where a new question's search time goes: each stage of the retrieval pipeline, in-process.

Opens a data dir ``bench perf --keep-data`` kept (a copy: opening may fold
or compact), and asks ``--questions`` of the corpus's questions that no
search asked before, over the whole store and with the owner filters of
``bench perf`` (5% and 1% of the store). Each stage of
:class:`~tribal_memory.retrieval.pipeline.Retriever` is timed on the
service's own retriever (its methods wrapped on the instance), so the
figures are what :meth:`MemoryService.search` spends in each:

- ``read_state``: the learned tables' change counters and past queries;
- ``start``: the row count and BM25 started on the store's event loop, the
  query embedded meanwhile (one ONNX thread in the server's settings);
- ``signals``: the vector search started, learned evidence read;
- ``fuse``: waiting for both searches, then fusion and neighbour smoothing;
- ``rank``: the top ``k`` chosen and their memories read (one LanceDB take
  of the rows no earlier search read);
- ``calibrate``: calibrated scores.

Per filter: search p50 / p95 wall ms and CPU ms of the process (every
thread: ONNX Runtime and LanceDB's too), and each stage's p50 wall ms (the
stages run one after another on the calling thread, so their p50s add up
to about the search's). The query embedding alone is timed apart
(``embed_p50_ms``, one thread). Lower is better everywhere. No feedback is
given, so the learned parts have nothing to add (as for a new question).

    python benchmarks/search_stages.py /tmp/kept10k/data-10000 --size 10000 \\
        --out benchmarks/results/search-stages-10k.json
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tribal_memory import MemoryService, SearchFilters, Settings
from tribal_memory.bench.metrics import percentile
from tribal_memory.bench.perf_corpus import FILTER_OWNER, SMALL_OWNER, generate, questions
from tribal_memory.bench.report import copied_data_dir, load_average, report_header, write_report
from tribal_memory.embeddings.fastembed import FastEmbedEmbedder

STAGES = ("read_state", "start", "signals", "fuse", "rank", "calibrate")
"""The timed :class:`Retriever` stages, by method name without the underscore."""
FILTERS = {"all": None, "owner_5pct": FILTER_OWNER, "owner_1pct": SMALL_OWNER}
"""Label: the owner searched alone (None: the whole store)."""


def timed_stages(service: MemoryService) -> dict[str, list[float]]:
    """Wrap the service retriever's stages to record their wall ms; returns the records."""
    records: dict[str, list[float]] = {stage: [] for stage in STAGES}
    retriever = service.retriever
    for stage in STAGES:
        method = getattr(retriever, f"_{stage}")

        def wrapper(*args: Any, _method: Callable[..., Any] = method, _stage: str = stage) -> Any:
            started = time.perf_counter()
            try:
                return _method(*args)
            finally:
                records[_stage].append((time.perf_counter() - started) * 1000)

        setattr(retriever, f"_{stage}", wrapper)
    return records


def p50(values: list[float]) -> float:
    """The median, rounded to 0.01 (ms)."""
    return round(percentile(values, 50), 2)


def ask(
    service: MemoryService, asked: list[str], owner: str | None, records: dict[str, list[float]]
) -> dict[str, Any]:
    """Search each of ``asked`` once; the wall and CPU percentiles and each stage's p50."""
    filters = SearchFilters(owner=owner, include_shared=False) if owner else SearchFilters()
    service.search("a question to warm the filter's count up", k=10, filters=filters)
    for values in records.values():
        values.clear()
    wall: list[float] = []
    cpu: list[float] = []
    for query in asked:
        started, cpu_started = time.perf_counter(), time.process_time()
        service.search(query, k=10, filters=filters)
        wall.append((time.perf_counter() - started) * 1000)
        cpu.append((time.process_time() - cpu_started) * 1000)
    return {
        "searches": len(asked),
        "search_p50_ms": p50(wall),
        "search_p95_ms": round(percentile(wall, 95), 2),
        "cpu_p50_ms": p50(cpu),
        "stages_p50_ms": {stage: p50(values) for stage, values in records.items()},
    }


def embed_p50(asked: list[str]) -> float:
    """The query embedding alone, one ONNX thread, p50 ms."""
    embedder = FastEmbedEmbedder(threads=1, query_threads=1)
    embedder.embed(asked[0], query=True)
    times = []
    for query in asked:
        started = time.perf_counter()
        embedder.embed(query, query=True)
        times.append((time.perf_counter() - started) * 1000)
    return p50(times)


def main() -> None:
    """Parse the arguments, search on a copy of the data dir, write the JSON report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data_dir", type=Path, help="a data dir bench perf --keep-data kept")
    parser.add_argument("--size", type=int, required=True, help="its corpus size")
    parser.add_argument("--questions", type=int, default=300, help="questions per filter")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    facts = generate(args.size, 0)
    report: dict[str, Any] = {
        **report_header("search_stages", Path(__file__)),
        "memories": args.size,
        "units": "ms of wall time (cpu: of the process, every thread); lower is better",
    }
    with (
        copied_data_dir(args.data_dir) as data_dir,
        MemoryService(Settings(data_dir=data_dir)) as service,
    ):
        records = timed_stages(service)
        for label, owner in FILTERS.items():
            # Seed 11: not the questions bench perf asked (seed 0), so none is cached.
            asked = questions(facts, args.questions, 11, owner=owner)
            report[label] = ask(service, asked, owner, records)
            print(label, report[label], flush=True)
    report["embed_p50_ms"] = embed_p50(questions(facts, args.questions, 12))
    report["load_avg_1_5_15_at_end"] = load_average()
    report["command"] = (
        f"python benchmarks/search_stages.py {args.data_dir} --size {args.size} "
        f"--questions {args.questions} --out {args.out}"
    )
    write_report(report, args.out)


if __name__ == "__main__":
    main()

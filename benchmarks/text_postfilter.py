"""Owner-filtered search with BM25's filter applied first against after ranking, in-process.

On a copy of a data dir ``bench perf --keep-data`` kept, asks new questions
of ``bench perf``'s corpus with the owner filters a server sees: one owner
alone (5% of the store), the same owner with shared memories, and the 1%
owner. Questions alternate between the two ways a filtered BM25 search may
run (``lance_search.POSTFILTER_MIN_PASSING`` at its value, or never), so
both meet the same machine load. Per filter and way: the rows the filter
passes, the whole search's p50 / p95 ms, and the BM25 search's alone
(``start_text_search`` of the same question right after), wall time, lower
is better. Filters passing fewer than ``POSTFILTER_MIN_PASSING`` rows run
the same way in both columns. ``where`` and ``passing_rows`` are those of
the BM25-alone search; a search also leaves summaries out
(``kind NOT IN ('summary')``, which passes every row of this corpus).

    python benchmarks/text_postfilter.py /tmp/kept1m/data-1000000 --size 1000000 \\
        --out benchmarks/results/text-postfilter-1m.json
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from tribal_memory import MemoryService, SearchFilters, Settings
from tribal_memory.bench.metrics import percentile
from tribal_memory.bench.perf_corpus import FILTER_OWNER, SMALL_OWNER, generate, questions
from tribal_memory.bench.report import copied_data_dir, load_average, report_header, write_report
from tribal_memory.store import lance_search
from tribal_memory.store.lance_rows import filter_sql

FILTERS = {
    "owner_5pct": SearchFilters(owner=FILTER_OWNER, include_shared=False),
    "owner_5pct_and_shared": SearchFilters(owner=FILTER_OWNER),
    "owner_1pct": SearchFilters(owner=SMALL_OWNER, include_shared=False),
}
WAYS = {"filter_first": 10**12, "filter_after_ranking": lance_search.POSTFILTER_MIN_PASSING}
"""Way: the ``POSTFILTER_MIN_PASSING`` it runs with."""


def p50_p95(values: list[float]) -> list[float]:
    """[p50, p95] in ms, rounded to 0.01."""
    return [round(percentile(values, 50), 2), round(percentile(values, 95), 2)]


def compare(service: MemoryService, asked: list[str], filters: SearchFilters) -> dict[str, Any]:
    """Search each question once, alternating the ways; the percentiles per way."""
    service.search("a question to warm the filter's count up", k=10, filters=filters)
    searches: dict[str, list[float]] = {way: [] for way in WAYS}
    bm25: dict[str, list[float]] = {way: [] for way in WAYS}
    ways = list(WAYS)
    for i, query in enumerate(asked):
        way = ways[i % 2]
        lance_search.POSTFILTER_MIN_PASSING = WAYS[way]
        started = time.perf_counter()
        service.search(query, k=10, filters=filters)
        searches[way].append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        service.store.start_text_search(query, filters, service.settings.candidate_pool).result()
        bm25[way].append((time.perf_counter() - started) * 1000)
    lance_search.POSTFILTER_MIN_PASSING = WAYS["filter_after_ranking"]
    passing = service.store.start_count(filters).result()
    return {
        "where": filter_sql(filters),
        "passing_rows": passing,
        **{
            way: {
                "search_p50_p95_ms": p50_p95(searches[way]),
                "bm25_p50_p95_ms": p50_p95(bm25[way]),
            }
            for way in WAYS
        },
    }


def main() -> None:
    """Parse the arguments, compare on a copy of the data dir, write the JSON report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data_dir", type=Path, help="a data dir bench perf --keep-data kept")
    parser.add_argument("--size", type=int, required=True, help="its corpus size")
    parser.add_argument("--questions", type=int, default=400, help="questions per filter")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    facts = generate(args.size, 0)
    report: dict[str, Any] = {
        **report_header("text_postfilter", Path(__file__)),
        "memories": args.size,
        "postfilter_min_passing": lance_search.POSTFILTER_MIN_PASSING,
        "postfilter_max_rows": lance_search.POSTFILTER_MAX_ROWS,
        "units": "ms of wall time, lower is better; questions alternate between the ways",
    }
    with (
        copied_data_dir(args.data_dir) as data_dir,
        MemoryService(Settings(data_dir=data_dir)) as service,
    ):
        for seed, (label, filters) in enumerate(FILTERS.items(), 21):
            # Not the questions bench perf asked (seed 0): none is cached.
            asked = questions(facts, args.questions, seed, owner=filters.owner)
            report[label] = compare(service, asked, filters)
            print(label, report[label], flush=True)
    report["load_avg_1_5_15_at_end"] = load_average()
    report["command"] = (
        f"python benchmarks/text_postfilter.py {args.data_dir} --size {args.size} "
        f"--questions {args.questions} --out {args.out}"
    )
    write_report(report, args.out)


if __name__ == "__main__":
    main()

"""``tribal-memory bench perf`` at a tiny size: the report has every field, sanely typed.

No timing is asserted: figures on a shared machine say nothing about correctness.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from tribal_memory.bench.perf_baseline import PlainBaseline
from tribal_memory.bench.perf_corpus import (
    FILTER_OWNER,
    SMALL_OWNER,
    cached_embeddings,
    generate,
    questions,
)
from tribal_memory.embeddings.base import Embedder, Vector
from tribal_memory.embeddings.fastembed import FastEmbedEmbedder
from tribal_memory.interfaces.cli import app

SIZE_KEYS = (
    "search_p50_ms",
    "search_p95_ms",
    "filtered_p50_ms",
    "cache_hit_p50_ms",
    "get_p50_ms",
    "capture_per_s",
    "embed_per_s",
    "capture_no_near_duplicates_per_s",
    "capture_no_near_duplicates_embed_per_s",
    "ann_recall_at_10",
    "ann_recall_at_10_filtered",
    "filtered_1pct_p50_ms",
    "ann_recall_at_10_filtered_1pct",
    "ann_p50_ms",
    "ann_p50_ms_filtered_1pct",
    "rss_mb",
    "baseline_search_p50_ms",
    "query_embed_p50_ms",
    "capture_vs_embed",
    "search_vs_baseline_p50",
    "rss_peak_mb",
    "index_cache_mb",
    "after_feedback_search_p50_ms",
    "after_feedback_learned_p50_ms",
    "after_feedback_interleaved_p50_ms",
    "cpu_ms_per_search",
    "query_embed_cpu_ms",
    "after_feedback_fragments",
    "data_dir_mb",
    "data_dir_end_mb",
    "data_dir_peak_mb",
    "bytes_per_memory",
    "memories_stored",
    "table_versions",
    "table_fragments",
)
BREAKDOWN = ("vectors", "text", "fts", "ivf", "scalar_indexes", "versions", "sqlite", "other")


def test_corpus_is_deterministic_distinct_and_five_percent_per_owner() -> None:
    facts = generate(400, seed=3)
    assert facts == generate(400, seed=3)
    assert facts != generate(400, seed=4)
    assert len({f.content for f in facts}) == 400
    assert sum(f.owner == FILTER_OWNER for f in facts) == 20  # 5%
    assert sum(f.owner == SMALL_OWNER for f in facts) == 4  # 1%
    extra = generate(50, seed=4, exclude=frozenset(f.content for f in facts))
    assert not {f.content for f in extra} & {f.content for f in facts}
    owned = questions(facts, 10, seed=3, owner=FILTER_OWNER)
    assert owned and len(owned) == len(set(owned))


def test_embedding_cache_is_reused_and_keyed_by_content(
    tmp_path: Path, embedder: FastEmbedEmbedder
) -> None:
    facts = generate(40, seed=1)
    first, from_cache = cached_embeddings(facts, embedder, tmp_path)
    assert not from_cache and first.shape == (40, embedder.dim)
    again, from_cache = cached_embeddings(facts, embedder, tmp_path)
    assert from_cache and np.array_equal(first, again)
    _, from_cache = cached_embeddings(generate(40, seed=2), embedder, tmp_path)
    assert not from_cache


class _Counting(Embedder):
    """The real model, counting the texts it embeds."""

    def __init__(self, model: FastEmbedEmbedder) -> None:
        self.model, self.model_id, self.dim, self.texts = model, model.model_id, model.dim, 0

    def embed_batch(self, texts: Sequence[str], *, query: bool = False) -> Vector:
        self.texts += len(texts)
        return self.model.embed_batch(texts, query=query)


def test_a_longer_corpus_embeds_only_the_chunks_not_cached(
    tmp_path: Path, embedder: FastEmbedEmbedder
) -> None:
    facts = generate(50, seed=1)
    counting = _Counting(embedder)
    first, _ = cached_embeddings(facts[:30], counting, tmp_path, chunk=10)
    assert counting.texts == 30
    longer, from_cache = cached_embeddings(facts, counting, tmp_path, chunk=10)
    assert not from_cache and counting.texts == 50  # the first three chunks were read
    assert np.array_equal(longer[:30], first)
    assert np.allclose(longer, embedder.embed_batch([f.content for f in facts]), atol=1e-5)


def test_plain_baseline_finds_the_fact_a_question_was_made_from(
    embedder: FastEmbedEmbedder,
) -> None:
    facts = generate(200, seed=5)
    vectors = embedder.embed_batch([f.content for f in facts])
    baseline = PlainBaseline([f.content for f in facts], vectors, embedder)
    found = sum(i in baseline.search(f.question, 10) for i, f in enumerate(facts[:20]))
    assert found >= 10  # lexical + dense over the fact's own words; not a quality target


def test_concurrent_size_must_be_one_of_the_sizes(tmp_path: Path) -> None:
    args = ["bench", "perf", "--sizes", "300,600", "--concurrent-size", "1000"]
    result = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "perf.json")])
    assert result.exit_code != 0
    assert "--concurrent-size 1000 is not one of --sizes [300, 600]" in result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "perf.json").exists()


@pytest.mark.slow
def test_bench_perf_writes_every_figure(tmp_path: Path) -> None:
    out = tmp_path / "perf.json"
    profile = tmp_path / "profile.txt"
    args = [
        "bench",
        "perf",
        "--sizes",
        "300",
        "--samples",
        "8",
        "--warmup",
        "2",
        "--capture-n",
        "40",
        "--clients",
        "4",
        "--locust-s",
        "3",
        "--feedback-searches",
        "60",
        "--cache-dir",
        str(tmp_path / "cache"),
        "--out",
        str(out),
        "--profile",
        str(profile),
        "--keep-data",
        str(tmp_path / "kept"),
        "--json",
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert json.loads(result.stdout.strip().splitlines()[-1]) == report

    machine = report["machine"]
    assert isinstance(machine["cores"], int) and machine["cores"] >= 1
    assert isinstance(machine["cpu"], str) and isinstance(machine["python"], str)
    assert len(machine["load_avg_1_5_15_at_start"]) == 3

    figures = report["sizes"]["300"]
    for key in SIZE_KEYS:
        assert isinstance(figures[key], int | float) and figures[key] > 0, key
    assert figures["embeddings_from_cache"] is False
    assert figures["ann_index"] is False and figures["ann_segments"] is None  # 300 rows: exact
    assert figures["ann_segments_at_search"] == 0
    assert figures["ann_probes"] is None
    assert [point[0] for point in figures["rss_while_loading_mb"]] == [300]
    # 20 questions x 3 rounds of search + feedback; health read from /v1/stats after them.
    assert figures["after_feedback_searches"] == 60
    assert figures["after_feedback_small_fragments"] <= figures["after_feedback_fragments"]
    assert figures["after_feedback_unindexed_rows"] >= 0 and figures["after_feedback_versions"] >= 1
    # The data dir after one optimize(), per memory stored (corpus and captures), by part.
    parts = figures["bytes_per_memory_breakdown"]
    assert tuple(parts) == BREAKDOWN
    assert abs(sum(parts.values()) - figures["bytes_per_memory"]) <= len(parts)
    assert parts["vectors"] == 384 * 4 and parts["text"] > 0 and parts["sqlite"] > 0
    assert parts["ivf"] == 0  # under TRIBAL_ANN_INDEX_MIN_ROWS: exact search, no IVF index
    assert parts["fts"] > 0 and parts["scalar_indexes"] > 0 and parts["versions"] >= 0
    assert figures["memories_stored"] > 300
    assert figures["table_versions"] >= 1
    # --keep-data: the measured store is kept, and opens with every memory.
    from tribal_memory.store.lancedb import LanceMemoryStore

    kept = LanceMemoryStore.open_existing(str(tmp_path / "kept" / "data-300" / "lancedb"))
    assert kept is not None and len(kept.memory_ids()) == figures["memories_stored"]
    kept.close()

    concurrent = report["concurrent"]
    assert concurrent["clients"] == 4
    assert isinstance(concurrent["rps"], float) and concurrent["rps"] > 0
    assert isinstance(concurrent["p99_ms"], float) and concurrent["errors"] == 0
    assert concurrent["requests"] > 0
    # One sequential client in the same run, and an agent's mixed load reported apart.
    assert concurrent["memories"] == 300
    assert concurrent["sequential_rps"] > 0 and concurrent["sequential_errors"] == 0
    assert concurrent["vs_sequential"] == round(concurrent["rps"] / concurrent["sequential_rps"], 3)
    assert isinstance(concurrent["p50_ms"], float) and concurrent["p50_ms"] > 0
    mixed = concurrent["mixed"]
    assert mixed["requests"] > 0 and mixed["rps"] > 0 and mixed["errors"] == 0
    assert isinstance(mixed["p99_ms"], float)

    assert {t["name"] for t in report["targets"]} >= {
        "search p50 ms @300",
        "concurrent errors",
        "concurrent / sequential rps @300",
        "mixed load errors @300",
        "after_feedback_learned_p50_ms @300 (fresh search p50 x 1.2)",
    }
    assert all(isinstance(t["met"], bool) for t in report["targets"])
    shares = report["profile"]["share"]
    assert abs(sum(shares.values()) - 1) < 0.01
    assert "query embedding (ONNX, tokenizer)" in shares
    assert profile.read_text().strip()


def test_a_benchmark_server_imports_the_package_its_pythonpath_names(tmp_path: Path) -> None:
    """Not the working directory's: A/B runs from a checkout compare two codes, not one twice."""
    import subprocess
    import sys

    from tribal_memory.bench.server_process import child_env

    other = tmp_path / "other-checkout"
    (other / "tribal_memory").mkdir(parents=True)
    (other / "tribal_memory" / "__init__.py").write_text("", encoding="utf-8")
    repo = Path(__file__).resolve().parent.parent  # holds a tribal_memory package too
    found = subprocess.run(
        [sys.executable, "-c", "import tribal_memory; print(tribal_memory.__file__)"],
        env=child_env({"PYTHONPATH": str(other)}),
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert Path(found.stdout.strip()).resolve().parent.parent == other.resolve()

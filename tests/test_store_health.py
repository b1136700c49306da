"""The memory table stays compact under the writes agents make (issue 14), and says so."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from typer.testing import CliRunner

from tribal_memory.base.config import Settings
from tribal_memory.base.models import MemoryInput, MemoryPatch, SearchFilters
from tribal_memory.embeddings.fastembed import FastEmbedEmbedder
from tribal_memory.interfaces import cli
from tribal_memory.service.memory_service import MemoryService

FACTS = [f"Fact {i}: the locker of desk {i} opens with code {i * 7919 % 10000}" for i in range(60)]
MINE = SearchFilters(owner="ana")


def test_feedback_rounds_and_updates_leave_few_small_fragments(
    tmp_path: Path, embedder: FastEmbedEmbedder
) -> None:
    settings = Settings(data_dir=tmp_path / "d", optimize_small_fragments=16)
    with MemoryService(settings, embedder=embedder) as service:
        ids = [
            r.memory.memory_id
            for r in service.capture_batch([MemoryInput(f, owner="ana") for f in FACTS])
        ]
        service.optimize()
        for round_index in range(5):  # 300 searches with feedback: anchors form
            for i in range(60):
                result = service.recall_with_feedback(
                    f"what opens the locker of desk {i}?", k=5, filters=MINE
                )
                assert result.retrieval_id is not None
                shown = [h.memory.memory_id for h in result.hits if h.memory.memory_id == ids[i]]
                service.record_usage_feedback(result.retrieval_id, shown)
            # Each update rewrites one row into a fragment of its own.
            for i in range(round_index * 12, round_index * 12 + 12):
                service.update(ids[i], MemoryPatch(tags=(f"round-{round_index}",)))
        assert service.learner.anchors.active_count() >= 30
        assert service.store.wait_for_maintenance(timeout_s=60)
        health = service.table_health()
        stats = service.stats()
    # 60 single-row updates and 300 feedbacks: the fragments an update leaves are
    # compacted once 16 pile up (checked every 50 writes), feedback leaves none;
    # without that check the 60 updates would leave 60 small fragments.
    assert health["small_fragments"] < 32, health
    assert health["fragments"] < 33, health
    assert health["unindexed_rows"] <= 60, health
    assert (stats.fragments, stats.small_fragments) == (
        health["fragments"],
        health["small_fragments"],
    )


def test_optimize_command_compacts_and_stats_report_the_table(
    tmp_path: Path, embedder: FastEmbedEmbedder
) -> None:
    data_dir = tmp_path / "d"
    with MemoryService(Settings(data_dir=data_dir), embedder=embedder) as service:
        ids = [
            r.memory.memory_id
            for r in service.capture_batch([MemoryInput(f, owner="ana") for f in FACTS[:20]])
        ]
        for memory_id in ids[:10]:
            service.update(memory_id, MemoryPatch(tags=("moved",)))
        before = service.table_health()
    assert before["small_fragments"] >= 10  # one per update, none compacted yet
    runner = CliRunner()
    result = runner.invoke(cli.app, ["optimize", "--data-dir", str(data_dir), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output.strip().splitlines()[-1])
    assert report["before"]["small_fragments"] == before["small_fragments"]
    assert report["after"]["fragments"] == 1 and report["after"]["unindexed_rows"] == 0
    stats = runner.invoke(cli.app, ["stats", "--data-dir", str(data_dir), "--json"])
    figures = json.loads(stats.output.strip().splitlines()[-1])
    assert {"fragments", "small_fragments", "unindexed_rows", "versions"} <= set(figures)
    assert figures["fragments"] == 1


def test_captures_go_on_while_maintenance_runs_and_nothing_is_lost(
    tmp_path: Path, embedder: FastEmbedEmbedder
) -> None:
    # optimize() is due after every write, so each capture starts background maintenance.
    settings = Settings(data_dir=tmp_path / "d", optimize_every_rows=1, optimize_growth=1e-6)
    with MemoryService(settings, embedder=embedder) as service:
        service.capture_batch([MemoryInput(f, owner="ana") for f in FACTS[:20]])
        ids = [r.memory.memory_id for r in service.capture_batch([MemoryInput(FACTS[20], "ana")])]
        # Holding the lock a maintenance run holds stands for a run that takes long.
        store = service.store
        with store._rewrite_lock:
            done = threading.Event()

            def capture() -> None:
                batch = [MemoryInput(f, owner="ana") for f in FACTS[21:40]]
                ids.extend(r.memory.memory_id for r in service.capture_batch(batch))
                done.set()

            writer = threading.Thread(target=capture)
            writer.start()
            assert done.wait(timeout=60), "a capture waited for maintenance"
            assert service.search("locker of desk 33", k=3, filters=MINE).hits
        writer.join()
        assert store.wait_for_maintenance(timeout_s=60)
        service.optimize()  # folds in what the last background run started before
        health = service.table_health()
        assert len(service.get_many(ids)) == 20
        hits = service.search(FACTS[33], k=1, filters=MINE, learned=None).hits
    assert hits and hits[0].memory.content == FACTS[33]
    # LanceDB compacts indexed and not yet indexed rows apart: one run may leave two fragments.
    assert health["unindexed_rows"] == 0 and health["fragments"] <= 2, health


def test_rows_below_the_growth_rule_are_indexed_once_the_interval_passed(
    tmp_path: Path, embedder: FastEmbedEmbedder
) -> None:
    # 20 new rows in a 60-row table: under the growth rule (100%) they would wait.
    for interval_s, indexed in ((3600.0, False), (0.0, True)):
        settings = Settings(
            data_dir=tmp_path / str(interval_s),
            optimize_every_rows=16,
            optimize_growth=1.0,
            optimize_interval_s=interval_s,
            keep_versions_s=0,
        )
        with MemoryService(settings, embedder=embedder) as service:
            # The prune a second after an optimize() folds in rows written meanwhile:
            # write after it.
            _optimized_40_then_20_more(service, pause_s=2)
            if indexed:
                assert _indexed_within(service, seconds=60)
            else:
                time.sleep(2)
                assert service.store.wait_for_maintenance(timeout_s=60)
                assert service.table_health()["unindexed_rows"] == 20


def test_an_automatic_optimize_waits_until_the_last_ones_versions_are_gone(
    tmp_path: Path, embedder: FastEmbedEmbedder
) -> None:
    # Every write makes optimize() due; each run's old files stay for keep_versions_s.
    settings = Settings(
        data_dir=tmp_path / "d",
        optimize_every_rows=1,
        optimize_growth=1e-6,
        optimize_interval_s=0.0,
        keep_versions_s=5,
    )
    with MemoryService(settings, embedder=embedder) as service:
        _optimized_40_then_20_more(service)
        # Due, but the run the optimize() above superseded is still on disk: no second
        # rewrite beside it (a bulk load held several at once, 5.4x the store at 100k).
        assert service.store.wait_for_maintenance(timeout_s=0)
        assert service.table_health()["unindexed_rows"] == 20
        # Once those versions are removed, the run starts with no further write.
        assert _indexed_within(service, seconds=60)
        health = service.table_health()
        hits = service.search(FACTS[45], k=1, filters=MINE, learned=None).hits
    assert hits and hits[0].memory.content == FACTS[45]
    assert health["versions"] <= 3, health


def test_rows_written_before_the_store_falls_quiet_are_indexed_after_the_interval(
    tmp_path: Path, embedder: FastEmbedEmbedder
) -> None:
    settings = Settings(
        data_dir=tmp_path / "d",
        optimize_every_rows=16,
        optimize_growth=1.0,
        optimize_interval_s=3.0,
    )
    with MemoryService(settings, embedder=embedder) as service:
        _optimized_40_then_20_more(service)
        # Within the interval the 20 rows wait; no write follows, the timer's check indexes them.
        assert _indexed_within(service, seconds=60)


def test_a_few_rows_written_before_the_store_falls_quiet_are_indexed_too(
    tmp_path: Path, embedder: FastEmbedEmbedder
) -> None:
    # 20 rows, far under optimize_every_rows: only the quiet time can fold them in.
    settings = Settings(data_dir=tmp_path / "d", optimize_every_rows=1000, optimize_interval_s=1.0)
    with MemoryService(settings, embedder=embedder) as service:
        _optimized_40_then_20_more(service)
        assert service.table_health()["unindexed_rows"] == 20
        assert _indexed_within(service, seconds=60)
        hits = service.search(FACTS[45], k=1, filters=MINE, learned=None).hits
    assert hits and hits[0].memory.content == FACTS[45]


def _optimized_40_then_20_more(service: MemoryService, *, pause_s: float = 0.0) -> None:
    """Capture 40 facts, ``optimize()``, wait ``pause_s``, then capture the other 20."""
    service.capture_batch([MemoryInput(f, owner="ana") for f in FACTS[:40]])
    service.optimize()
    time.sleep(pause_s)
    service.capture_batch([MemoryInput(f, owner="ana") for f in FACTS[40:]])


def _indexed_within(service: MemoryService, *, seconds: float) -> bool:
    """Whether every row is inside the indexes within ``seconds``, no write made meanwhile."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        time.sleep(0.25)
        service.store.wait_for_maintenance(timeout_s=60)
        if service.table_health()["unindexed_rows"] == 0:
            return True
    return False


def test_stats_report_the_index_data_searches_keep_in_memory(
    tmp_path: Path, embedder: FastEmbedEmbedder
) -> None:
    with MemoryService(Settings(data_dir=tmp_path / "d"), embedder=embedder) as service:
        service.capture_batch([MemoryInput(f, owner="ana") for f in FACTS])
        service.optimize()
        before = service.stats().cache_bytes
        for i in range(10):
            service.search(f"which code opens the locker of desk {i}?", k=5, filters=MINE)
        after = service.stats().cache_bytes
    # The searches read the full-text and scalar indexes, which the store keeps.
    assert after > before >= 0, (before, after)


def test_searches_fold_rows_outside_the_indexes_in_once_they_have_paid_for_it(
    tmp_path: Path, embedder: FastEmbedEmbedder
) -> None:
    # Neither the row, growth, interval nor quiet rule can fold the 1,000 new rows in:
    # only what scanning them costs the searches can (Upkeep.after_search).
    settings = Settings(
        data_dir=tmp_path / "d",
        optimize_every_rows=100_000,
        optimize_interval_s=3600.0,
        keep_versions_s=0,
    )
    more = [f"Note {i}: shelf {i} in the archive holds folder {i * 31 % 997}" for i in range(1000)]
    with MemoryService(settings, embedder=embedder) as service:
        _optimized_40_then_20_more(service)
        service.optimize()
        for start in (0, 500):
            service.capture_batch([MemoryInput(t, owner="ana") for t in more[start : start + 500]])
        assert service.store.wait_for_maintenance(timeout_s=60)
        waiting = service.table_health()["unindexed_rows"]
        assert waiting > 0  # no search yet: they wait
        # Each BM25 query reads all 1,000 (about 2 ms, UNINDEXED_ROW_SCAN_S a row): a fold is
        # due after about FOLD_MIN_S (or 4 runs' time) of that, some 500 searches, not at once.
        for i in range(10):
            service.search(f"which folder is on shelf {i}?", k=5, filters=MINE, mode="text")
        assert service.store.wait_for_maintenance(timeout_s=60)
        assert service.table_health()["unindexed_rows"] == waiting
        searched = 10
        while service.table_health()["unindexed_rows"] and searched < 6000:
            for _ in range(100):
                query = f"which folder is on shelf {searched % 1000}?"
                service.search(query, k=5, filters=MINE, mode="text")
                searched += 1
            assert service.store.wait_for_maintenance(timeout_s=60)
        health = service.table_health()
        hits = service.search("which folder is on shelf 417?", k=1, filters=MINE, mode="text").hits
    assert health["unindexed_rows"] == 0, (searched, health)
    assert hits and hits[0].memory.content == more[417]

"""The memory table's disk footprint: optimize() drops what only old versions read, and no more.

Real LanceDB in temp dirs. No size threshold is asserted (sizes belong to
``bench perf``): what is checked is which versions and files stay.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import lancedb
import numpy as np
from builders import stored_memory

from tribal_memory.base.models import Memory, SearchFilters
from tribal_memory.store.lance_footprint import data_file_formats, index_kind, table_footprint
from tribal_memory.store.lance_rows import FILE_FORMAT
from tribal_memory.store.lance_versions import cleanup_age, pin_name, stale_pins
from tribal_memory.store.lancedb import LanceMemoryStore

DIM = 16


def _memories(start: int, count: int) -> list[Memory]:
    now = datetime.now(UTC)
    return [
        stored_memory(f"m{i:05d}", f"memory {i} mentions the token w{i:05d}", created_at=now)
        for i in range(start, start + count)
    ]


def _unit(rows: int, seed: int) -> np.ndarray:
    vectors = np.random.default_rng(seed).normal(size=(rows, DIM)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def _load(store: LanceMemoryStore, batches: int, rows: int) -> np.ndarray:
    """``batches`` appends of ``rows`` rows, each followed by an optimize(); returns the vectors."""
    vectors = []
    for b in range(batches):
        batch = _unit(rows, seed=b)
        store.add(_memories(b * rows, rows), batch)
        store.optimize()
        vectors.append(batch)
    return np.concatenate(vectors)


def _ivf_dirs(uri: Path) -> int:
    return sum(1 for d in (uri / "memories.lance" / "_indices").iterdir() if index_kind(d) == "ivf")


def test_optimize_keeps_one_version_and_every_memory_stays_searchable(tmp_path: Path) -> None:
    uri = tmp_path / "db"
    # keep_versions_s=0: a version is removed as soon as it is superseded. The IVF index
    # is built at 200 rows and rebuilt as the table grows fourfold (at 800).
    store = LanceMemoryStore(str(uri), "m", DIM, keep_versions_s=0, ann_index_min_rows=200)
    vectors = _load(store, batches=6, rows=150)
    store.wait_for_maintenance()
    store.optimize()
    health = store.health()
    footprint = store.footprint()
    assert footprint is not None
    assert health["versions"] == 1
    assert footprint.versions == 0
    assert store.index_state() == {"fts": True, "ann": True}
    # The IVF index was rebuilt along the way; the dropped one left no files behind.
    assert _ivf_dirs(uri) == 1 and footprint.ivf > 0
    assert footprint.total == sum(p.stat().st_size for p in uri.rglob("*") if p.is_file())
    for i in range(0, 900, 37):
        found = store.vector_search(vectors[i], SearchFilters(), 1)
        assert found[0].memory.memory_id == f"m{i:05d}"
        texts = store.text_search(f"w{i:05d}", SearchFilters(), 1)
        assert [t.memory.memory_id for t in texts] == [f"m{i:05d}"]
    assert len(store.memory_ids()) == 900
    store.close()


def test_a_version_superseded_within_the_window_stays_readable(tmp_path: Path) -> None:
    uri = tmp_path / "db"
    store = LanceMemoryStore(str(uri), "m", DIM, keep_versions_s=3600)
    store.add(_memories(0, 50), _unit(50, seed=0))
    reader = lancedb.connect(str(uri)).open_table("memories")
    read_version = int(reader.version)
    for b in range(1, 4):  # new fragments, compacted with the first by each optimize()
        store.add(_memories(b * 50, 50), _unit(50, seed=b))
        store.optimize()
    footprint = store.footprint()
    assert footprint is not None and footprint.versions > 0
    assert store.health()["versions"] > 1
    # A reader still on the version it opened (another process, within its
    # read-consistency interval) reads every row of it.
    reader.checkout(read_version)
    assert reader.count_rows() == 50
    assert len(reader.search().limit(None).to_list()) == 50
    store.close()


def test_an_export_scan_survives_a_compaction_that_supersedes_its_version(
    tmp_path: Path,
) -> None:
    uri = tmp_path / "db"
    store = LanceMemoryStore(str(uri), "m", DIM, keep_versions_s=0)
    for b in range(4):  # four fragments: the scan below reads the first of them only
        store.add(_memories(b * 100, 100), _unit(100, seed=b))
    scan = store.scan(batch_size=64)
    first, _ = next(scan)
    store.add(_memories(400, 100), _unit(100, seed=9))
    store.optimize()  # compacts every fragment; the scan's version is superseded
    rest = [m.memory_id for batch, _ in scan for m in batch]
    assert sorted([m.memory_id for m in first] + rest) == [f"m{i:05d}" for i in range(400)]
    # The scan's pin is gone with it: the next optimize() removes that version.
    assert store.health()["versions"] > 1
    store.optimize()
    assert store.health()["versions"] == 1
    assert not lancedb.connect(str(uri)).open_table("memories").tags.list()
    store.close()


def test_reads_during_pruning_never_fail(tmp_path: Path) -> None:
    # keep_versions_s=1: every optimize() removes what was superseded a second before,
    # while other threads read. Listing the versions (stats) raced the removal of a
    # manifest about once in a hundred reads before it was retried.
    store = LanceMemoryStore(str(tmp_path / "db"), "m", DIM, keep_versions_s=1)
    _load(store, 1, 300)
    errors: list[BaseException] = []
    done = threading.Event()

    def read(call: object) -> None:
        while not done.is_set():
            try:
                call()  # type: ignore[operator]
            except Exception as exc:  # noqa: BLE001 - every failure is the finding
                errors.append(exc)

    query = _unit(1, seed=99)[0]
    readers = [
        threading.Thread(target=read, args=(call,))
        for call in (
            store.health,
            lambda: store.vector_search(query, SearchFilters(), 10),
            lambda: store.get(["m00001", "m00002"]),
        )
    ]
    for thread in readers:
        thread.start()
    try:
        for b in range(1, 60):
            store.add(_memories(b * 10 + 1000, 10), _unit(10, seed=b))
            store.optimize()
    finally:
        done.set()
        for thread in readers:
            thread.join()
    store.close()
    assert errors == []


def test_a_quiet_store_drops_what_its_last_optimize_superseded(tmp_path: Path) -> None:
    store = LanceMemoryStore(str(tmp_path / "db"), "m", DIM, keep_versions_s=1)
    for b in range(3):
        store.add(_memories(b * 50, 50), _unit(50, seed=b))
    store.optimize()  # compacts: the versions before it stay readable for 1 s
    assert store.health()["versions"] > 1
    deadline = time.monotonic() + 30
    while store.health()["versions"] > 1 and time.monotonic() < deadline:
        time.sleep(0.2)  # no write and no optimize(): the store's own timer removes them
    assert store.health()["versions"] == 1
    assert len(store.memory_ids()) == 150
    store.close()


def test_rows_written_before_the_prune_leave_no_version_behind(tmp_path: Path) -> None:
    # The prune after an optimize() folds in rows written since, and LanceDB commits
    # that after removing the old versions: the version before it stayed for good
    # (a million-memory store rested at 7.6 GB against 3.0 after one optimize()).
    store = LanceMemoryStore(str(tmp_path / "db"), "m", DIM, keep_versions_s=1)
    for b in range(3):
        store.add(_memories(b * 50, 50), _unit(50, seed=b))
    store.optimize()
    store.add(_memories(1000, 10), _unit(10, seed=9))  # before the prune, which folds it in
    deadline = time.monotonic() + 30
    health = store.health()
    # Wait for both: a slow machine can reach one version before the fold of the 10 rows.
    while (health["versions"], health["unindexed_rows"]) != (1, 0) and time.monotonic() < deadline:
        time.sleep(0.2)
        health = store.health()
    assert (health["versions"], health["unindexed_rows"]) == (1, 0)
    assert len(store.memory_ids()) == 160
    store.close()


def test_a_backup_copy_leaves_no_pin(tmp_path: Path) -> None:
    store = LanceMemoryStore(str(tmp_path / "db"), "m", DIM, keep_versions_s=0)
    store.add(_memories(0, 30), _unit(30, seed=0))
    copied = store.copy_to(str(tmp_path / "copy"))
    assert len(copied.memory_ids) == 30
    assert not lancedb.connect(str(tmp_path / "db")).open_table("memories").tags.list()
    store.close()


def test_cleanup_age_keeps_the_version_current_at_the_window_start() -> None:
    # Versions created at t=0, 10, 20, 95; now 100; window 30 s: the version of t=20
    # was current at t=70, so it stays (its successor came 5 s ago); 0 and 10 go.
    age = cleanup_age([0.0, 10.0, 20.0, 95.0], now_s=100.0, keep_s=30.0)
    assert age is not None
    cut = 100.0 - age.total_seconds()
    assert 10.0 < cut <= 20.0
    # Nothing superseded before the window began: nothing goes.
    assert cleanup_age([80.0, 95.0], now_s=100.0, keep_s=30.0) is None
    assert cleanup_age([50.0], now_s=100.0, keep_s=0.0) is None
    # keep_s 0 right after a commit: LanceDB warns on an age of 0 ms, so it is 1 ms at least.
    just = cleanup_age([50.0, 99.9999], now_s=100.0, keep_s=0.0)
    assert just is not None and just.total_seconds() >= 0.001
    # A pinned version (a backup reading it) stays, with every later one.
    pinned = cleanup_age([0.0, 10.0, 20.0, 95.0], now_s=100.0, keep_s=0.0, pinned_s=10.0)
    assert pinned is None or 100.0 - pinned.total_seconds() <= 10.0


def test_only_old_pins_are_stale() -> None:
    old, fresh = pin_name(now_s=1_000.0), pin_name(now_s=90_000.0)
    assert stale_pins([old, fresh, "release-1"], now_s=90_500.0) == [old]


def test_footprint_of_a_table_without_index_or_rows(tmp_path: Path) -> None:
    store = LanceMemoryStore(str(tmp_path / "db"), "m", DIM)
    footprint = table_footprint(tmp_path / "db" / "memories.lance", 0, DIM)
    assert footprint.vectors == 0 and footprint.ivf == 0
    assert footprint.total == sum(
        p.stat().st_size for p in (tmp_path / "db").rglob("*") if p.is_file()
    )
    store.close()


def test_a_new_store_and_its_backup_write_data_files_in_the_chosen_file_format(
    tmp_path: Path,
) -> None:
    # Every memory a fact with no metadata: in 2.2 those columns are constant pages,
    # which a take of a few rows decodes whole (FILE_FORMAT's docstring).
    uri = tmp_path / "db"
    store = LanceMemoryStore(str(uri), "m", DIM, keep_versions_s=0)
    _load(store, batches=3, rows=50)
    store.wait_for_maintenance()
    assert data_file_formats(uri / "memories.lance") == {FILE_FORMAT}
    copied = store.copy_to(str(tmp_path / "backup"))  # what a backup writes
    assert len(copied.memory_ids) == 150
    assert data_file_formats(tmp_path / "backup" / "memories.lance") == {FILE_FORMAT}
    found = store.get(["m00007", "m00120"])
    assert [found[i].kind for i in ("m00007", "m00120")] == ["fact", "fact"]
    assert found["m00007"].metadata == {}
    store.close()

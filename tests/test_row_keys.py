"""The keys a search reads of its candidates, from one scan of the table (issue 30).

What a user relies on: a key read from the key table (fusion's memory id,
owner, document and position of each candidate) is the key LanceDB holds
for that row, for rows written after the scan, after a compaction that
moves every row, and after a delete.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pyarrow as pa
from builders import stored_memory

from tribal_memory.base.models import Memory
from tribal_memory.store import lance_keys
from tribal_memory.store.lance_keys import KEY_COLUMNS, KeyTable
from tribal_memory.store.lance_rowcache import RowCache
from tribal_memory.store.lancedb import LanceMemoryStore

DIM = 16


def _memories(start: int, count: int) -> list[Memory]:
    return [
        stored_memory(
            f"m{i:04d}",
            f"fact {i}",
            owner=f"owner-{i % 3}",
            doc_id=None if i % 4 == 0 else f"doc-{i // 10}",
            chunk_index=None if i % 4 == 0 else i % 10,
        )
        for i in range(start, start + count)
    ]


def _add(store: LanceMemoryStore, start: int, count: int) -> None:
    vectors = np.random.default_rng(start).normal(size=(count, DIM)).astype(np.float32)
    store.add(_memories(start, count), vectors)


def _stored_keys(store: LanceMemoryStore) -> dict[int, tuple[object, ...]]:
    """Every row's key as LanceDB holds it now, by row id."""
    query = store._handle.table.query().select(list(KEY_COLUMNS)).with_row_id()
    table = store._loop.run("read", query.to_arrow())
    columns = [table.column(name).to_pylist() for name in KEY_COLUMNS]
    return dict(zip(table.column("_rowid").to_pylist(), zip(*columns, strict=True), strict=True))


def _keys(store: LanceMemoryStore, cache: RowCache, refs: list[int]) -> list[object]:
    return store._loop.run("read", cache.keys(refs))


def test_keys_from_the_key_table_are_the_stored_ones_through_writes(tmp_path: Path) -> None:
    store = LanceMemoryStore(str(tmp_path / "db"), "m", DIM)
    _add(store, 0, 120)
    scanned = RowCache(store._handle, store._loop)
    by_take = RowCache(store._handle, store._loop, max_table_rows=0)
    first = _stored_keys(store)
    assert _keys(store, scanned, list(first)) == list(first.values())
    _add(store, 1000, 30)  # rows the key table lacks
    store.delete(["m0001", "m0002"])
    store.optimize()  # a compaction: every row moves to a new row id
    _add(store, 2000, 5)
    now = _stored_keys(store)
    assert len(now) == 153
    for _ in range(2):  # what the key table lacks or moved is read by row id, then kept
        assert _keys(store, scanned, list(now)) == list(now.values())
        assert _keys(store, by_take, list(now)) == list(now.values())
    store.close()


def test_a_row_the_key_table_lacks_and_the_table_lost_has_no_key(tmp_path: Path) -> None:
    store = LanceMemoryStore(str(tmp_path / "db"), "m", DIM)
    _add(store, 0, 20)
    cache = RowCache(store._handle, store._loop)
    assert len([k for k in _keys(store, cache, list(_stored_keys(store))) if k]) == 20
    assert _keys(store, cache, [2**40 + 7]) == [None]
    store.close()


def test_a_key_table_finds_row_ids_in_any_order() -> None:
    scanned = pa.table(
        {
            "memory_id": ["c", "a", "b"],
            "owner": ["o", "o", "p"],
            "doc_id": [None, "d", "d"],
            "chunk_index": [None, 0, 1],
            "_rowid": pa.array([30, 10, 20], type=pa.uint64()),
        }
    )
    table = KeyTable.read_from(scanned)
    assert table.find([20, 99, 30, 10]) == {
        20: ("b", "p", "d", 1),
        30: ("c", "o", None, None),
        10: ("a", "o", "d", 0),
    }
    assert table.find([]) == {}


def _memories_read(store: LanceMemoryStore, cache: RowCache) -> dict[str, Memory]:
    """What ``cache`` gives a search for every stored row (its keys read first, as a search)."""
    keys = _stored_keys(store)
    _keys(store, cache, list(keys))
    return cache.memories([(ref, key[0]) for ref, key in keys.items()])


def test_hits_read_from_the_whole_rows_are_the_stored_memories_through_writes(
    tmp_path: Path,
) -> None:
    store = LanceMemoryStore(str(tmp_path / "db"), "m", DIM)
    _add(store, 0, 60)
    whole = RowCache(store._handle, store._loop, max_table_bytes=2**20, max_memories=0)
    keys_only = RowCache(store._handle, store._loop, max_memories=0)
    stored = store.get([f"m{i:04d}" for i in range(60)])
    taken: list[object] = []
    read_by_take = whole._read
    whole._read = lambda *args: taken.append(args) or read_by_take(*args)  # type: ignore[method-assign]
    assert len(stored) == 60 and _memories_read(store, whole) == stored
    assert whole._key_table is not None and whole._key_table.whole
    assert not taken  # every hit came from the whole rows
    assert keys_only._key_table is None or not keys_only._key_table.whole
    _add(store, 1000, 10)  # rows the whole rows lack
    edited = dataclasses.replace(_memories(5, 1)[0], content="fact five, edited")
    store.replace(edited, None)
    store.delete(["m0001"])
    store.optimize()  # every row moves
    expected = store.get([key[0] for key in _stored_keys(store).values()])
    assert len(expected) == 69 and expected["m0005"].content == "fact five, edited"
    assert _memories_read(store, whole) == expected
    assert _memories_read(store, keys_only) == expected
    store.close()


def test_whole_rows_past_their_bound_leave_the_keys_alone(tmp_path: Path) -> None:
    store = LanceMemoryStore(str(tmp_path / "db"), "m", DIM)
    rows = 300
    long = [dataclasses.replace(m, content=m.content * 100) for m in _memories(0, rows)]
    store.add(long, np.random.default_rng(0).normal(size=(rows, DIM)).astype(np.float32))
    cache = RowCache(store._handle, store._loop, max_table_bytes=100_000)  # ~700 B a row
    assert len(_memories_read(store, cache)) == rows
    assert cache._key_table is not None and not cache._key_table.whole
    scanned: list[object] = []
    whole_rows = lance_keys._whole_rows

    async def counted(*args: object) -> object:
        scanned.append(args)
        return await whole_rows(*args)  # type: ignore[arg-type]

    lance_keys._whole_rows = counted  # type: ignore[assignment]
    try:  # enough new rows read by row id that the next miss scans again: keys alone
        _add(store, 1000, rows)
        assert len(_memories_read(store, cache)) == 2 * rows
        _add(store, 2000, 5)
        assert len(_memories_read(store, cache)) == 2 * rows + 5
        reading = cache._reading
        assert reading is not None
        key_table = store._loop.run("read", reading)  # the scan runs beside searches
    finally:
        lance_keys._whole_rows = whole_rows
    assert key_table is not None and len(key_table.row_ids) == 2 * rows + 5
    assert scanned == []
    store.close()

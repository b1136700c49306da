"""LanceDB store: filters, model recording, contract behaviour."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import lancedb
import numpy as np
import pytest
from builders import stored_memory
from lancedb.index import IvfFlat

from tribal_memory.base.errors import EmbeddingModelMismatch
from tribal_memory.base.models import Memory, SearchFilters
from tribal_memory.store.lance_index import IVF_SEGMENTS_CAP
from tribal_memory.store.lance_rows import COLUMNS, filter_sql, table_schema, to_memory, to_row
from tribal_memory.store.lance_table import read_ivf_segments
from tribal_memory.store.lancedb import LanceMemoryStore


def _memory(memory_id: str, content: str, owner: str = "o") -> Memory:
    return stored_memory(
        memory_id, content, owner=owner, tags=("t",), source="src", metadata={"k": 1}
    )


def _unit(rows: int, dim: int, seed: int = 0) -> np.ndarray:
    vectors = np.random.default_rng(seed).normal(size=(rows, dim)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def test_filter_sql_quotes_values() -> None:
    sql = filter_sql(SearchFilters(owner="o'brien", tags=("a",), kinds=("fact",)))
    assert sql is not None
    assert "'o''brien'" in sql and "'shared'" in sql and "array_has_any" in sql
    assert filter_sql(SearchFilters()) is None


def test_store_round_trip_and_search(tmp_path: Path) -> None:
    store = LanceMemoryStore(str(tmp_path / "db"), "test-model", 8)
    memories = [_memory("1", "green tea is nice"), _memory("2", "coffee in the morning", "p")]
    vectors = _unit(2, 8)
    store.add(memories, vectors)
    assert store.get(["1", "missing"]) == {"1": memories[0]}
    nearest = store.vector_search(vectors[1], SearchFilters(), 1)
    assert nearest[0].memory.memory_id == "2"
    assert nearest[0].score == pytest.approx(1.0, abs=1e-5)
    assert [c.memory.memory_id for c in store.text_search("tea", SearchFilters(), 5)] == ["1"]
    assert store.count(SearchFilters(owner="p", include_shared=False)) == 1
    assert store.delete(["1", "missing"]) == 1
    assert store.count() == 1


def test_store_records_model_and_refuses_another(tmp_path: Path) -> None:
    uri = str(tmp_path / "db")
    LanceMemoryStore(uri, "model-a", 8)
    with pytest.raises(EmbeddingModelMismatch, match="model-a.*model-b"):
        LanceMemoryStore(uri, "model-b", 8)
    with pytest.raises(EmbeddingModelMismatch, match="8-d.*16-d"):
        LanceMemoryStore(uri, "model-a", 16)


def test_scan_streams_every_memory_with_its_exact_vector(tmp_path: Path) -> None:
    store = LanceMemoryStore(str(tmp_path / "db"), "test-model", 8)
    assert list(store.scan()) == []
    memories = [_memory(str(i), f"fact {i}", "o" if i % 2 else "shared") for i in range(10)]
    vectors = _unit(10, 8, seed=3)
    store.add(memories[:6], vectors[:6])
    store.add(memories[6:], vectors[6:])
    batches = list(store.scan(batch_size=4))
    assert all(0 < len(batch) <= 4 for batch, _ in batches)
    seen = {m.memory_id: (m, v) for batch, vs in batches for m, v in zip(batch, vs, strict=True)}
    assert len(seen) == 10
    for memory, vector in zip(memories, vectors, strict=True):
        assert seen[memory.memory_id][0] == memory
        assert seen[memory.memory_id][1].tobytes() == vector.tobytes()
    own = SearchFilters(owner="o", include_shared=False)
    only_o = [m.memory_id for batch, _ in store.scan(own) for m in batch]
    assert sorted(only_o) == ["1", "3", "5", "7", "9"]


def _indexed_store(
    tmp_path: Path, rows: int, dim: int = 16, *, quantised: bool = False
) -> tuple[LanceMemoryStore, np.ndarray]:
    """A store past ``ann_index_min_rows``, optimised, so its IVF index (IVF_SQ or not) exists."""
    store = LanceMemoryStore(
        str(tmp_path / "db"),
        "test-model",
        dim,
        ann_index_min_rows=256,
        ann_quantised_min_rows=256 if quantised else 10**9,
        exact_vector_max_rows=0,  # no in-memory copy: searches ask the index
        optimize_every_rows=10**9,
    )
    vectors = _unit(rows, dim, seed=1)
    memories = [_memory(f"m{i:05d}", f"memory {i}", owner=f"big-{i % 2}") for i in range(rows)]
    store.add(memories, vectors)
    store.optimize()
    stats = store.ann_index_stats()
    assert stats is not None and stats["quantised"] == quantised
    return store, vectors


INDEX_KINDS = pytest.mark.parametrize("quantised", [False, True], ids=["ivf_flat", "ivf_sq"])


@INDEX_KINDS
def test_a_small_owner_finds_all_its_memories_past_the_ann_index(
    tmp_path: Path, quantised: bool
) -> None:
    store, _ = _indexed_store(tmp_path, 2000, quantised=quantised)
    small = _unit(6, 16, seed=2)
    store.add([_memory(f"s{i}", f"small {i}", owner="small") for i in range(6)], small)
    store.optimize()
    own = SearchFilters(owner="small", include_shared=False)
    for vector in small:
        found = store.vector_search(vector, own, 10)
        assert sorted(s.memory.memory_id for s in found) == [f"s{i}" for i in range(6)]


@INDEX_KINDS
def test_ann_search_agrees_with_exact_search(tmp_path: Path, quantised: bool) -> None:
    store, vectors = _indexed_store(tmp_path, 3000, quantised=quantised)
    overlap = []
    for vector in _unit(30, 16, seed=3):
        approx = {s.memory.memory_id for s in store.vector_search(vector, SearchFilters(), 10)}
        exact = store.vector_search(vector, SearchFilters(), 10, exact=True)
        assert [s.score for s in exact] == sorted((s.score for s in exact), reverse=True)
        overlap.append(len(approx & {s.memory.memory_id for s in exact}) / 10)
    assert np.mean(overlap) >= 0.8


@INDEX_KINDS
def test_ann_search_scores_are_exact_cosines(tmp_path: Path, quantised: bool) -> None:
    store, vectors = _indexed_store(tmp_path, 2000, quantised=quantised)
    for query in _unit(10, 16, seed=5):
        for scored in store.vector_search(query, SearchFilters(), 10):
            row = int(scored.memory_id[1:])
            assert scored.score == pytest.approx(float(vectors[row] @ query), abs=1e-5)


def test_a_table_grown_past_the_quantised_size_gets_ivf_sq_at_its_rebuild(tmp_path: Path) -> None:
    store = LanceMemoryStore(
        str(tmp_path / "db"),
        "test-model",
        16,
        ann_index_min_rows=256,
        ann_quantised_min_rows=1500,
        exact_vector_max_rows=0,
        optimize_every_rows=10**9,
    )
    vectors = _unit(2000, 16, seed=6)
    store.add([_memory(f"m{i:05d}", f"memory {i}") for i in range(300)], vectors[:300])
    store.optimize()
    assert store.ann_index_stats() == {
        "trained_rows": 300,
        "indexed_rows": 300,
        "unindexed_rows": 0,
        "segments": 1,
        "quantised": 0,
    }
    store.add([_memory(f"m{i:05d}", f"memory {i}") for i in range(300, 1300)], vectors[300:1300])
    store.optimize()  # grown past four times the trained rows: rebuilt, still IVF_FLAT
    stats = store.ann_index_stats()
    assert stats is not None and (stats["trained_rows"], stats["quantised"]) == (1300, 0)
    store.add([_memory(f"m{i:05d}", f"memory {i}") for i in range(1300, 1600)], vectors[1300:1600])
    store.optimize()  # past the quantised size: rebuilt as IVF_SQ, though it grew by 23%
    stats = store.ann_index_stats()
    assert stats is not None and (stats["trained_rows"], stats["quantised"]) == (1600, 1)
    store.add([_memory(f"m{i:05d}", f"memory {i}") for i in range(1600, 2000)], vectors[1600:])
    store.optimize()  # folded into the IVF_SQ index, not rebuilt
    stats = store.ann_index_stats()
    assert stats is not None and (stats["trained_rows"], stats["quantised"]) == (1600, 1)
    found = store.vector_search(vectors[1234], SearchFilters(), 3)
    assert found[0].memory_id == "m01234" and found[0].score == pytest.approx(1.0, abs=1e-5)


def test_an_ivf_rebuild_leaves_the_old_index_out_of_the_cache(tmp_path: Path) -> None:
    def opened() -> LanceMemoryStore:
        return LanceMemoryStore(
            str(tmp_path / "db"),
            "test-model",
            64,
            ann_index_min_rows=256,
            ann_quantised_min_rows=3200,
            exact_vector_max_rows=0,
            optimize_every_rows=10**9,
        )

    def ask(store: LanceMemoryStore, rows: int = 3300) -> None:
        for row in range(0, rows, 30):
            found = store.vector_search(vectors[row], SearchFilters(), 5)
            assert found[0].memory_id == f"m{row:05d}"

    store, vectors = opened(), _unit(3300, 64, seed=8)
    store.add([_memory(f"m{i:05d}", f"memory {i}") for i in range(3000)], vectors[:3000])
    store.optimize()
    ask(store, 3000)  # reads the IVF_FLAT index into the cache
    store.add([_memory(f"m{i:05d}", f"memory {i}") for i in range(3000, 3300)], vectors[3000:])
    store.optimize()  # past the quantised size: rebuilt as IVF_SQ
    stats = store.ann_index_stats()
    assert stats is not None and stats["quantised"] == 1
    ask(store)
    fresh = opened()
    ask(fresh)
    # The replaced IVF_FLAT index (3,000 64-d vectors, 768 KB) is not kept beside the new one.
    assert store.cache_bytes() <= 1.1 * fresh.cache_bytes() + 64 * 1024


def test_another_handle_reads_the_ivf_segments_a_store_has(tmp_path: Path) -> None:
    assert read_ivf_segments(str(tmp_path / "none")) == 0  # no table
    store, vectors = _indexed_store(tmp_path, 2000)
    assert read_ivf_segments(str(tmp_path / "db")) == 1
    store.add([_memory(f"n{i}", f"new {i}") for i in range(20)], _unit(20, 16, seed=9))
    store.optimize()  # folded in as a second segment
    stats = store.ann_index_stats()
    assert stats is not None and stats["segments"] == 2
    assert read_ivf_segments(str(tmp_path / "db")) == 2


@INDEX_KINDS
def test_nearest_finds_a_near_twin_past_the_ann_index(tmp_path: Path, quantised: bool) -> None:
    store, vectors = _indexed_store(tmp_path, 2000, quantised=quantised)
    twins = vectors[[10, 500, 1500]] + 0.01 * _unit(3, 16, seed=4)
    twins /= np.linalg.norm(twins, axis=1, keepdims=True)
    big, nobody = (SearchFilters(owner=o, include_shared=False) for o in ("big-0", "nobody"))
    found, missing, empty = store.nearest([(twins, big), (twins, nobody), (twins[:0], big)])
    assert [f[0] if f else None for f in found] == ["m00010", "m00500", "m01500"]
    for twin, row, (_, similarity) in zip(twins, [10, 500, 1500], found, strict=True):
        assert similarity == pytest.approx(float(twin @ vectors[row]), abs=1e-5)  # exact cosine
    assert missing == [None] * 3
    assert empty == []


def _twins(vectors: np.ndarray, seed: int) -> np.ndarray:
    twins = vectors + 0.01 * _unit(len(vectors), vectors.shape[1], seed=seed)
    return twins / np.linalg.norm(twins, axis=1, keepdims=True)


def test_nearest_finds_twins_of_rows_written_since_the_index_was_built(tmp_path: Path) -> None:
    store, vectors = _indexed_store(tmp_path, 2000)
    fresh = _unit(4, 16, seed=5)
    store.add([_memory(f"n{i}", f"new {i}", owner="big-0") for i in range(4)], fresh)
    moved = store.get(["m00010"])["m00010"]
    store.replace(dataclasses.replace(moved, tags=("moved",)), None)  # rewritten outside the index
    store.delete(["n3"])
    big = SearchFilters(owner="big-0", include_shared=False)
    queries = _twins(np.vstack([fresh, vectors[[10, 500]]]), seed=6)
    (found,) = store.nearest([(queries, big)])
    assert [f[0] if f else None for f in found[:3]] == ["n0", "n1", "n2"]
    assert found[3] is None or found[3][0] != "n3"  # deleted: not a twin any more
    assert [f[0] if f else None for f in found[4:]] == ["m00010", "m00500"]
    assert all(f is not None and f[1] > 0.99 for i, f in enumerate(found) if i != 3)


def test_nearest_sees_rows_another_process_wrote_outside_the_index(tmp_path: Path) -> None:
    store, _ = _indexed_store(tmp_path, 2000)
    other = LanceMemoryStore(str(tmp_path / "db"), "test-model", 16, read_consistency_s=0)
    fresh = _unit(3, 16, seed=7)
    other.add([_memory(f"x{i}", f"theirs {i}", owner="big-1") for i in range(3)], fresh)
    store.refresh()
    (found,) = store.nearest([(_twins(fresh, seed=8), SearchFilters(owner="big-1"))])
    assert [f[0] if f else None for f in found] == ["x0", "x1", "x2"]


def _grow(store: LanceMemoryStore, rounds: int, rows: int, seed: int) -> Iterator[dict[str, int]]:
    """``rounds`` times: add ``rows`` rows, optimize(), check all are indexed and findable.

    Yields the IVF index's stats after each round.
    """
    more = _unit(rounds * rows, 16, seed=seed)
    for round_ in range(rounds):
        part = more[round_ * rows : (round_ + 1) * rows]
        ids = [f"g{seed}-{round_}-{i}" for i in range(rows)]
        store.add([_memory(i, f"round {i}", owner="big-0") for i in ids], part)
        store.optimize()
        stats = store.ann_index_stats()
        assert stats is not None and stats["unindexed_rows"] == 0
        found = store.vector_search(part[rows // 2], SearchFilters(), 1)
        assert found[0].memory.memory_id == ids[rows // 2]
        yield stats


def test_optimize_keeps_the_ann_index_to_few_segments(tmp_path: Path) -> None:
    store, vectors = _indexed_store(tmp_path, 600)
    for round_, stats in enumerate(_grow(store, rounds=4, rows=100, seed=9)):
        assert stats["segments"] <= 2
        assert stats["indexed_rows"] == 700 + 100 * round_


def test_a_slowly_growing_table_keeps_its_ann_index_to_a_few_segments(tmp_path: Path) -> None:
    # 8 runs of 10 rows each: the table grows by 13%, short of the growth that
    # rebuilds the index with 2 segments, so only the segment cap bounds them.
    store, _ = _indexed_store(tmp_path, 600)
    seen = [stats["segments"] for stats in _grow(store, rounds=8, rows=10, seed=10)]
    assert max(seen) <= IVF_SEGMENTS_CAP and max(seen) > 1


def test_optimize_drops_an_ivf_index_left_by_an_interrupted_rebuild(tmp_path: Path) -> None:
    store, vectors = _indexed_store(tmp_path, 600)
    # A rebuild builds the new index before dropping the old one; a crash in
    # between leaves both, as this second index does.
    table = lancedb.connect(str(tmp_path / "db")).open_table("memories")
    table.create_index("vector", config=IvfFlat(distance_type="cosine"), name="leftover")
    store.refresh()
    assert sum("IVF" in str(i.index_type).upper() for i in table.list_indices()) == 2
    assert store.vector_search(vectors[5], SearchFilters(), 1)[0].memory.memory_id == "m00005"
    store.optimize()
    table = lancedb.connect(str(tmp_path / "db")).open_table("memories")
    assert [i.name for i in table.list_indices() if "IVF" in str(i.index_type).upper()] == [
        "vector_ivf_p1024_rows_600"
    ]
    assert store.vector_search(vectors[9], SearchFilters(), 1)[0].memory.memory_id == "m00009"


def test_optimize_rebuilds_an_ivf_index_built_with_other_partitions(tmp_path: Path) -> None:
    # An older release named its index vector_ivf_rows_<n> and trained it with
    # LanceDB's default partitions; the next optimize replaces it.
    store = LanceMemoryStore(
        str(tmp_path / "db"), "test-model", 16, ann_index_min_rows=256, optimize_every_rows=10**9
    )
    vectors = _unit(600, 16, seed=1)
    store.add([_memory(f"m{i:05d}", f"memory {i}") for i in range(600)], vectors)
    table = lancedb.connect(str(tmp_path / "db")).open_table("memories")
    table.create_index("vector", config=IvfFlat(distance_type="cosine"), name="vector_ivf_rows_600")
    store.refresh()
    assert store.ann_index_stats() is not None  # the old index is used until then
    assert store.vector_search(vectors[3], SearchFilters(), 1)[0].memory.memory_id == "m00003"
    store.optimize()
    table = lancedb.connect(str(tmp_path / "db")).open_table("memories")
    assert [i.name for i in table.list_indices() if "IVF" in str(i.index_type).upper()] == [
        "vector_ivf_p1024_rows_600"
    ]
    assert store.vector_search(vectors[9], SearchFilters(), 1)[0].memory.memory_id == "m00009"


def test_memory_id_prefilter_pages_and_ids(tmp_path: Path) -> None:
    store = LanceMemoryStore(str(tmp_path / "db"), "test-model", 8)
    memories = [_memory(f"m{i}", f"note {i} about tea", "o" if i % 2 else "p") for i in range(6)]
    vectors = _unit(6, 8)
    store.add(memories, vectors)
    only = SearchFilters(memory_ids=("m1", "m4"))
    assert {s.memory.memory_id for s in store.vector_search(vectors[0], only, 10)} == {"m1", "m4"}
    assert {s.memory.memory_id for s in store.text_search("tea", only, 10)} == {"m1", "m4"}
    assert store.count(only) == 2 and store.count(SearchFilters(memory_ids=())) == 0
    assert store.vector_search(vectors[0], SearchFilters(memory_ids=()), 10) == []
    first = store.page(SearchFilters(), 4)
    assert [m.memory_id for m in first] == ["m0", "m1", "m2", "m3"]
    rest = store.page(SearchFilters(), 4, after="m3")
    assert [m.memory_id for m in rest] == ["m4", "m5"]
    assert store.page(SearchFilters(), 4, after="m5") == []
    owned = SearchFilters(owner="o", include_shared=False)
    assert [m.memory_id for m in store.page(owned, 10, after="m1")] == ["m3", "m5"]
    assert sorted(store.ids_of(owned)) == ["m1", "m3", "m5"]


def test_the_table_has_a_column_per_memory_field_in_field_order() -> None:
    names = table_schema("model", 4).names
    assert tuple(f.name for f in dataclasses.fields(Memory)) == COLUMNS
    assert [n for n in names if n not in ("anchor_text", "vector")] == list(COLUMNS)
    assert names[-3:] == ["anchor_text", "metadata", "vector"]  # stores on disk have this order


def test_a_row_round_trips_to_the_same_memory() -> None:
    when = datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)
    memory = Memory(
        "00000000-0000-4000-8000-000000000001", "text", "ann", "chunk", ("a", "b"), "doc.md",
        "d1", 2, None, when, when, None, {"start_line": 1, "nested": {"k": [1, 2]}},
    )  # fmt: skip
    row = to_row(memory, np.zeros(4, dtype=np.float32))
    assert set(row) == set(table_schema("model", 4).names)
    assert (
        row["tags"] == ["a", "b"]
        and row["metadata"] == '{"nested": {"k": [1, 2]}, "start_line": 1}'
    )
    assert to_memory(row) == memory


def test_a_store_made_without_the_kind_index_gets_it_when_opened(tmp_path: Path) -> None:
    # Every search excludes summaries by kind; an older store had no index on
    # the column, so that prefilter read it in every row.
    store = LanceMemoryStore(str(tmp_path / "db"), "test-model", 8)
    memories = [_memory(f"m{i}", f"memory {i}") for i in range(20)]
    store.add([dataclasses.replace(memories[0], kind="summary"), *memories[1:]], _unit(20, 8))
    store.close()
    table = lancedb.connect(str(tmp_path / "db")).open_table("memories")
    kind_index = [i.name for i in table.list_indices() if i.columns == ["kind"]]
    assert len(kind_index) == 1
    table.drop_index(kind_index[0])
    assert not [i for i in table.list_indices() if i.columns == ["kind"]]
    store = LanceMemoryStore(str(tmp_path / "db"), "test-model", 8)
    table = lancedb.connect(str(tmp_path / "db")).open_table("memories")
    assert [str(i.index_type) for i in table.list_indices() if i.columns == ["kind"]] == ["Bitmap"]
    no_summaries = SearchFilters(exclude_kinds=("summary",))
    found = store.text_search("memory", no_summaries, 50)
    assert len(found) == 19 and all(c.memory.kind == "fact" for c in found)
    store.close()


def test_group_counts_follow_every_write_of_this_handle_and_another(tmp_path: Path) -> None:
    store = LanceMemoryStore(str(tmp_path / "db"), "test-model", 16, read_consistency_s=0)
    other = LanceMemoryStore(str(tmp_path / "db"), "test-model", 16, read_consistency_s=0)
    store.add([_memory(f"a{i}", f"alpha {i}", owner="ann") for i in range(3)], _unit(3, 16))
    assert store.group_counts("owner") == {"ann": 3}
    assert store.group_counts("owner") == {"ann": 3}  # asked again, same answer
    other.add([_memory("b0", "beta", owner="bob")], _unit(1, 16, seed=1))
    assert store.group_counts("owner") == {"ann": 3, "bob": 1}
    store.delete(["a0", "a1"])
    assert store.group_counts("owner") == {"ann": 1, "bob": 1}
    assert other.group_counts("owner") == {"ann": 1, "bob": 1}
    moved = store.get(["a2"])["a2"]
    store.replace(dataclasses.replace(moved, owner="bob", kind="preference"), None)
    assert store.group_counts("owner") == {"bob": 2}
    assert store.group_counts("kind") == {"fact": 1, "preference": 1}
    counts = store.group_counts("kind")
    counts["fact"] = 99  # the caller's copy: the kept answer is not changed
    assert store.group_counts("kind") == {"fact": 1, "preference": 1}

"""A small table answers vector search from an in-memory copy of its vectors (issue 30).

What a user relies on: the copy answers exactly what LanceDB's exact search
answers, under the filters it evaluates, and never answers once the table
changed (a write of this handle or of another), nor for a table larger
than its bound.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from builders import stored_memory

from tribal_memory.base.models import Memory, MemoryKind, SearchFilters
from tribal_memory.store.event_loop import shared_event_loop
from tribal_memory.store.lance_mirror import VectorMirror, _Copy
from tribal_memory.store.lance_table import TableHandle
from tribal_memory.store.lancedb import LanceMemoryStore

DIM = 16
OWNERS = ("ana", "ben", "shared")
KINDS: tuple[MemoryKind, ...] = ("fact", "chunk", "summary")


def _memories(n: int, start: int = 0) -> list[Memory]:
    now = datetime.now(UTC)
    return [
        stored_memory(
            f"m{i}",
            f"fact number {i}",
            owner=OWNERS[i % 3],
            kind=KINDS[(i // 3) % 3],
            created_at=now,
        )
        for i in range(start, start + n)
    ]


def _vectors(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n, DIM)).astype(np.float32)


def _lancedb_only(tmp_path: Path, rows: int = 60) -> LanceMemoryStore:
    """A store whose searches all go to LanceDB, holding ``rows`` memories."""
    store = LanceMemoryStore(str(tmp_path / "db"), "test-model", DIM, exact_vector_max_rows=0)
    store.add(_memories(rows), _vectors(rows, 0))
    return store


def _mirror(tmp_path: Path, max_rows: int = 1000) -> VectorMirror:
    """A copy over its own handle of the table, which sees every other handle's writes."""
    handle = TableHandle(
        shared_event_loop(),
        str(tmp_path / "db"),
        "test-model",
        DIM,
        read_consistency_s=0,
        index_cache_mb=64,
    )
    return VectorMirror(handle, max_rows)


def _nearest(
    mirror: VectorMirror, vector: np.ndarray, filters: SearchFilters, k: int
) -> list[tuple[str, float]] | None:
    found = shared_event_loop().run("test", mirror.nearest(vector, filters, k))
    return None if found is None else [(key[0], score) for _, key, score in found]


def _copied(mirror: VectorMirror, vector: np.ndarray) -> list[tuple[str, float]]:
    """The copy's answer (the first search brings it up to date)."""
    found = _nearest(mirror, vector, SearchFilters(), 5)
    assert found is not None
    return found


def _exact(
    store: LanceMemoryStore, vector: np.ndarray, filters: SearchFilters, k: int
) -> list[tuple[str, float]]:
    return [(s.memory_id, s.score) for s in store.vector_search(vector, filters, k, exact=True)]


@pytest.mark.parametrize(
    "filters",
    [
        SearchFilters(),
        SearchFilters(owner="ana"),
        SearchFilters(owner="ana", include_shared=False),
        SearchFilters(kinds=("chunk",)),
        SearchFilters(exclude_kinds=("summary",)),
        SearchFilters(owner="ben", exclude_kinds=("summary", "chunk")),
        SearchFilters(owner="nobody", include_shared=False),
    ],
    ids=["none", "owner", "owner-alone", "kind", "not-summary", "owner-not-two", "no-row"],
)
def test_the_copy_answers_what_lancedb_exact_search_answers(
    tmp_path: Path, filters: SearchFilters
) -> None:
    store = _lancedb_only(tmp_path)
    mirror = _mirror(tmp_path)
    queries = _vectors(8, 1)
    _copied(mirror, queries[0])
    for k in (1, 10, 100):
        for query in queries:
            found = _nearest(mirror, query, filters, k)
            expected = _exact(store, query, filters, k)
            assert found is not None
            assert [m for m, _ in found] == [m for m, _ in expected]
            assert np.allclose([s for _, s in found], [s for _, s in expected], atol=1e-5)


def test_the_copy_leaves_filters_it_cannot_evaluate_to_lancedb(tmp_path: Path) -> None:
    _lancedb_only(tmp_path)
    mirror = _mirror(tmp_path)
    query = _vectors(1, 1)[0]
    _copied(mirror, query)
    assert _nearest(mirror, query, SearchFilters(tags=("t",)), 5) is None
    assert _nearest(mirror, query, SearchFilters(memory_ids=("m1", "m2")), 5) is None


def test_the_copy_follows_writes_of_another_handle(tmp_path: Path) -> None:
    store = _lancedb_only(tmp_path)
    mirror = _mirror(tmp_path)
    query = _vectors(1, 1)[0]
    before = _copied(mirror, query)
    store.add(_memories(1, start=100), query[None, :])  # the new row is the nearest
    after = _copied(mirror, query)
    assert after[0][0] == "m100" and after[1:] == before[:4]
    expected = _exact(store, query, SearchFilters(), 5)
    assert [m for m, _ in after] == [m for m, _ in expected]
    assert np.allclose([s for _, s in after], [s for _, s in expected], atol=1e-5)
    store.delete(["m100"])
    assert _copied(mirror, query) == before
    store.optimize()  # a compaction moves every row
    store.wait_for_maintenance(60)
    assert _copied(mirror, query) == before


def test_one_question_gets_the_same_scores_from_every_search(tmp_path: Path) -> None:
    store = LanceMemoryStore(str(tmp_path / "db"), "test-model", DIM)
    memories, vectors = _memories(60), _vectors(60, 0)
    store.add(memories, vectors)
    first = [(s.memory_id, s.score) for s in store.vector_search(vectors[3], SearchFilters(), 10)]
    for _ in range(5):
        again = store.vector_search(vectors[3], SearchFilters(), 10)
        assert [(s.memory_id, s.score) for s in again] == first


def test_a_table_over_the_bound_is_never_copied(tmp_path: Path) -> None:
    _lancedb_only(tmp_path, rows=60)
    mirror = _mirror(tmp_path, max_rows=59)
    query = _vectors(1, 1)[0]
    for _ in range(3):
        assert _nearest(mirror, query, SearchFilters(), 5) is None
    assert _nearest(_mirror(tmp_path, max_rows=0), query, SearchFilters(), 5) is None


def test_an_empty_table_answers_no_hit(tmp_path: Path) -> None:
    LanceMemoryStore(str(tmp_path / "db"), "test-model", DIM)
    assert _copied(_mirror(tmp_path), _vectors(1, 1)[0]) == []


def test_another_handles_write_reaches_searches_within_the_consistency_window(
    tmp_path: Path,
) -> None:
    reader = LanceMemoryStore(str(tmp_path / "db"), "test-model", DIM, read_consistency_s=0.2)
    writer = LanceMemoryStore(str(tmp_path / "db"), "test-model", DIM)
    writer.add(_memories(60), _vectors(60, 0))
    query = _vectors(1, 1)[0]
    time.sleep(0.3)
    assert reader.vector_search(query, SearchFilters(), 5)[0].memory_id != "m100"
    writer.add(_memories(1, start=100), query[None, :])
    time.sleep(0.3)
    assert reader.vector_search(query, SearchFilters(), 5)[0].memory_id == "m100"


def _groups(vectors: np.ndarray) -> list[tuple[np.ndarray, SearchFilters]]:
    """The near-duplicate check's groups: a few vectors per owner, one owner with no row."""
    return [
        (vectors[0:3], SearchFilters(owner="ana", include_shared=False)),
        (vectors[3:5], SearchFilters(owner="ben", include_shared=False)),
        (vectors[5:6], SearchFilters(owner="nobody", include_shared=False)),
    ]


def test_the_near_duplicate_check_answers_what_lancedb_answers(tmp_path: Path) -> None:
    copied = LanceMemoryStore(str(tmp_path / "copied"), "test-model", DIM)
    lancedb = LanceMemoryStore(
        str(tmp_path / "lancedb"), "test-model", DIM, exact_vector_max_rows=0
    )
    # Queries at stored rows: m3, m33, m90 (ana's), m4, m31 (ben's); m4 and m31
    # are deleted in the last step, in which m90 is written.
    written = [_vectors(30, step) for step in range(4)]
    queries = np.stack([written[0][3], written[1][3], written[3][0], written[0][4], written[1][1]])
    queries = np.vstack([queries, _vectors(1, 7)])
    for step in range(4):  # writes between checks: the copy grows in place, then loses rows
        memories = _memories(30, start=30 * step)
        for store in (copied, lancedb):
            store.add(memories, written[step])
            if step == 3:
                store.delete(["m4", "m31"])
        found, expected = copied.nearest(_groups(queries)), lancedb.nearest(_groups(queries))
        assert [[row and row[0] for row in group] for group in found] == [
            [row and row[0] for row in group] for group in expected
        ]
        for got, want in zip(found, expected, strict=True):
            assert np.allclose([r[1] for r in got if r], [r[1] for r in want if r], atol=1e-5)
        assert found[2] == [None]
        if step < 3:
            assert found[1][0] is not None and found[1][0][0] == "m4"
    assert found[0][2] is not None and found[0][2][0] == "m90"
    assert found[1][0] is not None and found[1][0][0] != "m4"
    assert copied._search._mirror._copy is not None  # the copy answered


def _rows(start: int, vectors: np.ndarray) -> pa.Table:
    """Rows as the copy reads them: key columns, kind, vector, _rowid."""
    n = len(vectors)
    return pa.table(
        {
            "memory_id": [f"m{start + i}" for i in range(n)],
            "owner": ["ana"] * n,
            "doc_id": pa.array([None] * n, pa.string()),
            "chunk_index": pa.array([None] * n, pa.int32()),
            "kind": ["fact"] * n,
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1)), DIM),
            "_rowid": pa.array(range(start, start + n), pa.uint64()),
        }
    )


def test_two_versions_read_from_one_copy_keep_their_own_rows() -> None:
    # Two reads that start from the same copy (a search of version 2 and one of
    # version 3) both append to it; the first's rows must not be overwritten.
    base = _Copy.empty().merged(1, None, _rows(0, _vectors(10, 0)))
    first_rows, second_rows = _vectors(3, 1), _vectors(3, 2)
    first = base.merged(2, None, _rows(10, first_rows))
    second = base.merged(3, None, _rows(20, second_rows))
    unit = lambda rows: rows / np.linalg.norm(rows, axis=1, keepdims=True)  # noqa: E731
    assert np.allclose(first.unit[10:], unit(first_rows))
    assert np.allclose(second.unit[10:], unit(second_rows))
    assert np.allclose(first.unit[:10], second.unit[:10])
    assert [key[0] for key in first.keys[10:]] == ["m10", "m11", "m12"]
    later = first.merged(4, None, _rows(30, _vectors(2, 3)))  # appends in place after first
    assert np.allclose(first.unit[10:], unit(first_rows)) and len(later.unit) == 15

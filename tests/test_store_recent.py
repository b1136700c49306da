"""RecentRows: the in-memory half of near-duplicate checks over rows outside the index."""

from __future__ import annotations

import numpy as np

from tribal_memory.base.models import SHARED_OWNER, SearchFilters
from tribal_memory.store.recent import RecentRows, better, nearest_in, owners_only


def test_recent_rows_track_writes_rewrites_and_deletes_per_owner() -> None:
    recent = RecentRows()
    recent.put("a", "alice", np.array([3.0, 4.0]))
    recent.put("b", "bob", np.array([1.0, 0.0]))
    recent.put("a", "alice", np.array([0.0, 2.0]))  # rewritten: the new vector counts
    assert len(recent) == 2
    ids, matrix = recent.matrices(["alice"])
    assert ids == ["a"] and np.allclose(matrix, [[0.0, 1.0]])  # stored unit length
    taken = recent.matrices(["alice"])
    recent.drop(["a", "unknown"])
    assert len(recent) == 1 and recent.matrices(["alice"])[0] == []
    assert taken[0] == ["a"] and np.allclose(taken[1], [[0.0, 1.0]])  # unchanged by the drop
    recent.drop(recent.ids())  # what optimize() does with the rows it folded in
    assert len(recent) == 0 and recent.ids() == []


def test_nearest_in_gives_each_vector_its_most_similar_row() -> None:
    matrix = np.array([[1.0, 0.0], [0.0, 1.0]], dtype=np.float32)
    found = nearest_in(np.array([[0.1, 2.0], [5.0, 0.0]]), ["x", "y"], matrix)
    assert [f[0] for f in found if f] == ["y", "x"]
    assert found[1] is not None and abs(found[1][1] - 1.0) < 1e-6
    assert nearest_in(np.ones((2, 2)), [], np.zeros((0, 0))) == [None, None]
    assert better([None, ("a", 0.5), ("b", 0.9)], [("c", 0.1), ("d", 0.7), None]) == [
        ("c", 0.1),
        ("d", 0.7),
        ("b", 0.9),
    ]


def test_owners_only_accepts_owner_filters_alone() -> None:
    assert owners_only(SearchFilters(owner="o")) == ["o", SHARED_OWNER]
    assert owners_only(SearchFilters(owner="o", include_shared=False)) == ["o"]
    assert owners_only(SearchFilters()) is None
    assert owners_only(SearchFilters(owner="o", kinds=("fact",))) is None

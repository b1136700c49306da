"""A filtered BM25 search over many passing rows filters after ranking (issue 30).

What a user relies on: whichever way the store applies a filter, a
filtered full-text search answers the same memories with the same scores
as filtering first, including when too few of the table's best rows pass.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from builders import stored_memory
from lancedb.query import AsyncFTSQuery

from tribal_memory.base.models import SearchFilters
from tribal_memory.store import lance_search
from tribal_memory.store.lance_rows import lists_owner_or_kinds
from tribal_memory.store.lance_search import postfilter_rows
from tribal_memory.store.lancedb import LanceMemoryStore

ROWS = 400


def _store(tmp_path: Path, ana_long: bool) -> LanceMemoryStore:
    """``ROWS`` memories mentioning tea, half ana's; every one a different length.

    BM25 ranks shorter memories higher, so no two score the same. With
    ``ana_long`` ana's are the longer half (they rank last).
    """
    store = LanceMemoryStore(str(tmp_path / "db"), "test-model", 8)
    memories = []
    for i in range(ROWS):
        ana = (i >= ROWS // 2) if ana_long else (i % 2 == 0)
        content = "tea " + " ".join(f"w{i}x{j}" for j in range(i))
        owner = "ana" if ana else "ben"
        memories.append(stored_memory(f"m{i:03d}", content, owner=owner, tags=("t",)))
    store.add(memories, np.random.default_rng(0).normal(size=(ROWS, 8)).astype(np.float32))
    store.optimize()
    assert store.wait_for_maintenance(60)
    return store


def _answer(store: LanceMemoryStore, k: int) -> list[tuple[str, float]]:
    found = store.text_search("tea", SearchFilters(owner="ana", include_shared=False), k)
    return [(s.memory_id, round(s.score, 5)) for s in found]


@pytest.mark.parametrize("ana_long", [False, True], ids=["ana-spread", "ana-ranked-last"])
def test_a_filter_applied_after_ranking_answers_what_filtering_first_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ana_long: bool
) -> None:
    store = _store(tmp_path, ana_long)
    postfiltered = 0
    postfilter = AsyncFTSQuery.postfilter

    def counted(self: AsyncFTSQuery) -> AsyncFTSQuery:
        nonlocal postfiltered
        postfiltered += 1
        return postfilter(self)

    monkeypatch.setattr(AsyncFTSQuery, "postfilter", counted)
    monkeypatch.setattr(lance_search, "POSTFILTER_MIN_PASSING", 10**9)
    first = {k: _answer(store, k) for k in (1, 20, 150)}
    assert postfiltered == 0
    monkeypatch.setattr(lance_search, "POSTFILTER_MIN_PASSING", 100)
    for k, expected in first.items():
        assert _answer(store, k) == expected
        assert len(expected) == min(k, ROWS // 2)
    # Each search ranked first; where ana's memories rank last, none of the
    # best 4k rows passed for k 1 and 20, and the filter came first after all.
    assert postfiltered == 3


def test_filters_on_more_than_owner_and_kind_or_exclusions_alone_are_applied_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _store(tmp_path, ana_long=False)
    expected = _answer(store, 20)  # every memory is tagged: the same rows
    monkeypatch.setattr(lance_search, "POSTFILTER_MIN_PASSING", 100)

    def unexpected(self: AsyncFTSQuery) -> AsyncFTSQuery:
        raise AssertionError("a tag filter was applied after ranking")

    monkeypatch.setattr(AsyncFTSQuery, "postfilter", unexpected)
    tagged = SearchFilters(owner="ana", include_shared=False, tags=("t",))
    found = store.text_search("tea", tagged, 20)
    assert [(s.memory_id, round(s.score, 5)) for s in found] == expected
    # Leaving a kind out (as every search leaves summaries out) passes nearly every row.
    assert len(store.text_search("tea", SearchFilters(exclude_kinds=("summary",)), 20)) == 20


def test_how_many_rows_are_ranked_before_filtering() -> None:
    passing = lance_search.POSTFILTER_MIN_PASSING
    assert postfilter_rows(150, passing - 1, 10**6) is None  # few pass: filter first
    assert postfilter_rows(150, 50_000, 1_000_000) == 6_000  # 5%: twice the rows needed
    assert postfilter_rows(150, 500_000, 1_000_000) == 600
    assert postfilter_rows(150, 40_000, 1_000_000) is None  # over POSTFILTER_MAX_ROWS
    assert postfilter_rows(10, 40_000, 1_000_000) == 500
    assert postfilter_rows(150, 1_000_000, 1_000_000) == 300  # all pass: twice k
    assert postfilter_rows(150, 30_000, 0) is None  # no rows counted: filter first


def test_which_filters_list_the_rows_they_pass() -> None:
    assert lists_owner_or_kinds(SearchFilters(owner="ada"))
    assert lists_owner_or_kinds(SearchFilters(owner="ada", include_shared=False))
    assert lists_owner_or_kinds(SearchFilters(kinds=("fact",), exclude_kinds=("summary",)))
    assert not lists_owner_or_kinds(SearchFilters())
    assert not lists_owner_or_kinds(SearchFilters(exclude_kinds=("summary",)))
    assert not lists_owner_or_kinds(SearchFilters(owner="ada", tags=("tea",)))

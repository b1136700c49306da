"""The MemoryStore and Embedder contracts, run over every implementation of each seam.

Stores: the real LanceDB store in a temp dir and the in-memory test store
(``tests/memory_store.py``). Embedders: the packaged model and the hashing
test embedder. A test here asserts what the Protocol's docstrings promise.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from builders import stored_memory
from memory_store import HashEmbedder, InMemoryStore

from tribal_memory.base.errors import InvalidInput, NotFound
from tribal_memory.base.models import SHARED_OWNER, Memory, MemoryKind, SearchFilters
from tribal_memory.embeddings.base import Embedder, Vector
from tribal_memory.embeddings.fastembed import FastEmbedEmbedder
from tribal_memory.store.base import MemoryStore
from tribal_memory.store.lancedb import LanceMemoryStore

DIM = 8
T0 = datetime(2024, 3, 1, 12, 0, tzinfo=UTC)
Opener = Callable[[str], MemoryStore]
"""Opens the store at a location (where ``copy_to`` wrote a copy)."""


def _memory(
    memory_id: str,
    content: str,
    owner: str = "alice",
    *,
    kind: MemoryKind = "fact",
    tags: tuple[str, ...] = (),
    source: str | None = None,
    created_at: datetime = T0,
    event_time: datetime | None = None,
    doc_id: str | None = None,
) -> Memory:
    return stored_memory(
        memory_id,
        content,
        owner=owner,
        kind=kind,
        tags=tags,
        source=source,
        doc_id=doc_id,
        created_at=created_at,
        event_time=event_time,
        metadata={"n": 1, "note": memory_id},
    )


def _unit(rows: int, seed: int = 0) -> Vector:
    vectors = np.random.default_rng(seed).normal(size=(rows, DIM))
    return np.asarray(vectors / np.linalg.norm(vectors, axis=1, keepdims=True), dtype=np.float32)


@pytest.fixture(params=["lance", "memory"])
def opened(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[MemoryStore, Opener]]:
    """An empty store of each implementation, and how to open a copy of it."""
    if request.param == "lance":
        store: MemoryStore = LanceMemoryStore(str(tmp_path / "db"), "test-model", DIM)

        def open_lance(target: str) -> MemoryStore:
            return LanceMemoryStore(target, "test-model", DIM)

        yield store, open_lance
    else:
        store = InMemoryStore("test-model", DIM)
        yield store, InMemoryStore.copies.__getitem__
    store.close()


@pytest.fixture
def store(opened: tuple[MemoryStore, Opener]) -> MemoryStore:
    return opened[0]


# The filter fixture: who owns what, with which kind, tags, source and time.
FIXTURE = [
    _memory("a1", "alice likes green tea", tags=("drink",), source="chat", doc_id="conv-1"),
    _memory("a2", "alice deploys on friday", kind="chunk", source="docs"),
    _memory(
        "a3",
        "alice met the zebra keeper",
        tags=("zoo", "drink"),
        created_at=T0 + timedelta(days=5),
        event_time=T0 - timedelta(days=10),
    ),
    _memory(
        "b1", "bob prefers black coffee", "bob", tags=("drink",), source="chat", doc_id="conv-2"
    ),
    _memory("b2", "bob fixed the billing bug", "bob", created_at=T0 + timedelta(days=2)),
    _memory("s1", "the office wifi password rotates monthly", SHARED_OWNER, source="docs"),
]


@pytest.fixture
def filled(store: MemoryStore) -> tuple[MemoryStore, np.ndarray]:
    vectors = _unit(len(FIXTURE))
    store.add(FIXTURE, vectors)
    return store, vectors


# -- writes and reads by id -------------------------------------------------------


def test_add_then_get_round_trips_every_field(store: MemoryStore) -> None:
    store.add(FIXTURE, _unit(len(FIXTURE)))
    assert store.get(["a3", "b1"]) == {"a3": FIXTURE[2], "b1": FIXTURE[3]}


def test_get_misses_are_absent_not_errors(filled: tuple[MemoryStore, np.ndarray]) -> None:
    store, _ = filled
    assert store.get(["nope", "a1"]) == {"a1": FIXTURE[0]}
    assert store.get(["nope"]) == {}
    assert store.get([]) == {}


def test_add_rejects_vectors_of_the_wrong_shape_and_stores_nothing(store: MemoryStore) -> None:
    with pytest.raises(InvalidInput):
        store.add(FIXTURE[:2], _unit(3))
    with pytest.raises(InvalidInput):
        store.add(FIXTURE[:2], np.ones((2, DIM + 1), dtype=np.float32))
    assert store.count() == 0


def test_an_empty_add_writes_nothing(store: MemoryStore) -> None:
    before = store.version
    store.add([], np.zeros((0, DIM), dtype=np.float32))
    assert store.count() == 0 and store.version == before


def test_every_write_raises_the_version(store: MemoryStore) -> None:
    versions = [store.version]
    store.add(FIXTURE[:2], _unit(2))
    versions.append(store.version)
    store.replace(dataclasses.replace(FIXTURE[0], content="changed"), None)
    versions.append(store.version)
    store.delete(["a2"])
    versions.append(store.version)
    assert versions == sorted(set(versions))


def test_replace_without_a_vector_keeps_the_stored_one(
    filled: tuple[MemoryStore, np.ndarray],
) -> None:
    store, vectors = filled
    changed = dataclasses.replace(FIXTURE[0], content="alice now likes oolong", tags=("tea",))
    store.replace(changed, None)
    assert store.get(["a1"]) == {"a1": changed}
    (best,) = store.vector_search(vectors[0], SearchFilters(), 1)
    assert best.memory == changed and best.score == pytest.approx(1.0, abs=1e-5)
    assert store.text_search("oolong", SearchFilters(), 5)[0].memory.memory_id == "a1"
    assert store.text_search("green", SearchFilters(), 5) == []


def test_replace_with_a_vector_moves_the_memory(filled: tuple[MemoryStore, np.ndarray]) -> None:
    store, vectors = filled
    store.replace(FIXTURE[0], vectors[5])
    found = store.score_ids(vectors[5], ["a1"], SearchFilters())
    assert found[0].score == pytest.approx(1.0, abs=1e-5)


@pytest.mark.parametrize("with_vector", [False, True])
def test_replace_of_an_unknown_id_is_not_found_and_writes_nothing(
    filled: tuple[MemoryStore, np.ndarray], with_vector: bool
) -> None:
    store, vectors = filled
    ghost = _memory("ghost", "never stored")
    with pytest.raises(NotFound):
        store.replace(ghost, vectors[0] if with_vector else None)
    assert store.get(["ghost"]) == {} and store.count() == len(FIXTURE)


def test_vectors_are_read_back_as_written(filled: tuple[MemoryStore, np.ndarray]) -> None:
    store, vectors = filled
    found = store.vectors(["a1", "b1", "ghost"])
    assert found.keys() == {"a1", "b1"}
    np.testing.assert_allclose(found["a1"], vectors[0], atol=1e-6)
    assert found["a1"].dtype == np.float32 and found["a1"].shape == (vectors.shape[1],)
    assert store.vectors([]) == {}


def test_rekey_moves_the_memory_to_its_new_id_in_one_write(
    filled: tuple[MemoryStore, np.ndarray],
) -> None:
    store, vectors = filled
    moved = dataclasses.replace(FIXTURE[0], memory_id="a1-new", content="alice now likes oolong")
    store.rekey("a1", moved, vectors[5])
    assert store.get(["a1", "a1-new"]) == {"a1-new": moved}
    assert store.count() == len(FIXTURE)
    assert store.score_ids(vectors[5], ["a1-new"], SearchFilters())[0].score == pytest.approx(
        1.0, abs=1e-5
    )
    assert store.text_search("oolong", SearchFilters(), 5)[0].memory.memory_id == "a1-new"
    with pytest.raises(NotFound):
        store.rekey("a1", dataclasses.replace(moved, memory_id="a1-other"), vectors[0])
    assert store.get(["a1-other"]) == {} and store.count() == len(FIXTURE)


def test_delete_counts_what_existed_and_is_idempotent(
    filled: tuple[MemoryStore, np.ndarray],
) -> None:
    store, _ = filled
    assert store.delete(["a1", "b1", "nope"]) == 2
    assert store.delete(["a1", "b1"]) == 0
    assert store.delete([]) == 0
    assert store.get(["a1", "b1", "a2"]).keys() == {"a2"}
    assert store.count() == len(FIXTURE) - 2


# -- filters ------------------------------------------------------------------------

FILTER_CASES = [
    (SearchFilters(), {"a1", "a2", "a3", "b1", "b2", "s1"}),
    (SearchFilters(owner="alice"), {"a1", "a2", "a3", "s1"}),
    (SearchFilters(owner="alice", include_shared=False), {"a1", "a2", "a3"}),
    (SearchFilters(owner=SHARED_OWNER), {"s1"}),
    (SearchFilters(owner="carol"), {"s1"}),
    (SearchFilters(tags=("zoo", "nothing")), {"a3"}),
    (SearchFilters(tags=("drink",)), {"a1", "a3", "b1"}),
    (SearchFilters(kinds=("chunk",)), {"a2"}),
    (SearchFilters(sources=("chat", "docs")), {"a1", "a2", "b1", "s1"}),
    # event_time counts where set (a3 happened ten days before T0), else created_at.
    (SearchFilters(since=T0 + timedelta(days=2)), {"b2"}),
    (SearchFilters(until=T0 - timedelta(days=1)), {"a3"}),
    (SearchFilters(since=T0, until=T0), {"a1", "a2", "b1", "s1"}),
    (SearchFilters(memory_ids=("a1", "b2", "nope")), {"a1", "b2"}),
    (SearchFilters(memory_ids=()), set()),
    (SearchFilters(owner="bob", tags=("drink",), sources=("chat",)), {"b1"}),
    (SearchFilters(owner="bob", kinds=("chunk",)), set()),
    # Conversations by doc_id; memories without one are never excluded.
    (SearchFilters(doc_ids=("conv-1", "nope")), {"a1"}),
    (SearchFilters(exclude_doc_ids=("conv-1",)), {"a2", "a3", "b1", "b2", "s1"}),
    (SearchFilters(owner="bob", exclude_doc_ids=("conv-2", "conv-1")), {"b2", "s1"}),
    # Paths: a chunk's source, memory/<id>.md for the rest; * spans "/", _ and % are literal.
    (SearchFilters(paths=("docs",)), {"a2"}),
    (SearchFilters(paths=("memory/*.md",)), {"a1", "a3", "b1", "b2", "s1"}),
    (SearchFilters(paths=("memory/a*", "d*s")), {"a1", "a2", "a3"}),
    (SearchFilters(paths=("memory/a_.md", "d%s", "*/b1.md")), {"b1"}),
]


@pytest.mark.parametrize(("filters", "expected"), FILTER_CASES)
def test_every_read_applies_the_filters_exactly(
    filled: tuple[MemoryStore, np.ndarray], filters: SearchFilters, expected: set[str]
) -> None:
    store, vectors = filled
    assert set(store.ids_of(filters)) == expected and len(store.ids_of(filters)) == len(expected)
    assert store.count(filters) == len(expected)
    assert store.start_count(filters).result() == len(expected)
    assert {m.memory_id for m in store.select(filters, 100)} == expected
    assert {m.memory_id for m in store.page(filters, 100)} == expected
    assert {m.memory_id for batch, _ in store.scan(filters) for m in batch} == expected
    found = store.vector_search(vectors[0], filters, 100)
    assert {s.memory.memory_id for s in found} == expected
    everyone = store.ids_of(SearchFilters())
    assert {s.memory.memory_id for s in store.score_ids(vectors[0], everyone, filters)} == expected
    (nearest,) = store.nearest([(vectors[:1], filters)])
    if expected:
        assert nearest[0] is not None and nearest[0][0] == found[0].memory.memory_id
        assert nearest[0][1] == pytest.approx(found[0].score, abs=1e-5)
    else:
        assert nearest == [None]
    # Every fixture memory has one of these words.
    texts = store.text_search("alice bob office", filters, 100)
    assert {s.memory.memory_id for s in texts} == expected


def test_a_time_filter_without_a_zone_is_invalid_input(
    filled: tuple[MemoryStore, np.ndarray],
) -> None:
    store, _ = filled
    with pytest.raises(InvalidInput):
        store.count(SearchFilters(since=datetime(2024, 1, 1)))
    with pytest.raises(InvalidInput):
        store.ids_of(SearchFilters(until=datetime(2024, 1, 1)))


# -- vector search --------------------------------------------------------------------


def test_vector_search_is_best_first_by_cosine_in_range(
    filled: tuple[MemoryStore, np.ndarray],
) -> None:
    store, vectors = filled
    query = _unit(1, seed=7)[0]
    found = store.vector_search(query, SearchFilters(), 4)
    expected = sorted(zip(vectors @ query, [m.memory_id for m in FIXTURE], strict=True))[::-1]
    assert [s.memory.memory_id for s in found] == [i for _, i in expected[:4]]
    assert [s.score for s in found] == pytest.approx([float(c) for c, _ in expected[:4]], abs=1e-5)
    assert all(-1.0 - 1e-5 <= s.score <= 1.0 + 1e-5 for s in found)


def test_vector_search_scores_an_opposite_vector_minus_one(
    filled: tuple[MemoryStore, np.ndarray],
) -> None:
    store, vectors = filled
    found = store.vector_search(-vectors[2], SearchFilters(memory_ids=("a3",)), 5)
    assert [s.memory.memory_id for s in found] == ["a3"]
    assert found[0].score == pytest.approx(-1.0, abs=1e-5)


def test_start_vector_search_answers_as_vector_search(
    filled: tuple[MemoryStore, np.ndarray],
) -> None:
    store, vectors = filled
    bob = SearchFilters(owner="bob")
    future = store.start_vector_search(vectors[4], bob, 2, passing=3)
    assert future.result() == store.vector_search(vectors[4], bob, 2)
    assert len(future.result()) == 2 and future.result()[0].memory.memory_id == "b2"


def test_vector_search_of_an_empty_store_is_empty(store: MemoryStore) -> None:
    assert store.vector_search(_unit(1)[0], SearchFilters(), 5) == []


def test_nearest_answers_per_group_per_row(filled: tuple[MemoryStore, np.ndarray]) -> None:
    store, vectors = filled
    alice = SearchFilters(owner="alice", include_shared=False)
    nobody = SearchFilters(owner="nobody", include_shared=False)
    twins = np.asarray(vectors[[0, 2]] + 0.01, dtype=np.float32)
    first, missing, empty = store.nearest([(twins, alice), (twins, nobody), (twins[:0], alice)])
    assert [hit[0] for hit in first if hit] == ["a1", "a3"]
    assert all(hit is not None and 0.99 < hit[1] <= 1.0 + 1e-5 for hit in first)
    assert missing == [None, None] and empty == []


def test_score_ids_scores_only_listed_visible_ids_best_first(
    filled: tuple[MemoryStore, np.ndarray],
) -> None:
    store, vectors = filled
    found = store.score_ids(vectors[3], ["b1", "a1", "s1", "nope"], SearchFilters(owner="bob"))
    assert {s.memory.memory_id for s in found} == {"b1", "s1"}
    assert found[0].memory.memory_id == "b1" and found[0].score == pytest.approx(1.0, abs=1e-5)
    assert found[1].score == pytest.approx(float(vectors[5] @ vectors[3]), abs=1e-5)
    assert store.score_ids(vectors[3], [], SearchFilters()) == []


# -- full-text search -----------------------------------------------------------------


def test_text_search_finds_a_rare_word_case_insensitively(
    filled: tuple[MemoryStore, np.ndarray],
) -> None:
    store, _ = filled
    found = store.text_search("ZEBRA", SearchFilters(), 10)
    assert [s.memory.memory_id for s in found] == ["a3"] and found[0].score > 0


def test_text_search_ranks_the_higher_bm25_first(store: MemoryStore) -> None:
    memories = [
        _memory("long", "a quokka appeared once in this very long note about many other things"),
        _memory("dense", "quokka quokka quokka"),
        _memory("other", "nothing to see here"),
    ]
    vectors = _unit(3)
    store.add(memories, vectors)
    found = store.text_search("quokka", SearchFilters(), 10)
    assert [s.memory.memory_id for s in found] == ["dense", "long"]
    assert found[0].score > found[1].score > 0
    scores = store.start_text_scores("quokka", SearchFilters(), 10).result()
    assert all(s.ref is not None for s in found)
    assert scores == [(s.ref, s.score) for s in found]
    # The vector search names the same rows by the same references.
    nearest = store.vector_search(vectors[0], SearchFilters(), 20)
    by_ref = {s.ref: s.memory.memory_id for s in nearest}
    assert all(by_ref[ref] == s.memory.memory_id for (ref, _), s in zip(scores, found, strict=True))
    assert store.start_text_search("quokka", SearchFilters(), 1).result() == found[:1]


def test_text_search_misses_are_empty(filled: tuple[MemoryStore, np.ndarray]) -> None:
    store, _ = filled
    assert store.text_search("xylophone", SearchFilters(), 10) == []
    assert store.text_search("   ", SearchFilters(), 10) == []
    assert store.start_text_scores("", SearchFilters(), 10).result() == []
    assert store.text_search("zebra", SearchFilters(owner="bob"), 10) == []


# -- paging, scanning, counting ---------------------------------------------------------


def test_page_walks_every_id_in_order_by_keyset(filled: tuple[MemoryStore, np.ndarray]) -> None:
    store, _ = filled
    seen: list[str] = []
    after: str | None = None
    while page := store.page(SearchFilters(), 4, after=after):
        seen.extend(m.memory_id for m in page)
        after = page[-1].memory_id
    assert seen == sorted(m.memory_id for m in FIXTURE)
    assert store.page(SearchFilters(), 4, after="zzz") == []
    assert [m.memory_id for m in store.page(SearchFilters(owner="bob"), 10, after="b1")] == [
        "b2",
        "s1",
    ]


def test_select_honours_its_limit(filled: tuple[MemoryStore, np.ndarray]) -> None:
    store, _ = filled
    assert len(store.select(SearchFilters(), 2)) == 2
    assert store.select(SearchFilters(owner="nobody", include_shared=False), 5) == []


def test_scan_yields_every_memory_once_with_its_stored_vector(
    filled: tuple[MemoryStore, np.ndarray],
) -> None:
    store, vectors = filled
    batches = list(store.scan(batch_size=4))
    assert all(0 < len(memories) <= 4 for memories, _ in batches)
    by_id = {
        m.memory_id: (m, row)
        for memories, rows in batches
        for m, row in zip(memories, rows, strict=True)
    }
    assert len(by_id) == sum(len(memories) for memories, _ in batches) == len(FIXTURE)
    for memory, vector in zip(FIXTURE, vectors, strict=True):
        stored, row = by_id[memory.memory_id]
        assert stored == memory and row.dtype == np.float32
        np.testing.assert_array_equal(row, vector)


def test_scan_of_an_empty_store_yields_nothing_and_checks_its_batch_size(
    store: MemoryStore,
) -> None:
    assert list(store.scan()) == []
    with pytest.raises(InvalidInput):
        list(store.scan(batch_size=0))


def test_group_counts_per_owner_and_kind(filled: tuple[MemoryStore, np.ndarray]) -> None:
    store, _ = filled
    assert store.group_counts("owner") == {"alice": 3, "bob": 2, SHARED_OWNER: 1}
    assert store.group_counts("kind") == {"fact": 5, "chunk": 1}
    with pytest.raises(InvalidInput):
        store.group_counts("content")  # type: ignore[arg-type]


# -- maintenance, copies, diagnostics ---------------------------------------------------


def test_optimize_changes_no_answer(filled: tuple[MemoryStore, np.ndarray]) -> None:
    store, vectors = filled

    def answers() -> tuple[list[str], dict[str, float]]:
        by_vector = store.vector_search(vectors[4], SearchFilters(), 6)
        by_text = store.text_search("alice", SearchFilters(), 6)
        return [s.memory.memory_id for s in by_vector], {
            s.memory.memory_id: round(s.score, 4) for s in by_text
        }

    before = answers()
    store.optimize()
    store.refresh()
    assert answers() == before
    health = store.health()
    assert set(health) == {"fragments", "small_fragments", "unindexed_rows", "versions"}
    assert all(isinstance(v, int) and v >= 0 for v in health.values())
    assert store.index_state()["fts"] is True and set(store.index_state()) == {"fts", "ann"}


def test_copy_to_is_a_snapshot_with_the_same_memories_and_vectors(
    opened: tuple[MemoryStore, Opener], tmp_path: Path
) -> None:
    store, open_store = opened
    vectors = _unit(len(FIXTURE))
    store.add(FIXTURE, vectors)
    copied = store.copy_to(str(tmp_path / "copy"))
    version = store.version
    store.delete(["a1"])
    store.add([_memory("late", "written after the copy")], _unit(1, seed=3))
    assert copied.version == version and sorted(copied.memory_ids) == sorted(
        m.memory_id for m in FIXTURE
    )
    copy = open_store(str(tmp_path / "copy"))
    try:
        assert copy.get([m.memory_id for m in FIXTURE] + ["late"]) == {
            m.memory_id: m for m in FIXTURE
        }
        assert copy.text_search("zebra", SearchFilters(), 5)[0].memory.memory_id == "a3"
        (best,) = copy.vector_search(vectors[0], SearchFilters(), 1)
        assert best.memory.memory_id == "a1" and best.score == pytest.approx(1.0, abs=1e-5)
    finally:
        copy.close()


def test_reads_still_work_after_close(filled: tuple[MemoryStore, np.ndarray]) -> None:
    store, _ = filled
    store.close()
    assert store.count() == len(FIXTURE)


# -- the Embedder contract ------------------------------------------------------------


@pytest.fixture(params=["fastembed", "hash"])
def any_embedder(request: pytest.FixtureRequest, embedder: FastEmbedEmbedder) -> Embedder:
    return embedder if request.param == "fastembed" else HashEmbedder()


TEXTS = ["I like green tea", "The server crashed on Friday night", "", "matcha"]


@pytest.mark.parametrize("query", [False, True])
def test_embed_batch_is_float32_unit_rows_in_input_order(
    any_embedder: Embedder, query: bool
) -> None:
    batch = any_embedder.embed_batch(TEXTS, query=query)
    assert batch.shape == (len(TEXTS), any_embedder.dim) and batch.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(batch, axis=1), 1.0, atol=1e-5)
    singles = np.stack([any_embedder.embed(t, query=query) for t in TEXTS])
    assert singles.shape == batch.shape and singles.dtype == np.float32
    np.testing.assert_allclose(singles, batch, atol=1e-4)
    np.testing.assert_allclose(any_embedder.embed_batch(TEXTS, query=query), batch, atol=1e-5)


def test_an_empty_batch_has_the_model_dimension(any_embedder: Embedder) -> None:
    assert any_embedder.embed_batch([]).shape == (0, any_embedder.dim)
    assert isinstance(any_embedder.model_id, str) and any_embedder.model_id


def test_a_query_embedding_is_nearest_to_the_text_it_asks_about(any_embedder: Embedder) -> None:
    documents = any_embedder.embed_batch(
        ["Priya moved to Lisbon in May", "The billing service uses PostgreSQL", "green tea"]
    )
    query = any_embedder.embed("which database does the billing service use", query=True)
    similarity = documents @ query
    assert int(np.argmax(similarity)) == 1
    assert all(-1.0 - 1e-5 <= s <= 1.0 + 1e-5 for s in similarity)

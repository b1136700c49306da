"""Searches read row ids and scores, and whole memories only for their hits (issue 30).

What a user relies on: whatever a search keeps of the rows it read, it never
answers with a memory as it was before an update, a compaction or a delete,
nor with a count from before a write.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
from builders import stored_memory

from tribal_memory.base.models import Memory, SearchFilters
from tribal_memory.store.base import load_memories
from tribal_memory.store.lancedb import LanceMemoryStore

DIM = 16


def _memory(
    memory_id: str, content: str, *, doc_id: str | None = None, at: int | None = None
) -> Memory:
    return stored_memory(
        memory_id,
        content,
        tags=("t",),
        source="src",
        doc_id=doc_id,
        chunk_index=at,
        metadata={"n": 1},
    )


def _store(tmp_path: Path, rows: int = 40) -> tuple[LanceMemoryStore, list[Memory], np.ndarray]:
    store = LanceMemoryStore(str(tmp_path / "db"), "test-model", DIM)
    memories = [
        _memory(f"m{i}", f"fact number {i} about topic {i % 5}", doc_id=f"d{i // 10}", at=i % 10)
        for i in range(rows)
    ]
    vectors = np.random.default_rng(0).normal(size=(rows, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    store.add(memories, vectors)
    return store, memories, vectors


def test_a_search_answers_with_each_hit_as_stored(tmp_path: Path) -> None:
    store, memories, vectors = _store(tmp_path)
    by_id = {m.memory_id: m for m in memories}
    for found in (
        store.vector_search(vectors[3], SearchFilters(), 10),
        store.text_search("topic 2", SearchFilters(), 10),
    ):
        assert found
        for scored in found:  # the keys fusion reads agree with the whole memory
            memory = by_id[scored.memory_id]
            assert (scored.owner, scored.doc_id, scored.chunk_index) == (
                memory.owner,
                memory.doc_id,
                memory.chunk_index,
            )
        load_memories(found)
        assert [s.memory for s in found] == [by_id[s.memory_id] for s in found]


def test_a_search_after_an_update_answers_with_the_new_content(tmp_path: Path) -> None:
    store, memories, vectors = _store(tmp_path)
    before = store.vector_search(vectors[7], SearchFilters(), 5)
    assert before[0].memory == memories[7]  # read once, so kept by the store
    changed = dataclasses.replace(memories[7], content="rewritten fact", chunk_index=99)
    store.replace(changed, None)
    after = store.vector_search(vectors[7], SearchFilters(), 5)
    assert after[0].memory == changed
    assert after[0].chunk_index == 99
    assert [s.memory.content for s in store.text_search("rewritten", SearchFilters(), 5)] == [
        "rewritten fact"
    ]


def test_a_search_after_compaction_answers_as_before(tmp_path: Path) -> None:
    store, memories, vectors = _store(tmp_path, rows=20)
    more = [_memory(f"n{i}", f"later fact {i}") for i in range(20)]
    store.add(more, vectors)  # a second fragment
    before = store.vector_search(vectors[2], SearchFilters(), 10)
    load_memories(before)
    store.optimize()
    store.wait_for_maintenance(60)
    after = store.vector_search(vectors[2], SearchFilters(), 10)
    assert [(s.memory, s.score) for s in after] == [(s.memory, s.score) for s in before]


def test_a_hit_deleted_after_the_search_is_left_out(tmp_path: Path) -> None:
    store, memories, vectors = _store(tmp_path)
    found = store.vector_search(vectors[5], SearchFilters(), 3)
    assert found[0].memory_id == "m5" and not found[0].loaded
    store.delete(["m5"])
    load_memories(found)
    assert not found[0].loaded
    assert all(s.loaded for s in found[1:])
    assert "m5" not in {s.memory_id for s in store.vector_search(vectors[5], SearchFilters(), 3)}


def test_counts_follow_writes_of_this_handle_and_of_another(tmp_path: Path) -> None:
    store, memories, vectors = _store(tmp_path)
    filters = SearchFilters(owner="o", include_shared=False)
    assert store.start_count(filters).result() == 40
    store.add([_memory("x", "one more fact")], vectors[:1])
    assert store.start_count(filters).result() == 41
    store.delete(["x", "m0"])
    assert store.start_count(filters).result() == 39
    other = LanceMemoryStore(str(tmp_path / "db"), "test-model", DIM)
    other.add([_memory("y", "from another process")], vectors[:1])
    store.refresh()
    assert store.start_count(filters).result() == 40


def test_a_hit_read_again_by_id_is_the_memory_as_stored_now(tmp_path: Path) -> None:
    store, memories, vectors = _store(tmp_path)
    load_memories(store.vector_search(vectors[7], SearchFilters(), 3))  # kept by row id
    assert store.get(["m7", "m8", "nope"]) == {"m7": memories[7], "m8": memories[8]}
    changed = dataclasses.replace(memories[7], content="rewritten fact")
    store.replace(changed, None)
    assert store.get(["m7"]) == {"m7": changed}
    other = LanceMemoryStore(str(tmp_path / "db"), "test-model", DIM)
    again = dataclasses.replace(memories[7], content="rewritten by another process")
    other.replace(again, None)
    store.refresh()
    assert store.get(["m7"]) == {"m7": again}
    store.optimize()  # every row moves
    store.wait_for_maintenance(60)
    assert store.get(["m7", "m8"]) == {"m7": again, "m8": memories[8]}
    other.delete(["m8"])
    store.refresh()
    store.delete(["m7"])
    assert store.get(["m7", "m8"]) == {}

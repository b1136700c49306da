"""LanceDB store: filters, model recording, contract behaviour."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from tribal_memory.errors import EmbeddingModelMismatch
from tribal_memory.models import Memory, SearchFilters
from tribal_memory.store.lancedb import LanceMemoryStore, filter_sql


def _memory(memory_id: str, content: str, owner: str = "o") -> Memory:
    now = datetime.now(UTC)
    return Memory(memory_id, content, owner, "fact", ("t",), "src", None, None, None, now, now,
                  None, "", {"k": 1})


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

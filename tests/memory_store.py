"""An in-memory MemoryStore for unit tests, and a deterministic hashing Embedder.

``InMemoryStore`` keeps memories in a dict: brute-force cosine similarity for
vector search, Okapi BM25 (k1 = 1.2, b = 0.75, Lucene's idf) over lower-cased
word tokens for full-text search, no stemming and no stop words (LanceDB
stems English and skips stop words; the contract suite avoids both).
Filters are applied as ``tribal_memory.store.lance_rows.filter_sql`` does.

``HashEmbedder`` maps each word to a fixed random direction and sums them:
texts sharing words are similar, and the same text always gives the same
vector, with no model to load.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from concurrent.futures import Future
from datetime import UTC, datetime
from typing import Literal, TypeVar

import numpy as np

from tribal_memory.base.errors import InvalidInput, NotFound
from tribal_memory.base.models import SHARED_OWNER, Memory, SearchFilters, path_matches
from tribal_memory.embeddings.base import Embedder, Vector
from tribal_memory.store.base import MemoryStore, RowRef, ScoredMemory, StoreCopy

_T = TypeVar("_T")
_WORD = re.compile(r"\w+")
_K1 = 1.2
_B = 0.75


def _done(value: _T) -> Future[_T]:
    future: Future[_T] = Future()
    future.set_result(value)
    return future


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _utc(value: datetime) -> datetime:
    if value.tzinfo is None:
        raise InvalidInput("time filters need a timezone (e.g. 2024-01-01T00:00:00Z)")
    return value.astimezone(UTC)


def passes(memory: Memory, filters: SearchFilters) -> bool:
    """Whether ``memory`` passes ``filters`` (the rules of ``filter_sql``)."""
    if filters.owner is not None:
        shared = filters.include_shared and filters.owner != SHARED_OWNER
        if memory.owner != filters.owner and not (shared and memory.owner == SHARED_OWNER):
            return False
    if filters.tags and not set(filters.tags) & set(memory.tags):
        return False
    if filters.kinds and memory.kind not in filters.kinds:
        return False
    if filters.sources and memory.source not in filters.sources:
        return False
    when = memory.event_time or memory.created_at
    if filters.since is not None and when < _utc(filters.since):
        return False
    if filters.until is not None and when > _utc(filters.until):
        return False
    if filters.doc_ids and memory.doc_id not in filters.doc_ids:
        return False
    if memory.doc_id is not None and memory.doc_id in filters.exclude_doc_ids:
        return False
    if filters.paths:
        chunk = memory.kind == "chunk" and memory.source is not None
        path = memory.source if chunk else f"memory/{memory.memory_id}.md"
        if not path_matches(path or "", filters.paths):
            return False
    return filters.memory_ids is None or memory.memory_id in filters.memory_ids


class InMemoryStore(MemoryStore):
    """A :class:`MemoryStore` in a dict; ``copy_to`` targets live in :attr:`copies`."""

    copies: dict[str, InMemoryStore] = {}  # the process-wide "disk" of copies

    def __init__(self, model_id: str, dim: int) -> None:
        self.model_id = model_id
        self.dim = dim
        self._rows: dict[str, tuple[Memory, Vector]] = {}
        self._version = 1

    @property
    def version(self) -> int:
        return self._version

    def _passing(self, filters: SearchFilters | None) -> list[tuple[Memory, Vector]]:
        if filters is None:
            return list(self._rows.values())
        # Checked first, as the SQL translation does, even when the store is empty.
        for bound in (filters.since, filters.until):
            if bound is not None:
                _utc(bound)
        return [(m, v) for m, v in self._rows.values() if passes(m, filters)]

    # -- writes -----------------------------------------------------------------

    def add(self, memories: Sequence[Memory], vectors: Vector) -> None:
        if not memories:
            return
        if vectors.shape != (len(memories), self.dim):
            raise InvalidInput(
                f"expected vectors of shape ({len(memories)}, {self.dim}), got {vectors.shape}"
            )
        for memory, vector in zip(memories, vectors, strict=True):
            self._rows[memory.memory_id] = (memory, np.array(vector, dtype=np.float32))
        self._version += 1

    def replace(self, memory: Memory, vector: Vector | None) -> None:
        stored = self._rows.get(memory.memory_id)
        if stored is None:
            raise NotFound(f"no memory with id {memory.memory_id}")
        kept = stored[1] if vector is None else np.array(vector, dtype=np.float32)
        self._rows[memory.memory_id] = (memory, kept)
        self._version += 1

    def rekey(self, old_id: str, memory: Memory, vector: Vector) -> None:
        if self._rows.pop(old_id, None) is None:
            raise NotFound(f"no memory with id {old_id}")
        self._rows[memory.memory_id] = (memory, np.array(vector, dtype=np.float32))
        self._version += 1

    def delete(self, memory_ids: Sequence[str]) -> int:
        gone = [i for i in set(memory_ids) if self._rows.pop(i, None) is not None]
        if gone:
            self._version += 1
        return len(gone)

    # -- reads by id and filter -------------------------------------------------

    def get(self, memory_ids: Sequence[str]) -> dict[str, Memory]:
        return {i: self._rows[i][0] for i in memory_ids if i in self._rows}

    def select(self, filters: SearchFilters, limit: int) -> list[Memory]:
        return [m for m, _ in self._passing(filters)][:limit]

    def page(self, filters: SearchFilters, limit: int, *, after: str | None = None) -> list[Memory]:
        found = sorted((m for m, _ in self._passing(filters)), key=lambda m: m.memory_id)
        return [m for m in found if after is None or m.memory_id > after][:limit]

    def ids_of(self, filters: SearchFilters) -> list[str]:
        return [m.memory_id for m, _ in self._passing(filters)]

    def start_count(self, filters: SearchFilters | None = None) -> Future[int]:
        return _done(len(self._passing(filters)))

    def group_counts(self, column: Literal["owner", "kind"]) -> dict[str, int]:
        if column not in ("owner", "kind"):
            raise InvalidInput(f"cannot group by {column!r}")
        return dict(Counter(getattr(m, column) for m, _ in self._rows.values()))

    def scan(
        self, filters: SearchFilters | None = None, *, batch_size: int = 512
    ) -> Iterator[tuple[list[Memory], Vector]]:
        if batch_size < 1:
            raise InvalidInput("batch_size must be at least 1")
        rows = self._passing(filters)
        for start in range(0, len(rows), batch_size):
            batch = rows[start : start + batch_size]
            yield [m for m, _ in batch], np.stack([v for _, v in batch])

    # -- vector search ------------------------------------------------------------

    @staticmethod
    def _cosine(vector: Vector, rows: Sequence[tuple[Memory, Vector]]) -> list[ScoredMemory]:
        query = np.asarray(vector, dtype=np.float32)
        scored = [
            ScoredMemory(
                m, float(v @ query / (np.linalg.norm(v) * np.linalg.norm(query))), m.memory_id
            )
            for m, v in rows
        ]
        return sorted(scored, key=lambda s: -s.score)

    def start_vector_search(
        self, vector: Vector, filters: SearchFilters, k: int, *, passing: int | None = None
    ) -> Future[list[ScoredMemory]]:
        return _done(self._cosine(vector, self._passing(filters))[:k])

    def nearest(
        self, groups: Sequence[tuple[Vector, SearchFilters]]
    ) -> list[list[tuple[str, float] | None]]:
        answers: list[list[tuple[str, float] | None]] = []
        for vectors, filters in groups:
            rows = self._passing(filters)
            found: list[tuple[str, float] | None] = []
            for vector in vectors:
                best = self._cosine(vector, rows)[:1]
                found.append((best[0].memory.memory_id, best[0].score) if best else None)
            answers.append(found)
        return answers

    def vectors(self, memory_ids: Sequence[str]) -> dict[str, Vector]:
        return {i: self._rows[i][1].copy() for i in memory_ids if i in self._rows}

    def score_ids(
        self, vector: Vector, memory_ids: Sequence[str], filters: SearchFilters
    ) -> list[ScoredMemory]:
        wanted = set(memory_ids)
        rows = [(m, v) for m, v in self._passing(filters) if m.memory_id in wanted]
        return self._cosine(vector, rows)

    # -- full-text search ---------------------------------------------------------

    def _bm25(self, query: str, filters: SearchFilters, k: int) -> list[ScoredMemory]:
        """Okapi BM25 with idf ``ln(1 + (N - n + 0.5) / (n + 0.5))`` over the whole store."""
        terms = set(_words(query))
        if not terms:
            return []
        documents = {i: Counter(_words(m.content)) for i, (m, _) in self._rows.items()}
        total = len(documents)
        average = sum(sum(d.values()) for d in documents.values()) / max(1, total)
        idf = {
            t: math.log(1 + (total - n + 0.5) / (n + 0.5))
            for t in terms
            for n in [sum(1 for d in documents.values() if t in d)]
        }
        found = []
        for memory, _ in self._passing(filters):
            words = documents[memory.memory_id]
            length = sum(words.values())
            score = sum(
                idf[t] * words[t] * (_K1 + 1) / (words[t] + _K1 * (1 - _B + _B * length / average))
                for t in terms
                if t in words
            )
            if score > 0:
                found.append(ScoredMemory(memory, score, memory.memory_id))
        return sorted(found, key=lambda s: -s.score)[:k]

    def start_text_search(
        self, query: str, filters: SearchFilters, k: int
    ) -> Future[list[ScoredMemory]]:
        return _done(self._bm25(query, filters, k))

    def start_text_scores(
        self, query: str, filters: SearchFilters, k: int
    ) -> Future[list[tuple[RowRef, float]]]:
        return _done([(s.memory.memory_id, s.score) for s in self._bm25(query, filters, k)])

    # -- versions, maintenance, diagnostics ---------------------------------------

    def refresh(self) -> None:
        return None  # one process, no other writer

    def index_state(self) -> dict[str, bool]:
        return {"fts": True, "ann": False}

    def health(self) -> dict[str, int]:
        return {"fragments": 0, "small_fragments": 0, "unindexed_rows": 0, "versions": 1}

    def cache_bytes(self) -> int:
        return 0  # the rows themselves are all it holds

    def optimize(self) -> None:
        return None  # nothing to compact

    def copy_to(self, target: str) -> StoreCopy:
        copy = InMemoryStore(self.model_id, self.dim)
        copy._rows = dict(self._rows)
        InMemoryStore.copies[target] = copy
        return StoreCopy(self._version, list(self._rows))

    def close(self) -> None:
        return None


class HashEmbedder(Embedder):
    """Deterministic bag-of-words vectors: each word a fixed random direction, summed, normalised.

    A text without words embeds as the first unit vector. ``query`` changes nothing.
    """

    def __init__(self, dim: int = 32) -> None:
        self.model_id = f"hash-{dim}"
        self.dim = dim

    def _word(self, word: str) -> Vector:
        seed = int.from_bytes(hashlib.sha256(word.encode()).digest()[:8], "big")
        return np.random.default_rng(seed).normal(size=self.dim).astype(np.float32)

    def embed_batch(self, texts: Sequence[str], *, query: bool = False) -> Vector:
        rows = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in zip(rows, texts, strict=True):
            for word in _words(text):
                row += self._word(word)
            norm = np.linalg.norm(row)
            if norm == 0:
                row[0] = 1.0
            else:
                row /= norm
        return rows

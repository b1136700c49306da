"""The memory store seam: where memories and their vectors live.

A store never embeds: the service hands it vectors. It returns raw candidates
(cosine similarity or BM25 score); fusion happens in :mod:`tribal_memory.retrieval.fusion`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Protocol

from tribal_memory.base.models import Memory, SearchFilters
from tribal_memory.embeddings.base import Vector


@dataclass(frozen=True, slots=True)
class ScoredMemory:
    """A candidate from one retrieval path.

    ``score`` is cosine similarity in [-1, 1] for vector search and a raw BM25
    score (>= 0, unbounded, higher is better) for full-text search.
    """

    memory: Memory
    score: float


class MemoryStore(Protocol):
    """Storage of memories with vector and full-text (BM25) search."""

    model_id: str
    dim: int

    def add(self, memories: Sequence[Memory], vectors: Vector) -> None:
        """Insert memories; ``vectors`` has shape ``(len(memories), dim)``.

        Raises:
            StoreUnavailable: the write failed; nothing of the batch is visible.
        """

    def replace(self, memory: Memory, vector: Vector | None) -> None:
        """Overwrite the stored memory with the same id (``vector`` None: keep the old one).

        Raises:
            NotFound: no memory with that id.
        """

    def delete(self, memory_ids: Sequence[str]) -> int:
        """Delete memories by id; returns how many existed. Unknown ids are ignored."""

    def get(self, memory_ids: Sequence[str]) -> dict[str, Memory]:
        """Memories by id; ids not stored are absent from the result (a miss is not an error)."""

    def vector_search(
        self, vector: Vector, filters: SearchFilters, k: int, *, passing: int | None = None
    ) -> list[ScoredMemory]:
        """Top ``k`` by cosine similarity to ``vector`` (shape ``(dim,)``), best first.

        ``passing``: the number of memories passing ``filters``, when the
        caller has just counted them (saves the store counting again).
        """

    def start_vector_search(
        self, vector: Vector, filters: SearchFilters, k: int, *, passing: int | None = None
    ) -> Future[list[ScoredMemory]]:
        """Start :meth:`vector_search` and return at once (overlap it with other work).

        Returns:
            A future whose ``result()`` is :meth:`vector_search`'s answer or raises its error.
        """

    def nearest(
        self, groups: Sequence[tuple[Vector, SearchFilters]]
    ) -> list[list[tuple[str, float] | None]]:
        """The nearest memory to each vector of each ``(vectors, filters)`` group.

        For each group, the memory passing ``filters`` most similar to each row
        of ``vectors`` (``(n, dim)``).

        For near-duplicate checks (one group per owner of a capture batch), so
        it may trade a little recall for speed (an approximate index searched
        narrowly) and may answer the groups concurrently.

        Returns:
            Per group, in group order: one ``(memory_id, cosine similarity in
            [-1, 1])`` per row, in row order; None for a row when no memory
            passes that group's ``filters``.
        """

    def score_ids(
        self, vector: Vector, memory_ids: Sequence[str], filters: SearchFilters
    ) -> list[ScoredMemory]:
        """Cosine similarity of ``vector`` to each listed memory that passes ``filters``.

        Ids that are not stored or not visible under ``filters`` are absent
        from the result (best first).
        """

    def text_search(self, query: str, filters: SearchFilters, k: int) -> list[ScoredMemory]:
        """Top ``k`` by BM25 over memory text, best first; [] when nothing matches."""

    def start_text_search(
        self, query: str, filters: SearchFilters, k: int
    ) -> Future[list[ScoredMemory]]:
        """Start :meth:`text_search` and return at once (overlap it with other work).

        Returns:
            A future whose ``result()`` is :meth:`text_search`'s answer or raises its error.
        """

    def start_text_scores(
        self, query: str, filters: SearchFilters, k: int
    ) -> Future[list[tuple[str, float]]]:
        """Start a BM25 search that answers ids only: ``[(memory_id, raw BM25)]``, best first.

        The same ranking as :meth:`text_search` without reading the memories
        (for query variants, whose hits are only scored); [] when nothing matches.
        """

    def select(self, filters: SearchFilters, limit: int) -> list[Memory]:
        """Up to ``limit`` memories passing ``filters``, unranked and in no set order.

        [] when none pass (a miss is not an error).
        """

    def page(self, filters: SearchFilters, limit: int, *, after: str | None = None) -> list[Memory]:
        """Up to ``limit`` memories passing ``filters`` whose id sorts after ``after``, by id.

        Keyset paging: the last id of one page, passed as ``after``, reads the
        next; memories written or deleted meanwhile do not shift the others.
        ``after`` None starts at the first id. [] past the end.
        """

    def ids_of(self, filters: SearchFilters) -> list[str]:
        """Ids of every memory passing ``filters`` (only that column is read); [] for none."""

    def count(self, filters: SearchFilters | None = None) -> int:
        """Number of memories passing ``filters`` (all memories when None)."""

    def start_count(self, filters: SearchFilters | None = None) -> Future[int]:
        """Start :meth:`count` and return at once; the future's ``result()`` is the count."""

    def scan(
        self, filters: SearchFilters | None = None, *, batch_size: int = 512
    ) -> Iterator[tuple[list[Memory], Vector]]:
        """Every memory passing ``filters`` (all when None) with its stored vector, in batches.

        Streams: at most one batch is held at a time, so a store of any size
        can be walked (export uses it). The order is the store's own and
        stable between calls while nothing is written; it is not sorted.

        Args:
            filters: Prefilter, as for search (None: every memory).
            batch_size: Most memories per batch (>= 1); batches may be smaller.

        Yields:
            ``(memories, vectors)`` with ``vectors`` of shape ``(len(memories), dim)``
            (float32, exactly as stored); an empty store yields nothing.

        Raises:
            StoreUnavailable: the store cannot be read (also mid-iteration).
        """

    def optimize(self) -> None:
        """Fold new rows into the indexes, compact files and drop old versions."""

    def close(self) -> None:
        """Finish background work (e.g. an automatic ``optimize()``); reads may follow.

        The service calls it when it closes, so that no maintenance runs on
        a data dir its user is about to move or delete.
        """

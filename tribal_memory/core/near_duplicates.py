"""Near-duplicates of a capture batch: the most similar memory of the same owner."""

from __future__ import annotations

from collections.abc import Sequence

from tribal_memory.base.models import Memory, SearchFilters
from tribal_memory.embeddings.base import Vector
from tribal_memory.store.base import MemoryStore


def find_near_duplicates(
    store: MemoryStore, memories: Sequence[Memory], vectors: Vector, *, threshold: float
) -> dict[str, tuple[str, float]]:
    """Most similar other memory of the same owner, stored or earlier in the batch.

    Args:
        store: Where the stored memories are (one :meth:`MemoryStore.nearest`
            call, one group per owner of the batch).
        memories: New memories, not stored yet.
        vectors: Their unit vectors, shape ``(len(memories), dim)``.
        threshold: Least cosine similarity that counts; 1.0 or more checks nothing.

    Returns:
        ``{new memory id: (similar memory id, cosine similarity in [threshold, 1])}``
        for the memories that have one; {} when none does.
    """
    if threshold >= 1.0 or not memories:
        return {}
    best: dict[str, tuple[str, float]] = {}

    def offer(memory_id: str, other_id: str, similarity: float) -> None:
        if similarity >= threshold and similarity > best.get(memory_id, ("", -1.0))[1]:
            best[memory_id] = (other_id, min(1.0, similarity))

    similarity = vectors @ vectors.T
    by_owner: dict[str, list[int]] = {}
    for i, memory in enumerate(memories):
        by_owner.setdefault(memory.owner, []).append(i)
    for positions in by_owner.values():
        for n, i in enumerate(positions):
            for j in positions[:n]:
                offer(memories[i].memory_id, memories[j].memory_id, float(similarity[i, j]))
    groups = [
        (vectors[positions], SearchFilters(owner=owner, include_shared=False))
        for owner, positions in by_owner.items()
    ]
    answers = store.nearest(groups)
    for positions, nearest in zip(by_owner.values(), answers, strict=True):
        for i, found in zip(positions, nearest, strict=True):
            if found is not None:
                offer(memories[i].memory_id, *found)
    return best

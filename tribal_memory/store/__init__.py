"""Memory stores: the :class:`MemoryStore` seam and its LanceDB implementation."""

from tribal_memory.store.base import MemoryStore, ScoredMemory
from tribal_memory.store.lancedb import LanceMemoryStore

__all__ = ["LanceMemoryStore", "MemoryStore", "ScoredMemory"]

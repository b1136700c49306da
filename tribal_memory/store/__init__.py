"""Memory stores: the :class:`MemoryStore` seam and its LanceDB implementation.

Code above this layer types against :class:`MemoryStore`; the service opens
the LanceDB store, and tools that need no embedding model (backup) open an
existing one with :func:`open_existing`.
"""

from tribal_memory.store.base import MemoryStore, RowRef, ScoredMemory, StoreCopy
from tribal_memory.store.lancedb import LanceMemoryStore


def open_existing(uri: str) -> MemoryStore | None:
    """The store at ``uri``, opened with the embedding model it records; None when there is none.

    No store is created when there is none (a missing local directory is, as
    LanceDB connects). The caller closes the store.

    Raises:
        StoreUnavailable: the location cannot be read.
    """
    return LanceMemoryStore.open_existing(uri)


__all__ = [
    "LanceMemoryStore",
    "MemoryStore",
    "RowRef",
    "ScoredMemory",
    "StoreCopy",
    "open_existing",
]

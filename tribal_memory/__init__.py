"""tribal-memory: a memory server for AI agents that learns from usage feedback.

The library API: open a :class:`MemoryService` over a :class:`Settings` and
capture, recall, search and relate memories.
"""

from typing import TYPE_CHECKING

from tribal_memory.base.config import Settings
from tribal_memory.base.errors import (
    Conflict,
    EmbeddingError,
    EmbeddingModelMismatch,
    InvalidInput,
    NotFound,
    StoreUnavailable,
    TooLarge,
    TribalError,
)
from tribal_memory.base.graph import (
    CommonNeighbor,
    Near,
    Neighbor,
    Relation,
    RelationInput,
    Traversal,
)
from tribal_memory.base.models import (
    SHARED_OWNER,
    CaptureResult,
    Memory,
    MemoryInput,
    MemoryPage,
    MemoryPatch,
    OwnerCleared,
    SearchFilters,
    StoreStats,
)
from tribal_memory.base.results import Hit, SearchResult

if TYPE_CHECKING:
    from tribal_memory.service.memory_service import MemoryService

__version__ = "0.1.0"

__all__ = [
    "SHARED_OWNER",
    "CaptureResult",
    "CommonNeighbor",
    "Conflict",
    "EmbeddingError",
    "EmbeddingModelMismatch",
    "Hit",
    "InvalidInput",
    "Memory",
    "MemoryInput",
    "MemoryPage",
    "MemoryPatch",
    "MemoryService",
    "Near",
    "Neighbor",
    "NotFound",
    "OwnerCleared",
    "Relation",
    "RelationInput",
    "SearchFilters",
    "SearchResult",
    "Settings",
    "StoreStats",
    "StoreUnavailable",
    "TooLarge",
    "Traversal",
    "TribalError",
    "__version__",
]


def __getattr__(name: str) -> object:
    """Import :class:`MemoryService` (and with it LanceDB) on first use only.

    Keeps ``tribal-memory --help`` and ``migrate`` fast (PEP 562).
    """
    if name == "MemoryService":
        from tribal_memory.service.memory_service import MemoryService

        return MemoryService
    raise AttributeError(f"module 'tribal_memory' has no attribute {name!r}")

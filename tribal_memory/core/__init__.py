"""The core every feature shares, with the write functions.

:class:`Core` holds settings, database, store, embedder, relation graph and
locks, and captures, writes, updates and deletes memories. Documents,
transfer and maintenance take a Core; only the interfaces see the
:class:`~tribal_memory.service.memory_service.MemoryService`.
"""

from tribal_memory.core.core import Core

__all__ = ["Core"]

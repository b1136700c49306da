"""The library's front door, one object over a store.

:class:`~.memory_service.MemoryService` opens a store and offers every
operation the interfaces call.
"""

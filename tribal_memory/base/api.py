"""The surface the library and the HTTP client share: :class:`MemoryAPI`.

:class:`~tribal_memory.service.memory_service.MemoryService` (in process) and
:class:`~tribal_memory.client.TribalMemoryClient` (over HTTP) both implement
it, with the same method names, keyword names and return types (the frozen
dataclasses of ``base/``), and raise the same :class:`~.errors.TribalError`
subclasses. mypy checks both against it; ``tests/test_client_contract.py``
runs one suite of scenarios over both, and fails when a public service
method is in neither :class:`MemoryAPI` nor :data:`LOCAL_ONLY`.

Arguments only an in-process caller can give (``learner``, ``for_owner``,
``shared_writable``: on a server the API key decides them) are left out
here; the service keeps them as keyword arguments with defaults.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from typing import Protocol, runtime_checkable

from tribal_memory.base.graph import CommonNeighbor, Near, Neighbor, Relation, RelationInput
from tribal_memory.base.models import (
    SHARED_OWNER,
    CaptureResult,
    DocumentInfo,
    DocumentResult,
    Memory,
    MemoryInput,
    MemoryPage,
    MemoryPatch,
    OwnerCleared,
    OwnerStats,
    SearchFilters,
    StoreStats,
)
from tribal_memory.base.results import (
    Anchor,
    FeedbackResult,
    LearnedParts,
    SearchMode,
    SearchResult,
    Variant,
)
from tribal_memory.base.stats import Bucket, RetrievalStats
from tribal_memory.base.transfer import ImportResult, OnConflict, Source

LOCAL_ONLY: frozenset[str] = frozenset(
    {
        # Resources and authentication of the process that holds the data dir.
        "authenticate",
        "close",
        # Writes of exact rows and vectors, bulk loads and maintenance: an
        # operator's tools, run where the data dir is (CLI, benchmarks).
        "write_memories",
        "get_many",
        "delete_many",
        "forget_cached",
        "optimize",
        "list_memories",
        "capture_all",
        "ingest_files",
        "watch_directory",
        "table_health",
        "check_consistency",
        # Retrieval events as the server's interfaces read them (agent tools).
        "retrieval",
        "session_memory_ids",
        # What the dashboard shows of one memory (its feedback and searches).
        "memory_history",
    }
)
"""Public :class:`MemoryService` methods the HTTP client does not offer, on purpose."""


@runtime_checkable
class MemoryAPI(Protocol):
    """Capture, search, feedback, graph, documents, transfer and stats of one instance.

    Each method means what the :class:`MemoryService` method of that name
    says (its docstring is the reference); ``owner=None`` means every owner
    (in-process, or an admin key / a server without authentication) and a
    non-admin key is held to its own owner by the server.
    """

    # -- memories ------------------------------------------------------------------

    def capture(self, item: MemoryInput) -> CaptureResult:
        """Store one memory, idempotently (``status`` ``created`` or ``exists``)."""
        ...

    def capture_batch(
        self, items: Sequence[MemoryInput], *, near_duplicates: bool = True
    ) -> list[CaptureResult]:
        """Store memories in one write (all or nothing), one result per item in order."""
        ...

    def get(self, memory_id: str, *, owner: str | None = None) -> Memory:
        """The memory with ``memory_id``; raises ``NotFound`` when not visible."""
        ...

    def update(
        self,
        memory_id: str,
        patch: MemoryPatch,
        *,
        owner: str | None = None,
        if_version: str | None = None,
    ) -> Memory:
        """Change fields of a memory; new content gives it a new id."""
        ...

    def delete(
        self, memory_id: str, *, owner: str | None = None, if_version: str | None = None
    ) -> None:
        """Delete a memory and everything pointing at it."""
        ...

    def list_page(
        self, filters: SearchFilters, *, limit: int | None = None, after: str | None = None
    ) -> MemoryPage:
        """One page of the memories passing ``filters``, by id."""
        ...

    def clear_owner(self, owner: str, *, confirm: str | None) -> OwnerCleared:
        """Delete all of ``owner``'s knowledge (``confirm`` must name it again)."""
        ...

    # -- retrieval -----------------------------------------------------------------

    def recall(
        self,
        query: str,
        *,
        k: int = 10,
        filters: SearchFilters | None = None,
        min_score: float = 0.0,
        learned: LearnedParts | None = None,
        context: bool = False,
        near: Near | None = None,
    ) -> SearchResult:
        """Embedding-similarity recall (``search`` in mode ``vector``)."""
        ...

    def search(
        self,
        query: str,
        *,
        k: int = 10,
        filters: SearchFilters | None = None,
        mode: SearchMode = "hybrid",
        min_score: float = 0.0,
        learned: LearnedParts | None = None,
        context: bool = False,
        near: Near | None = None,
    ) -> SearchResult:
        """Search in ``mode`` (hybrid: vector + BM25); hits best first, scores in [0, 1]."""
        ...

    def search_vector(
        self,
        vector: Sequence[float],
        *,
        k: int = 10,
        filters: SearchFilters | None = None,
        min_score: float = 0.0,
        near: Near | None = None,
    ) -> SearchResult:
        """Memories nearest to a raw embedding vector (cosine), best first."""
        ...

    def recall_with_feedback(
        self,
        query: str,
        *,
        k: int = 10,
        filters: SearchFilters | None = None,
        mode: SearchMode = "hybrid",
        min_score: float = 0.0,
        learned: LearnedParts | None = None,
        context: bool = False,
        session_id: str | None = None,
        near: Near | None = None,
    ) -> SearchResult:
        """``search``, logged for feedback: the result carries its ``retrieval_id``."""
        ...

    def record_usage_feedback(
        self, retrieval_id: str, used_ids: Sequence[str], *, owner: str | None = None
    ) -> FeedbackResult:
        """Report which memories of a logged retrieval were used."""
        ...

    def anchors(self, memory_id: str, *, owner: str | None = None) -> list[Anchor]:
        """Anchors of a memory, most used first."""
        ...

    def add_anchor(self, memory_id: str, text: str, *, owner: str | None = None) -> Anchor:
        """Attach a manual anchor (a question the memory answers)."""
        ...

    def remove_anchor(self, memory_id: str, text: str, *, owner: str | None = None) -> None:
        """Detach an anchor from a memory."""
        ...

    def pin_variant(self, owner: str, variant: Variant | None) -> None:
        """Pin ``owner`` to the A/B variant ``learned`` or ``baseline`` (None: unpin)."""
        ...

    def variant_for(self, owner: str) -> Variant:
        """The A/B variant that serves ``owner``."""
        ...

    # -- graph ---------------------------------------------------------------------

    def relate(
        self,
        source_id: str,
        target_id: str,
        type: str,
        *,
        weight: float = 1.0,
        owner: str | None = None,
    ) -> Relation:
        """Add (or re-weight) the edge ``source -[type]-> target``."""
        ...

    def relate_batch(
        self, edges: Sequence[RelationInput], *, owner: str | None = None
    ) -> list[Relation]:
        """Add or re-weight many edges in one write (all or nothing)."""
        ...

    def unrelate(
        self, source_id: str, target_id: str, type: str, *, owner: str | None = None
    ) -> None:
        """Remove one edge."""
        ...

    def relations(self, memory_id: str, *, owner: str | None = None) -> list[Relation]:
        """Edges touching the memory (either direction), newest first."""
        ...

    def neighbors(
        self,
        memory_id: str,
        *,
        steps: int = 1,
        owner: str | None = None,
        types: Sequence[str] = (),
        block: Sequence[str] = (),
    ) -> list[Neighbor]:
        """Memories within ``steps`` hops over relations, nearest first."""
        ...

    def intersection(
        self,
        memory_ids: Sequence[str],
        *,
        steps: int = 1,
        owner: str | None = None,
        types: Sequence[str] = (),
        block: Sequence[str] = (),
        limit: int | None = None,
    ) -> list[CommonNeighbor]:
        """Memories within ``steps`` hops of every one of ``memory_ids``."""
        ...

    # -- documents -----------------------------------------------------------------

    def ingest_document(
        self, path: str, data: bytes | str, *, owner: str = SHARED_OWNER
    ) -> DocumentResult:
        """Create, update or skip a document (.md, .markdown, .txt, .pdf) and its chunks."""
        ...

    def documents(self, *, owner: str | None = None) -> list[DocumentInfo]:
        """Ingested documents of ``owner`` and shared ones (None: all)."""
        ...

    def delete_document(self, path: str, *, owner: str | None = None) -> DocumentResult:
        """Delete a document with its chunks."""
        ...

    # -- export and import, statistics ---------------------------------------------

    def export_jsonl(
        self, *, owner: str | None = None, progress: Callable[[int], None] | None = None
    ) -> Iterator[str]:
        """This instance's data as JSON lines (each ends in a newline)."""
        ...

    def import_jsonl(
        self,
        source: Source,
        *,
        progress: Callable[[int, int], None] | None = None,
        on_conflict: OnConflict = "keep",
    ) -> ImportResult:
        """Import an export (all or nothing)."""
        ...

    def stats(self) -> StoreStats:
        """Counts per owner and kind, relation count, model, index state and table health."""
        ...

    def owner_stats(self, owner: str | None) -> OwnerStats:
        """What ``owner`` sees: its memory count, the shared count, its documents."""
        ...

    def retrieval_stats(
        self,
        *,
        owner: str | None = None,
        bucket: Bucket = "day",
        since: datetime | None = None,
    ) -> RetrievalStats:
        """Cache hit rate, usage rates per variant, expansion lift and a learning curve."""
        ...

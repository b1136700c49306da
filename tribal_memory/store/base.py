"""The memory store seam: where memories and their vectors live.

A store never embeds: the service hands it vectors. It returns raw candidates
(cosine similarity or BM25 score); fusion happens in :mod:`tribal_memory.retrieval.fusion`.

Every operation an implementation writes is one method; where callers want
both a blocking answer and one they can overlap with other work (a query
embedding, the other half of a hybrid search), the implementation writes the
``start_*`` method returning a future, and the blocking form is derived here
(``vector_search`` waits on ``start_vector_search``). Implementations subclass
:class:`MemoryStore` to inherit the derived methods.

Anchors (the learned layer's extra text per memory) are not stored here: they
live in SQL since migration 0006 (:mod:`tribal_memory.learned.anchors`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Literal, Protocol

from tribal_memory.base.errors import NotFound
from tribal_memory.base.models import Memory, SearchFilters
from tribal_memory.embeddings.base import Vector


class RowSource(Protocol):
    """Where a :meth:`ScoredMemory.deferred` candidate's whole memory is read from."""

    def memories(self, rows: Sequence[tuple[RowRef, str]]) -> dict[str, Memory]:
        """The memories of ``(ref, memory_id)`` rows, keyed by memory id, in one read.

        A row no longer stored (deleted since the search) is absent.

        Raises:
            StoreUnavailable: the read failed.
        """
        ...


class ScoredMemory:
    """A candidate from one retrieval path.

    ``score`` is cosine similarity in [-1, 1] for vector search and a raw BM25
    score (> 0, unbounded, higher is better) for full-text search. ``ref`` is
    the store's reference to the row it was read from, the one
    :meth:`MemoryStore.start_text_scores` answers with for that row (None
    where the store gives none, e.g. a memory made by a caller).

    ``memory_id``, ``owner``, ``doc_id`` and ``chunk_index`` are what fusion
    and neighbour smoothing read of every candidate. A store may answer with
    :meth:`deferred` candidates, whose whole :attr:`memory` is read only when
    asked for: a search reads it for the few candidates it returns
    (:func:`load_memories`, one read for all of them), not for the 150 and
    more of each path's pool.
    """

    __slots__ = (
        "_memory",
        "_source",
        "chunk_index",
        "doc_id",
        "memory_id",
        "owner",
        "ref",
        "score",
    )

    def __init__(self, memory: Memory, score: float, ref: RowRef | None = None) -> None:
        self._memory: Memory | None = memory
        self._source: RowSource | None = None
        self.memory_id = memory.memory_id
        self.owner = memory.owner
        self.doc_id = memory.doc_id
        self.chunk_index = memory.chunk_index
        self.score = score
        self.ref = ref

    @classmethod
    def deferred(cls, key: RowKey, score: float, ref: RowRef, source: RowSource) -> ScoredMemory:
        """A candidate whose memory is read from ``source`` when first asked for.

        Args:
            key: ``(memory_id, owner, doc_id, chunk_index)`` of the row.
            score: As in the class docstring.
            ref: The row's reference in ``source``.
            source: Where the whole memory is read from.
        """
        found = cls.__new__(cls)
        found._memory = None
        found._source = source
        found.memory_id, found.owner, found.doc_id, found.chunk_index = key
        found.score = score
        found.ref = ref
        return found

    @property
    def loaded(self) -> bool:
        """Whether :attr:`memory` is at hand (no read needed)."""
        return self._memory is not None

    @property
    def memory(self) -> Memory:
        """The whole memory (read from the store on first use for a deferred candidate).

        Raises:
            NotFound: the row was deleted since the search.
            StoreUnavailable: the read failed.
        """
        if self._memory is None:
            load_memories([self])
            if self._memory is None:
                raise NotFound(f"memory {self.memory_id} was deleted during the search")
        return self._memory

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ScoredMemory):
            return NotImplemented
        return (self.memory, self.score, self.ref) == (other.memory, other.score, other.ref)

    __hash__ = None  # type: ignore[assignment]  # as an eq dataclass holding a dict

    def __repr__(self) -> str:
        return f"ScoredMemory(memory_id={self.memory_id!r}, score={self.score!r}, ref={self.ref!r})"


RowKey = tuple[str, str, str | None, int | None]
"""``(memory_id, owner, doc_id, chunk_index)`` of a stored row."""


def load_memories(candidates: Iterable[ScoredMemory]) -> None:
    """Read the memories of the deferred ones among ``candidates``, one read per source.

    Afterwards each has its :attr:`~ScoredMemory.loaded` memory, except rows
    deleted since the search (their ``loaded`` stays False).

    Raises:
        StoreUnavailable: a read failed.
    """
    wanted: dict[int, tuple[RowSource, list[ScoredMemory]]] = {}
    for candidate in candidates:
        source = candidate._source
        if candidate._memory is None and source is not None and candidate.ref is not None:
            wanted.setdefault(id(source), (source, []))[1].append(candidate)
    for source, group in wanted.values():
        found = source.memories([(c.ref, c.memory_id) for c in group if c.ref is not None])
        for candidate in group:
            memory = found.get(candidate.memory_id)
            if memory is not None:
                candidate._memory, candidate._source = memory, None


RowRef = int | str
"""A store's reference to a stored row: LanceDB's row id, a memory id elsewhere.

Within one store, equal references are the same row. A reference from one
search matches another's while the row is stored as it was (LanceDB: not
rewritten by an update or a compaction in between).
"""


@dataclass(frozen=True, slots=True)
class StoreCopy:
    """What :meth:`MemoryStore.copy_to` copied.

    Attributes:
        version: The store version copied (see :attr:`MemoryStore.version`).
        memory_ids: Id of every memory copied, in the copy's order.
    """

    version: int
    memory_ids: list[str]


class MemoryStore(Protocol):
    """Storage of memories with vector (cosine) and full-text (BM25) search.

    Attributes:
        model_id: The embedding model the stored vectors come from.
        dim: Length of every stored vector.

    Memory ids are unique: callers never :meth:`add` an id already stored (the
    service checks under its capture lock). Every method taking
    :class:`SearchFilters` applies all of them exactly (owner with or without
    shared memories, tags, kinds, sources, the inclusive time range on
    ``event_time`` or else ``created_at``, ``memory_ids``).

    Errors: a time filter without a time zone raises ``InvalidInput``; a
    failure of the storage itself raises ``StoreUnavailable`` (the library's
    own exceptions never reach a caller).
    """

    model_id: str
    dim: int

    # -- writes -----------------------------------------------------------------

    def add(self, memories: Sequence[Memory], vectors: Vector) -> None:
        """Insert new memories; ``vectors`` has shape ``(len(memories), dim)``, row per memory.

        An empty batch writes nothing.

        Raises:
            InvalidInput: ``vectors`` has another shape.
            StoreUnavailable: the write failed; nothing of the batch is visible.
        """

    def replace(self, memory: Memory, vector: Vector | None) -> None:
        """Overwrite the stored memory with the same id.

        Args:
            memory: The new fields; its ``memory_id`` names the memory.
            vector: Its new vector (``(dim,)``); None keeps the stored one.

        Raises:
            NotFound: no memory with that id (nothing is written).
            StoreUnavailable: the write failed.
        """

    def rekey(self, old_id: str, memory: Memory, vector: Vector) -> None:
        """Replace the memory ``old_id`` by ``memory``, stored under its own new id, in one write.

        Readers see either the old memory or the new one, never both or neither.

        Args:
            old_id: The stored memory to replace.
            memory: The new fields; its ``memory_id`` (not stored yet) names it from now on.
            vector: Its vector, ``(dim,)``.

        Raises:
            NotFound: ``old_id`` is not stored (nothing is written).
            StoreUnavailable: the write failed.
        """

    def delete(self, memory_ids: Sequence[str]) -> int:
        """Delete memories by id; returns how many were stored. Unknown ids are ignored.

        Raises:
            StoreUnavailable: the write failed.
        """

    # -- reads by id and filter -------------------------------------------------

    def get(self, memory_ids: Sequence[str]) -> dict[str, Memory]:
        """Memories by id; ids not stored are absent from the result (a miss is not an error).

        Raises:
            StoreUnavailable: the read failed.
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
        """Ids of every memory passing ``filters``, in no set order; [] for none.

        Cheaper than reading the memories. An id stored twice (only a damaged
        store holds one; ``tribal-memory check`` reports it) is listed twice.
        """

    def start_count(self, filters: SearchFilters | None = None) -> Future[int]:
        """Start counting the memories passing ``filters`` (all when None); returns at once.

        Returns:
            A future whose ``result()`` is the count or raises ``StoreUnavailable``.
        """

    def count(self, filters: SearchFilters | None = None) -> int:
        """Number of memories passing ``filters`` (all memories when None)."""
        return self.start_count(filters).result()

    def group_counts(self, column: Literal["owner", "kind"]) -> dict[str, int]:
        """Memories per distinct value of ``column``; values no memory has are absent.

        Raises:
            InvalidInput: ``column`` is neither ``owner`` nor ``kind``.
        """

    def scan(
        self, filters: SearchFilters | None = None, *, batch_size: int = 512
    ) -> Iterator[tuple[list[Memory], Vector]]:
        """Every memory passing ``filters`` (all when None) with its stored vector, in batches.

        Streams: at most one batch is held at a time, so a store of any size
        can be walked (export uses it). The order is the store's own and
        stable between calls while nothing is written; it is not sorted.
        Every memory stored when the scan starts is yielded exactly once.

        Args:
            filters: Prefilter, as for search (None: every memory).
            batch_size: Most memories per batch (>= 1); batches may be smaller.

        Yields:
            ``(memories, vectors)`` with ``vectors`` of shape ``(len(memories), dim)``
            (float32, exactly as stored); an empty store yields nothing.

        Raises:
            InvalidInput: ``batch_size`` is below 1.
            StoreUnavailable: the store cannot be read (also mid-iteration).
        """

    # -- vector search ------------------------------------------------------------

    def start_vector_search(
        self, vector: Vector, filters: SearchFilters, k: int, *, passing: int | None = None
    ) -> Future[list[ScoredMemory]]:
        """Start the top-``k`` cosine search for ``vector`` (shape ``(dim,)``); returns at once.

        Args:
            vector: The query vector.
            filters: Only memories passing them are candidates.
            k: Most results.
            passing: The number of memories passing ``filters``, when the
                caller has just counted them (saves the store counting again).

        Returns:
            A future whose ``result()`` is up to ``k`` memories with their
            cosine similarity in [-1, 1], best first ([] when none pass), or
            raises the search's error.
        """

    def vector_search(
        self, vector: Vector, filters: SearchFilters, k: int, *, passing: int | None = None
    ) -> list[ScoredMemory]:
        """Top ``k`` by cosine similarity, best first; see :meth:`start_vector_search`."""
        return self.start_vector_search(vector, filters, k, passing=passing).result()

    def nearest(
        self, groups: Sequence[tuple[Vector, SearchFilters]]
    ) -> list[list[tuple[str, float] | None]]:
        """The nearest memory to each vector of each ``(vectors, filters)`` group.

        For each group, the memory passing ``filters`` most similar to each row
        of ``vectors`` (``(n, dim)``; ``n`` may be 0).

        For near-duplicate checks (one group per owner of a capture batch), so
        it may trade a little recall for speed (an approximate index searched
        narrowly) and may answer the groups concurrently.

        Returns:
            Per group, in group order: one ``(memory_id, cosine similarity in
            [-1, 1])`` per row, in row order; None for a row when no memory
            passes that group's ``filters``.
        """

    def vectors(self, memory_ids: Sequence[str]) -> dict[str, Vector]:
        """The stored vectors of these memories, each ``(dim,)`` float32 as written.

        Ids not stored are absent (a miss is not an error); {} for no ids.

        Raises:
            StoreUnavailable: the read failed.
        """

    def score_ids(
        self, vector: Vector, memory_ids: Sequence[str], filters: SearchFilters
    ) -> list[ScoredMemory]:
        """Cosine similarity of ``vector`` (``(dim,)``) to each listed memory passing ``filters``.

        Exact, whatever index the store has. Ids that are not stored or not
        visible under ``filters`` are absent from the result; best first.
        """

    # -- full-text search ---------------------------------------------------------

    def start_text_search(
        self, query: str, filters: SearchFilters, k: int
    ) -> Future[list[ScoredMemory]]:
        """Start the top-``k`` BM25 search of ``query`` over memory text; returns at once.

        Words are matched case-insensitively; the store may also stem them and
        skip stop words. A memory matching none of the words is not a result.

        Returns:
            A future whose ``result()`` is up to ``k`` memories with their raw
            BM25 score (> 0, higher is better), best first; [] when nothing
            matches or ``query`` is blank.
        """

    def text_search(self, query: str, filters: SearchFilters, k: int) -> list[ScoredMemory]:
        """Top ``k`` by BM25, best first; see :meth:`start_text_search`."""
        return self.start_text_search(query, filters, k).result()

    def start_text_scores(
        self, query: str, filters: SearchFilters, k: int
    ) -> Future[list[tuple[RowRef, float]]]:
        """Start a BM25 search that answers row references only: ``[(ref, raw BM25)]``.

        The same ranking as :meth:`start_text_search`, best first, without
        reading the memories (for query variants, whose evidence only counts
        for memories the query's own searches read: their
        :attr:`ScoredMemory.ref` names the same rows); [] when nothing matches.
        """

    # -- versions, maintenance, diagnostics ---------------------------------------

    @property
    def version(self) -> int:
        """The store's version: increases with every write, never decreases."""
        ...

    def refresh(self) -> None:
        """Read the newest version from now on, other processes' writes included.

        Reads may otherwise see another process's writes a moment late; a
        check-then-write that must not miss them (is this id stored yet?)
        calls this first. A no-op for a store no other process writes.

        Raises:
            StoreUnavailable: the store cannot be read.
        """

    def index_state(self) -> dict[str, bool]:
        """``{"fts": bool, "ann": bool}``: whether the BM25 and an approximate vector index exist.

        Searches answer correctly either way; without ``ann`` vector search is exact.
        """

    def health(self) -> dict[str, int]:
        """What slows reads: ``{"fragments", "small_fragments", "unindexed_rows", "versions"}``.

        Counts (>= 0) of storage files, small ones among them, rows some index
        lacks, and versions kept; a store without such structure reports 0
        (and 1 version). :meth:`optimize` brings them down.

        Raises:
            StoreUnavailable: the store cannot be read.
        """

    def cache_bytes(self) -> int:
        """Bytes of index and metadata data this handle keeps in memory (>= 0; 0: none kept).

        Part of the server's RSS that grows with searches up to a configured
        bound (``index_cache_mb``), not with the store's size.
        """

    def optimize(self) -> None:
        """Fold new rows into the indexes, compact storage and drop old versions.

        Reads and writes may go on meanwhile; results do not change.

        Raises:
            StoreUnavailable: the maintenance failed (nothing stored is lost).
        """

    def copy_to(self, target: str) -> StoreCopy:
        """Copy every memory and vector, as of now, into a new store at ``target``.

        A consistent snapshot: every write that returned before the call is
        in the copy, none made later is. The copy has this store's model and
        dimension and is opened like any store of its kind (backups use it).

        Args:
            target: Location of the new store, of the same kind as this one's
                (for LanceDB a directory or URI); it must hold no store yet.

        Raises:
            StoreUnavailable: this store cannot be read or the copy cannot be
                written (``target`` may hold a partial copy: write it into a
                temporary location and move it into place).
        """

    def close(self) -> None:
        """Finish background work (e.g. an automatic ``optimize()``); reads may follow.

        The service calls it when it closes, so that no maintenance runs on
        a data dir its user is about to move or delete.
        """

"""Ingesting files and folders: documents kept in sync, LoCoMo conversations captured.

An ingest is planned first (:func:`plan_ingest`: folders walked, owners and
document paths chosen, LoCoMo files read, all before a store is opened), then
run against an open store (:func:`ingest_documents` through its document
index, :func:`capture_turns` through its core).
Documents go through the document index (see :mod:`.sync`): an unchanged file
is skipped, a changed one has its chunks replaced, and a file that cannot be
read as a document is an outcome with an error, not an exception.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from tribal_memory.documents.locomo import iter_memories, load_locomo
from tribal_memory.documents.parsing import iter_paths
from tribal_memory.documents.sync import DocumentFile, FileOutcome, document_files, ingest_file

if TYPE_CHECKING:
    from tribal_memory.base.models import MemoryInput
    from tribal_memory.core import Core
    from tribal_memory.documents.index import DocumentIndex

INGEST_BATCH = 64
"""Memories per ``capture_batch`` call for LoCoMo turns (capped by ``max_batch_size``)."""

IngestFormat = Literal["auto", "text", "locomo"]
"""How files are read: ``auto`` (documents, and a ``.json`` file named directly as
LoCoMo), ``text`` (documents only) or ``locomo`` (every ``.json`` found as LoCoMo)."""

Advance = Callable[[int], None]
"""Called with how many more items are done."""


@dataclasses.dataclass(frozen=True)
class IngestPlan:
    """What an ingest reads.

    Attributes:
        documents: Document files with their document paths and owners, in walk order.
        conversations: The LoCoMo files.
        turns: Every dialog turn of those files, as memories to capture.
        skipped: Files that are neither (their format is not a document format).
    """

    documents: list[DocumentFile]
    conversations: list[Path]
    turns: list[MemoryInput]
    skipped: list[Path]


@dataclasses.dataclass
class IngestCounts:
    """Files per outcome and chunks changed, over the outcomes given to :meth:`add`."""

    created: int = 0
    updated: int = 0
    unchanged: int = 0
    deleted: int = 0
    failed: int = 0
    chunks_added: int = 0
    chunks_removed: int = 0

    def add(self, outcome: FileOutcome) -> None:
        """Count one file's outcome."""
        if outcome.result is None:
            self.failed += 1
            return
        result = outcome.result
        setattr(self, result.status, getattr(self, result.status) + 1)
        self.chunks_added += result.added
        self.chunks_removed += result.removed


def default_root(path: Path) -> Path:
    """What document paths are relative to by default: a directory itself, else the cwd."""
    return path if path.is_dir() else Path.cwd()


def plan_ingest(
    paths: list[Path], *, owner: str | None, root: Path | None, fmt: IngestFormat
) -> IngestPlan:
    """Walk ``paths``, choose each document's owner and path, and read the LoCoMo files.

    Args:
        paths: Files and directories (walked recursively).
        owner: Owner of every document; None maps folders to owners (see :mod:`.sync`).
        root: Document paths are relative to it; None: :func:`default_root` of each path.
        fmt: How files are read (see :data:`IngestFormat`).

    Raises:
        InvalidInput: a path does not exist, or a LoCoMo file is not LoCoMo JSON.
    """
    conversations, rest = _split_locomo(paths, fmt)
    documents: list[DocumentFile] = []
    skipped: list[Path] = []
    if fmt == "locomo":
        skipped = rest
    else:
        for path in rest:
            found, other = document_files([path], owner=owner, root=root or default_root(path))
            documents += found
            skipped += other
    turns = [memory for path in conversations for memory in iter_memories(load_locomo(path))]
    return IngestPlan(documents, conversations, turns, skipped)


def _split_locomo(paths: list[Path], fmt: IngestFormat) -> tuple[list[Path], list[Path]]:
    """LoCoMo files (``locomo``: every .json found; ``auto``: .json files named) and the rest.

    Raises:
        InvalidInput: a path does not exist.
    """
    if fmt == "text":
        return [], list(paths)
    if fmt == "locomo":
        found = list(iter_paths(paths))
        return [p for p in found if p.suffix.lower() == ".json"], [
            p for p in found if p.suffix.lower() != ".json"
        ]
    named = [p for p in paths if p.is_file() and p.suffix.lower() == ".json"]
    return named, [p for p in paths if p not in named]


def ingest_documents(
    index: DocumentIndex,
    documents: list[DocumentFile],
    *,
    report: Callable[[FileOutcome], None],
    advance: Advance | None = None,
) -> None:
    """Ingest each file and report its outcome; then fold new rows into the full-text index.

    Raises:
        StoreUnavailable / EmbeddingError: storing failed (not a problem of a file).
    """
    changed = False
    for document in documents:
        outcome = ingest_file(index, document)
        report(outcome)
        if outcome.result is not None and (outcome.result.added or outcome.result.removed):
            changed = True
        if advance is not None:
            advance(1)
    if changed:
        index.core.optimize()


def capture_turns(core: Core, turns: list[MemoryInput], *, advance: Advance | None = None) -> int:
    """Capture ``turns`` in batches (then optimize when any is new); returns how many were new.

    Raises:
        StoreUnavailable / EmbeddingError: storing failed.
    """
    created = 0
    batch = min(INGEST_BATCH, core.settings.max_batch_size)
    for offset in range(0, len(turns), batch):
        results = core.capture_batch(turns[offset : offset + batch])
        created += sum(result.status == "created" for result in results)
        if advance is not None:
            advance(min(batch, len(turns) - offset))
    if created:
        core.optimize()
    return created

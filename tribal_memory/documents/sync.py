"""Folders of documents kept in sync with the document index, once or while watching.

Owners from folders: a directory ingested without an explicit owner maps each
file to an owner by the first folder under that directory:
``DIR/shared/...`` is shared knowledge (owner ``shared``), ``DIR/<agent>/...``
belongs to ``<agent>``, and files directly in ``DIR`` are shared. A file named
on its own (not through a directory) is shared. An explicit owner applies to
every file. Hidden files and folders (names starting with ``.``) are left out.

Paths: a document's path (its chunks' ``source``, the key of its row with the
owner) is the file's path relative to ``root`` in POSIX form, or its absolute
path when it is outside ``root``.

Only some files: ``include``, where given, is a test on the document path
(``memory/a.md``); files whose path fails it are neither ingested nor
forgotten (``serve --watch-openclaw`` watches a workspace for the files
OpenClaw's memory-core indexes and nothing else).

Everything here goes through the :class:`~tribal_memory.documents.index.DocumentIndex`
(``ingest``, ``documents``, ``delete``).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tribal_memory.base.errors import InvalidInput, NotFound, TooLarge
from tribal_memory.base.models import SHARED_OWNER, DocumentResult
from tribal_memory.base.paths import workspace_path
from tribal_memory.documents.parsing import DOCUMENT_SUFFIXES, iter_paths, relative_source

if TYPE_CHECKING:
    from tribal_memory.documents.index import DocumentIndex

Include = Callable[[str], bool]
"""A test on a document path: whether a file with that path is kept in sync."""


def _kept(include: Include | None, path: str) -> bool:
    return include is None or include(path)


WATCH_DEBOUNCE_MS = 800
"""Changes within this many milliseconds are handled together."""
_WAKE_MS = 300  # the watcher wakes this often to check its deadline and stop event


@dataclass(frozen=True, slots=True)
class DocumentFile:
    """A file to ingest: where it is, its document path and its owner."""

    file: Path
    path: str
    owner: str


@dataclass(frozen=True, slots=True)
class FileOutcome:
    """What became of one file: a result, or the reason it failed (``error``)."""

    file: DocumentFile
    result: DocumentResult | None = None
    error: str | None = None


def is_document(path: Path) -> bool:
    """True when ``path``'s extension is a document format."""
    return path.suffix.lower() in DOCUMENT_SUFFIXES


def owner_in(directory: Path, file: Path, owner: str | None) -> str:
    """Owner of ``file`` found under ``directory`` (see the module docstring).

    Returns:
        ``owner`` when given; else the first folder of ``file`` under
        ``directory``, or ``shared`` for a file directly in it (or not under it).
    """
    if owner is not None:
        return owner
    try:
        parts = Path(os.path.abspath(file)).relative_to(os.path.abspath(directory)).parts
    except ValueError:
        return SHARED_OWNER
    return parts[0] if len(parts) > 1 else SHARED_OWNER


def _hidden(directory: Path, file: Path) -> bool:
    try:
        parts = Path(os.path.abspath(file)).relative_to(os.path.abspath(directory)).parts
    except ValueError:
        return False
    return any(part.startswith(".") for part in parts)


def document_files(
    paths: Sequence[Path], *, owner: str | None, root: Path | None
) -> tuple[list[DocumentFile], list[Path]]:
    """The documents among ``paths`` (directories walked), and the other files.

    Args:
        paths: Files and directories.
        owner: Owner of every file; None maps folders to owners.
        root: Document paths are relative to it.

    Returns:
        ``(documents, skipped)``: document files in walk order (see
        :func:`~tribal_memory.documents.parsing.iter_paths`), and files that
        are not documents.

    Raises:
        InvalidInput: a path does not exist.
    """
    found: list[DocumentFile] = []
    skipped: list[Path] = []
    for path in paths:
        for file in iter_paths([path]):
            if not is_document(file):
                skipped.append(file)
                continue
            file_owner = owner_in(path, file, owner) if path.is_dir() else owner or SHARED_OWNER
            found.append(DocumentFile(file, relative_source(file, root), file_owner))
    return found, skipped


def ingest_file(index: DocumentIndex, document: DocumentFile) -> FileOutcome:
    """Ingest one file; a file that cannot be read or is refused as input is an outcome.

    Raises:
        StoreUnavailable / EmbeddingError: storing failed (not a problem of the file).
    """
    try:
        data = document.file.read_bytes()
        result = index.ingest(document.path, data, owner=document.owner)
    except OSError as exc:
        return FileOutcome(document, error=f"{document.file}: {exc.strerror or exc}")
    except (InvalidInput, TooLarge) as exc:
        return FileOutcome(document, error=exc.detail)
    return FileOutcome(document, result)


def sync_files(
    index: DocumentIndex,
    documents: Iterable[DocumentFile],
    report: Callable[[FileOutcome], None],
) -> None:
    """Ingest each file (see :func:`ingest_file`) and report each outcome as it comes."""
    for document in documents:
        report(ingest_file(index, document))


def _prefix(directory: Path, root: Path | None) -> tuple[str, bool]:
    """The document-path prefix of files under ``directory``, and whether it was absolute.

    Document paths are stored in workspace form
    (:func:`~tribal_memory.base.paths.workspace_path`: a directory outside
    ``root`` gives ``/srv/docs`` -> ``srv/docs/``).
    """
    source = relative_source(directory, root)
    normalised = workspace_path(source) or ""
    return ("" if not normalised else normalised + "/"), os.path.isabs(source)


def _file_of(path: str, root: Path | None, absolute: bool) -> Path:
    """The file of a stored document path (``absolute``: it was outside ``root``)."""
    if absolute:
        return Path("/" + path)
    return Path(path) if os.path.isabs(path) or root is None else root / path


def forget_missing(
    index: DocumentIndex,
    directory: Path,
    *,
    owner: str | None,
    root: Path | None,
    report: Callable[[FileOutcome], None],
    under: Path | None = None,
    include: Include | None = None,
) -> None:
    """Delete the documents of ``directory`` (or of its sub-path ``under``) whose file is gone.

    A document counts as one of the directory's when its path lies under the
    directory, passes ``include`` and its owner is the one the directory's
    folder rule gives it.
    """
    prefix, absolute = _prefix(under or directory, root)
    for info in index.documents():
        if not info.path.startswith(prefix) or not _kept(include, info.path):
            continue
        file = _file_of(info.path, root, absolute)
        if file.exists() or owner_in(directory, file, owner) != info.owner:
            continue
        document = DocumentFile(file, info.path, info.owner)
        try:
            report(FileOutcome(document, index.delete(info.path, owner=info.owner)))
        except NotFound:
            continue  # deleted meanwhile


def sync_directory(
    index: DocumentIndex,
    directory: Path,
    *,
    owner: str | None,
    root: Path | None,
    report: Callable[[FileOutcome], None],
    include: Include | None = None,
) -> None:
    """Make the index match ``directory``: ingest every document, forget vanished ones.

    ``include``: only documents whose path passes it (None: all).
    """
    documents, _ = document_files([directory], owner=owner, root=root)
    sync_files(index, [d for d in documents if _kept(include, d.path)], report)
    forget_missing(index, directory, owner=owner, root=root, report=report, include=include)


def watch_directory(
    index: DocumentIndex,
    directory: Path,
    *,
    owner: str | None,
    root: Path | None,
    report: Callable[[FileOutcome], None],
    stop: threading.Event | None = None,
    max_seconds: float | None = None,
    ready: Callable[[], None] | None = None,
    include: Include | None = None,
) -> None:
    """Keep the index in sync with ``directory`` until stopped.

    The watcher starts first, then the whole directory is synced
    (:func:`sync_directory`) and ``ready`` is called; from then on added and
    changed documents are ingested, deleted ones (and documents under a
    deleted or moved-away folder) are removed, and a new or moved-in folder
    is scanned (its files may be written before the watcher sees the folder).
    Changes within :data:`WATCH_DEBOUNCE_MS` are handled together.

    Args:
        index: The document index of the open store.
        directory: The folder to watch (recursively).
        owner: Owner of every document; None maps folders to owners.
        root: Document paths are relative to it.
        report: Called with each file's outcome.
        stop: Returns soon after this event is set.
        max_seconds: Returns after about this many seconds (None: no limit).
        ready: Called once the initial sync is done and changes are being watched.
        include: Only documents whose path passes it (None: every document).

    Raises:
        InvalidInput: ``directory`` is not a directory.
        KeyboardInterrupt: on Ctrl-C (the caller decides how to end).
        StoreUnavailable / EmbeddingError: storing failed.
    """
    from watchfiles import Change, watch

    if not directory.is_dir():
        raise InvalidInput(f"not a directory: {directory}")
    deadline = None if max_seconds is None else time.monotonic() + max_seconds
    started = False

    def relevant(change: Change, name: str) -> bool:
        # Additions and deletions of anything (a new folder's files may be written
        # before the watcher sees the folder, so the folder is scanned), changes of
        # documents only.
        path = Path(name)
        return not _hidden(directory, path) and (change != Change.modified or is_document(path))

    for changes in watch(
        directory,
        watch_filter=relevant,
        debounce=WATCH_DEBOUNCE_MS,
        rust_timeout=_WAKE_MS,
        yield_on_timeout=True,
        stop_event=stop,
    ):
        if not started:  # the watcher runs now: nothing written from here on is missed
            sync_directory(index, directory, owner=owner, root=root, report=report, include=include)
            started = True
            if ready is not None:
                ready()
        for _, name in sorted(changes, key=lambda change: change[1]):
            _apply(
                index, directory, Path(name), owner=owner, root=root, report=report,
                include=include,
            )  # fmt: skip
        if deadline is not None and time.monotonic() >= deadline:
            return


def _apply(
    index: DocumentIndex,
    directory: Path,
    path: Path,
    *,
    owner: str | None,
    root: Path | None,
    report: Callable[[FileOutcome], None],
    include: Include | None = None,
) -> None:
    """Bring the index in line with what is at ``path`` now (``include``: see the module)."""
    if path.is_file():
        if is_document(path) and _kept(include, relative_source(path, root)):
            _ingest_or_forget(index, directory, path, owner=owner, root=root, report=report)
    elif path.is_dir():  # a new or moved-in folder: its files may have raised no events
        documents, _ = document_files([path], owner=owner, root=root)
        for document in documents:
            if _kept(include, document.path):
                _ingest_or_forget(
                    index, directory, document.file, owner=owner, root=root, report=report
                )
    elif is_document(path):
        if _kept(include, relative_source(path, root)):
            _forget(index, directory, path, owner=owner, root=root, report=report)
    else:  # perhaps a folder deleted or moved away
        forget_missing(
            index, directory, owner=owner, root=root, report=report, under=path, include=include
        )


def _ingest_or_forget(
    index: DocumentIndex,
    directory: Path,
    file: Path,
    *,
    owner: str | None,
    root: Path | None,
    report: Callable[[FileOutcome], None],
) -> None:
    """Ingest ``file``; when it vanished before it could be read, forget it instead."""
    document = DocumentFile(file, relative_source(file, root), owner_in(directory, file, owner))
    outcome = ingest_file(index, document)
    if outcome.result is None and not file.exists():
        _forget(index, directory, file, owner=owner, root=root, report=report)
    else:
        report(outcome)


def _forget(
    index: DocumentIndex,
    directory: Path,
    file: Path,
    *,
    owner: str | None,
    root: Path | None,
    report: Callable[[FileOutcome], None],
) -> None:
    document = DocumentFile(file, relative_source(file, root), owner_in(directory, file, owner))
    known = index.documents(owner=document.owner)
    if not any((d.path, d.owner) == (document.path, document.owner) for d in known):
        return  # never ingested (a shared document with that path is not this file's)
    try:
        report(FileOutcome(document, index.delete(document.path, owner=document.owner)))
    except NotFound:
        return  # removed meanwhile

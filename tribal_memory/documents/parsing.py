"""Documents (Markdown, plain text, PDF) as chunk memories with a heading hierarchy.

:func:`parse_document` turns a document's bytes into ``kind="chunk"``
memories, chunked by :mod:`tribal_memory.documents.chunking` (token-sized, with
overlap, split at Markdown headings). The format comes from the name's
extension: ``.md``/``.markdown`` (Markdown), ``.txt`` (plain text, one
section), ``.pdf`` (the text pypdf extracts from each page; one section). Each
chunk records where it came from::

    {"fragment_id": "<doc_id>-chunk-<n>", "heading": "Intro > Setup",
     "start_line": 12, "end_line": 30,      # 1-based, inclusive
     "section": 3, "tokens": 498,           # section index, model tokens
     "page_start": 2, "page_end": 3,        # PDF only, 1-based, inclusive
     "heading_lines": [[1, "# Intro"]]}     # only when headings before it have no text

Line numbers of a PDF refer to its extracted text: the lines of every page,
pages one after another.

Heading hierarchy (``parent_id``): the first chunk of a section starts with
its heading line and stands for that heading. Every other chunk of the section
has that first chunk as parent; a section's first chunk has as parent the
first chunk of the nearest enclosing (higher-level) section that has chunks,
else None. A section holding nothing but its heading becomes no chunk (its
title stays in the ``heading`` path of the sections below it), so a parent
always names a chunk of the same document; its line is kept in the
``heading_lines`` of the next chunk (the last chunk when none follows), so
that the document's text can be put back together line for line. Ids are
:func:`~tribal_memory.base.models.memory_id_for` of owner and chunk text, the ids
capture will give.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from tribal_memory.base.errors import InvalidInput, TooLarge
from tribal_memory.base.models import MemoryInput, memory_id_for
from tribal_memory.documents.chunking import Chunk, Section, chunk_lines
from tribal_memory.documents.locomo import iter_memories, load_locomo
from tribal_memory.documents.pdf import pdf_pages

DocumentFormat = Literal["markdown", "text", "pdf"]
FORMATS: dict[str, DocumentFormat] = {
    ".md": "markdown",
    ".markdown": "markdown",
    ".txt": "text",
    ".pdf": "pdf",
}
DOCUMENT_SUFFIXES: tuple[str, ...] = tuple(FORMATS)
"""File name endings read as documents (compared case-insensitively)."""

DEFAULT_MAX_TOKENS = 512
DEFAULT_OVERLAP_TOKENS = 20

_DOC_NAMESPACE = uuid.UUID("0b6f2d8e-3c41-4d7a-9f25-8a1e6c9b4d30")


@dataclass(frozen=True, slots=True)
class DocumentLimits:
    """Bounds on what one document may expand into (settings ``max_document_*``).

    Attributes:
        max_chars: Most characters of text (a PDF's extracted text, checked page
            by page while extracting).
        max_chunks: Most chunks.
        pdf_timeout_s: Longest PDF text extraction, in seconds.
    """

    max_chars: int = 2_000_000
    max_chunks: int = 2_000
    pdf_timeout_s: float = 60.0


DEFAULT_LIMITS = DocumentLimits()


def doc_id_for(relative_path: str) -> str:
    """Deterministic document id: UUIDv5 of the path as recorded in ``source``."""
    return str(uuid.uuid5(_DOC_NAMESPACE, relative_path))


def document_format(name: str) -> DocumentFormat:
    """The format a document name's extension selects.

    Raises:
        InvalidInput: the extension is not one of :data:`DOCUMENT_SUFFIXES`.
    """
    suffix = os.path.splitext(name)[1].lower()
    if suffix not in FORMATS:
        raise InvalidInput(f"{name}: not a document ({', '.join(DOCUMENT_SUFFIXES)})")
    return FORMATS[suffix]


def iter_paths(paths: Iterable[Path]) -> Iterator[Path]:
    """Every file named in ``paths``, directories walked recursively.

    Files under a directory come in sorted order; hidden files and directories
    (names starting with ``.``) inside a directory are left out. A file reached
    twice is yielded once. No file is filtered by its extension.

    Raises:
        InvalidInput: a path does not exist (raised when iteration reaches it).
    """
    seen: set[Path] = set()
    for path in paths:
        if path.is_dir():
            found = sorted(
                p
                for p in path.rglob("*")
                if p.is_file()
                and not any(part.startswith(".") for part in p.relative_to(path).parts)
            )
        elif path.is_file():
            found = [path]
        else:
            raise InvalidInput(f"no such file or directory: {path}")
        for file in found:
            key = Path(os.path.abspath(file))
            if key not in seen:
                seen.add(key)
                yield file


@dataclass(frozen=True, slots=True)
class LoadedFiles:
    """What :func:`load_paths` read: the memories, files read and files skipped."""

    memories: list[MemoryInput]
    files: int
    skipped: int


def load_paths(
    paths: Sequence[Path],
    *,
    owner: str,
    root: Path | None,
    format: Literal["auto", "text", "locomo"] = "auto",
) -> LoadedFiles:
    """Memories from files and directories (see :func:`iter_paths`), in file order.

    ``format="text"`` reads documents (:data:`DOCUMENT_SUFFIXES`) with
    :func:`load_document`; ``"locomo"`` reads ``.json`` files with
    :func:`~tribal_memory.documents.locomo.load_locomo` (every turn a memory owned
    by its ``sample_id``; ``owner`` does not apply); ``"auto"`` reads documents,
    and ``.json`` files named in ``paths`` (not found in a directory) as LoCoMo.
    Other files are skipped and counted.

    Raises:
        InvalidInput: a path does not exist, or a file cannot be read or parsed
            (raised before any memory is returned).
    """
    named = {Path(os.path.abspath(path)) for path in paths if path.is_file()}
    memories: list[MemoryInput] = []
    files = skipped = 0
    for path in iter_paths(paths):
        suffix = path.suffix.lower()
        as_locomo = format == "locomo" or (
            format == "auto" and Path(os.path.abspath(path)) in named
        )
        if suffix == ".json" and as_locomo:
            memories.extend(iter_memories(load_locomo(path)))
        elif suffix in DOCUMENT_SUFFIXES and format != "locomo":
            memories.extend(load_document(path, owner=owner, root=root))
        else:
            skipped += 1
            continue
        files += 1
    return LoadedFiles(memories, files, skipped)


def relative_source(path: Path, root: Path | None) -> str:
    """``path`` relative to ``root`` in POSIX form; the absolute path when not under it."""
    absolute = Path(os.path.abspath(path))
    if root is not None:
        try:
            return absolute.relative_to(os.path.abspath(root)).as_posix()
        except ValueError:
            pass
    return absolute.as_posix()


def load_document(
    path: Path,
    *,
    owner: str,
    root: Path | None = None,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    overlap_tokens: int = DEFAULT_OVERLAP_TOKENS,
    limits: DocumentLimits = DEFAULT_LIMITS,
) -> list[MemoryInput]:
    """Read a document file and chunk it (see :func:`parse_document`).

    Args:
        path: The file.
        owner: Owner of every chunk.
        root: ``source`` and ``doc_id`` use the path relative to it (absolute
            when None or when ``path`` is outside it).
        max_tokens: Most model tokens in a chunk.
        overlap_tokens: Most tokens a chunk repeats from the one before it.
        limits: Bounds on its text and chunks.

    Raises:
        InvalidInput: unreadable file, or as :func:`parse_document`.
        TooLarge: as :func:`parse_document`.
    """
    document_format(path.name)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InvalidInput(f"cannot read {path}: {exc.strerror or exc}") from exc
    return parse_document(
        relative_source(path, root),
        data,
        owner=owner,
        max_tokens=max_tokens,
        overlap_tokens=overlap_tokens,
        limits=limits,
    )


def document_lines(
    source: str, data: bytes, limits: DocumentLimits = DEFAULT_LIMITS
) -> tuple[DocumentFormat, list[str], list[int]]:
    """The format, the text lines and (PDF) the 1-based page of each line of a document.

    Markdown and text must be UTF-8 (a byte-order mark is dropped); their page
    list is empty.

    Raises:
        InvalidInput: unsupported extension, text that is not UTF-8, or a PDF
            :func:`~tribal_memory.documents.pdf.pdf_pages` refuses.
        TooLarge: text over ``limits.max_chars``, or a PDF whose extraction
            took over ``limits.pdf_timeout_s``.
    """
    fmt = document_format(source)
    if fmt == "pdf":
        lines: list[str] = []
        pages: list[int] = []
        extracted = pdf_pages(
            data, source, max_chars=limits.max_chars, timeout_s=limits.pdf_timeout_s
        )
        for number, page in enumerate(extracted, start=1):
            page_lines = page.splitlines()
            lines.extend(page_lines)
            pages.extend([number] * len(page_lines))
        return fmt, lines, pages
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{source} is not UTF-8 text: {exc.reason} at byte {exc.start}") from exc
    if len(text) > limits.max_chars:
        raise TooLarge(
            f"{source} has {len(text)} characters; the limit is {limits.max_chars} "
            "(TRIBAL_MAX_DOCUMENT_CHARS)"
        )
    return fmt, text.splitlines(), []


@dataclass(frozen=True, slots=True)
class ParsedDocument:
    """A parsed document: its chunk memories, its sections and its text lines.

    ``sections`` as :func:`~tribal_memory.documents.chunking.split_sections`
    gives them (a chunk's ``metadata["section"]`` is an index into it);
    ``lines`` are the document's text lines (a PDF's extracted text).
    """

    chunks: list[MemoryInput]
    sections: list[Section]
    lines: list[str]


def parse_document(
    source: str,
    data: bytes,
    *,
    owner: str,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    overlap_tokens: int = DEFAULT_OVERLAP_TOKENS,
    limits: DocumentLimits = DEFAULT_LIMITS,
) -> list[MemoryInput]:
    """Chunk a document into memories (:func:`parse_structure`'s ``chunks``)."""
    return parse_structure(
        source,
        data,
        owner=owner,
        max_tokens=max_tokens,
        overlap_tokens=overlap_tokens,
        limits=limits,
    ).chunks


def parse_structure(
    source: str,
    data: bytes,
    *,
    owner: str,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    overlap_tokens: int = DEFAULT_OVERLAP_TOKENS,
    limits: DocumentLimits = DEFAULT_LIMITS,
) -> ParsedDocument:
    """Chunk a document into memories with metadata and heading hierarchy.

    Args:
        source: The document's path as recorded in ``source``; its extension
            picks the format and :func:`doc_id_for` of it is the ``doc_id``.
        data: The document's bytes.
        owner: Owner of every chunk (part of the ids, see the module docstring).
        max_tokens: Most model tokens in a chunk (special tokens not counted).
        overlap_tokens: Most tokens a chunk repeats from the one before it in
            the same section (0 for none).
        limits: Bounds on the document's text and chunks.

    Returns:
        The sections and lines, and one ``kind="chunk"`` memory per chunk,
        ``chunk_index`` 0..n-1 in document order (none for a document without
        text). Two chunks with the same text have the same id (capture stores
        one memory).

    Raises:
        InvalidInput: unsupported extension, text that is not UTF-8, an
            unreadable or text-less PDF, or sizes out of range
            (``max_tokens < 1``, overlap not below it).
        TooLarge: over ``limits.max_chars`` characters or ``limits.max_chunks``
            chunks, or a PDF extraction over ``limits.pdf_timeout_s``.
    """
    if max_tokens < 1 or not 0 <= overlap_tokens < max_tokens:
        raise InvalidInput("need max_tokens >= 1 and 0 <= overlap_tokens < max_tokens")
    fmt, lines, pages = document_lines(source, data, limits)
    sections, chunks = chunk_lines(
        lines, markdown=fmt == "markdown", max_tokens=max_tokens, overlap_tokens=overlap_tokens
    )
    if len(chunks) > limits.max_chunks:
        raise TooLarge(
            f"{source} makes {len(chunks)} chunks; the limit is {limits.max_chunks} "
            "(TRIBAL_MAX_DOCUMENT_CHUNKS)"
        )
    doc_id = doc_id_for(source)
    ids = [memory_id_for(owner.strip(), chunk.content) for chunk in chunks]
    parents = _parent_ids(sections, chunks, ids)
    bare_headings = _bare_headings(lines, sections, chunks)
    memories: list[MemoryInput] = []
    for index, chunk in enumerate(chunks):
        section = sections[chunk.section]
        metadata: dict[str, Any] = {
            "fragment_id": f"{doc_id}-chunk-{index}",
            "heading": section.heading,
            "start_line": chunk.start_line,
            "end_line": chunk.end_line,
            "section": chunk.section,
            "tokens": chunk.tokens,
        }
        if bare_headings.get(index):
            metadata["heading_lines"] = bare_headings[index]
        if pages:
            metadata["page_start"] = pages[chunk.start_line - 1]
            metadata["page_end"] = pages[chunk.end_line - 1]
        memories.append(
            MemoryInput(
                content=chunk.content,
                owner=owner,
                kind="chunk",
                source=source,
                doc_id=doc_id,
                chunk_index=index,
                parent_id=parents[index],
                metadata=metadata,
            )
        )
    return ParsedDocument(memories, sections, lines)


def _bare_headings(
    lines: list[str], sections: list[Section], chunks: list[Chunk]
) -> dict[int, list[list[int | str]]]:
    """Heading lines no chunk holds (sections with nothing under their heading).

    Keyed by the index of the chunk that keeps them: the next chunk after the
    line, else the last.

    Returns:
        ``{chunk index: [[1-based line, heading line text], ...]}``.
    """
    kept: dict[int, list[list[int | str]]] = {}
    if not chunks:
        return kept
    for section in sections:
        if section.has_body or not section.level:
            continue
        number = section.first_line + 1
        index = next(
            (i for i, chunk in enumerate(chunks) if chunk.start_line > number), len(chunks) - 1
        )
        kept.setdefault(index, []).append([number, lines[section.first_line]])
    return kept


def _parent_ids(sections: list[Section], chunks: list[Chunk], ids: list[str]) -> list[str | None]:
    """``parent_id`` of each chunk (see the module docstring); never the chunk itself."""
    heading_chunk: dict[int, str] = {}  # section index -> id of its first chunk
    parents: list[str | None] = []
    for chunk, memory_id in zip(chunks, ids, strict=True):
        if chunk.section in heading_chunk:
            parent: str | None = heading_chunk[chunk.section]
        else:
            heading_chunk[chunk.section] = memory_id
            parent = None
            enclosing = sections[chunk.section].enclosing
            while enclosing is not None and parent is None:
                parent = heading_chunk.get(enclosing)
                enclosing = sections[enclosing].enclosing
        parents.append(parent if parent != memory_id else None)
    return parents

"""Plain-text and Markdown documents as chunk memories.

A document is split into sections at its Markdown ATX headings (``#`` to
``######``, outside fenced code blocks; a ``.txt`` file is one section), and
each section into chunks of at most ``max_tokens`` tokens that overlap by about
``overlap_tokens``. A chunk's content is the exact text of the file from its
first to its last word (line breaks and indentation kept), and its metadata
records where it came from::

    {"fragment_id": "<doc_id>-chunk-<n>", "heading": "Intro > Setup",
     "start_line": 12, "end_line": 30}        # 1-based, inclusive

Token counts are estimated, not computed with the embedding model's tokenizer:
a whitespace-separated word costs ``max(1.3, len(word) / 4)`` tokens (about 1.3
WordPiece tokens per English word; one per 4 characters for long words such as
URLs or identifiers). A chunk ends at a line break when one falls in its second
half, so prose chunks usually hold whole lines.

Sections that hold nothing but their heading become no chunk (the heading is
kept in the ``heading`` path of the sections below it).
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from tribal_memory.errors import InvalidInput
from tribal_memory.ingest.locomo import iter_memories, load_locomo
from tribal_memory.models import MemoryInput

DOCUMENT_SUFFIXES: tuple[str, ...] = (".md", ".markdown", ".txt")
"""File name endings :func:`load_document` reads (compared case-insensitively)."""
MARKDOWN_SUFFIXES: tuple[str, ...] = (".md", ".markdown")

DEFAULT_MAX_TOKENS = 256  # the default model reads 256 tokens; longer chunks lose their tail
DEFAULT_OVERLAP_TOKENS = 20
TOKENS_PER_WORD = 1.3
CHARS_PER_TOKEN = 4.0

_DOC_NAMESPACE = uuid.UUID("0b6f2d8e-3c41-4d7a-9f25-8a1e6c9b4d30")
_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_WORD = re.compile(r"\S+")


def doc_id_for(relative_path: str) -> str:
    """Deterministic document id: UUIDv5 of the path as recorded in ``source``."""
    return str(uuid.uuid5(_DOC_NAMESPACE, relative_path))


def estimate_tokens(word: str) -> float:
    """Estimated model tokens of one whitespace-separated word (see the module docstring)."""
    return max(TOKENS_PER_WORD, len(word) / CHARS_PER_TOKEN)


@dataclass(frozen=True, slots=True)
class _Word:
    line: int  # 0-based index into the file's lines
    start: int  # character offsets within that line
    end: int
    tokens: float


@dataclass(frozen=True, slots=True)
class _Section:
    heading: str  # "Intro > Setup"; "" before the first heading and in plain text
    first_line: int  # 0-based, inclusive
    last_line: int  # 0-based, exclusive
    has_body: bool  # holds a non-blank line that is not its heading


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
    :func:`~tribal_memory.ingest.locomo.load_locomo` (every turn a memory owned
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
) -> list[MemoryInput]:
    """Read a ``.md``/``.markdown``/``.txt`` file and chunk it into memories.

    Args:
        path: The file (UTF-8; a byte-order mark is dropped).
        owner: Owner of every chunk.
        root: ``source`` and ``doc_id`` use the path relative to it (absolute
            when None or when ``path`` is outside it).
        max_tokens: Largest estimated size of a chunk, in tokens.
        overlap_tokens: Estimated tokens each chunk repeats from the end of
            the one before it in the same section (0 for none).

    Returns:
        One ``kind="chunk"`` memory per chunk, ``chunk_index`` 0..n-1 in file
        order; an empty list for a file without text.

    Raises:
        InvalidInput: unsupported extension, unreadable or non-UTF-8 file, or
            sizes out of range (``max_tokens < 1``, overlap not below it).
    """
    if max_tokens < 1 or not 0 <= overlap_tokens < max_tokens:
        raise InvalidInput("need max_tokens >= 1 and 0 <= overlap_tokens < max_tokens")
    suffix = path.suffix.lower()
    if suffix not in DOCUMENT_SUFFIXES:
        raise InvalidInput(f"{path}: not a document ({', '.join(DOCUMENT_SUFFIXES)})")
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except OSError as exc:
        raise InvalidInput(f"cannot read {path}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{path} is not UTF-8 text: {exc.reason} at byte {exc.start}") from exc

    lines = text.splitlines()
    source = relative_source(path, root)
    doc_id = doc_id_for(source)
    sections = _sections(lines, markdown=suffix in MARKDOWN_SUFFIXES)
    memories: list[MemoryInput] = []
    for section in sections:
        if not section.has_body:
            continue
        words = _words(lines, section.first_line, section.last_line)
        for first, last in _chunk_spans(words, max_tokens, overlap_tokens):
            index = len(memories)
            memories.append(
                MemoryInput(
                    content=_text_between(lines, words[first], words[last]),
                    owner=owner,
                    kind="chunk",
                    source=source,
                    doc_id=doc_id,
                    chunk_index=index,
                    metadata={
                        "fragment_id": f"{doc_id}-chunk-{index}",
                        "heading": section.heading,
                        "start_line": words[first].line + 1,
                        "end_line": words[last].line + 1,
                    },
                )
            )
    return memories


def _sections(lines: list[str], *, markdown: bool) -> list[_Section]:
    """Split lines at ATX headings outside fenced code; plain text is one section."""
    starts: list[tuple[int, str]] = [(0, "")]
    if markdown:
        path: list[tuple[int, str]] = []  # (level, title) of the open headings
        fence: str | None = None
        for number, line in enumerate(lines):
            if fence_match := _FENCE.match(line):
                marker = fence_match.group(1)
                if fence is None:
                    fence = marker
                elif marker[0] == fence[0] and len(marker) >= len(fence):
                    fence = None
                continue
            if fence is None and (heading := _HEADING.match(line)):
                level = len(heading.group(1))
                path = [(lv, title) for lv, title in path if lv < level]
                path.append((level, heading.group(2).strip()))
                starts.append((number, " > ".join(title for _, title in path)))
    sections: list[_Section] = []
    bounds = [number for number, _ in starts[1:]] + [len(lines)]
    for (first, title_path), last in zip(starts, bounds, strict=True):
        body_from = first + 1 if title_path else first
        has_body = any(line.strip() for line in lines[body_from:last])
        if last > first:
            sections.append(_Section(title_path, first, last, has_body))
    return sections


def _words(lines: list[str], first_line: int, last_line: int) -> list[_Word]:
    return [
        _Word(number, match.start(), match.end(), estimate_tokens(match.group()))
        for number in range(first_line, last_line)
        for match in _WORD.finditer(lines[number])
    ]


def _chunk_spans(
    words: list[_Word], max_tokens: int, overlap_tokens: int
) -> Iterator[tuple[int, int]]:
    """Inclusive word-index spans of the chunks of one section.

    Greedy: take words while the estimate stays within ``max_tokens`` (a
    single word over it is a chunk of its own); end at a line break instead
    when one lies in the second half of the span; start the next chunk up to
    ``overlap_tokens`` back. Every chunk holds at least one word the chunk
    before it did not.
    """
    start, fresh = 0, 0  # fresh: first word not in the previous chunk
    while start < len(words):
        end, total = start, 0.0  # end is exclusive
        while end < len(words) and (end <= fresh or total + words[end].tokens <= max_tokens):
            total += words[end].tokens
            end += 1
        if end < len(words):
            for cut in range(end - 1, max(start + (end - start) // 2, fresh), -1):
                if words[cut].line != words[cut - 1].line:
                    end = cut
                    break
        yield start, end - 1
        if end >= len(words):
            return
        previous_start, start, fresh = start, end, end
        overlap = 0.0
        while start - 1 > previous_start and overlap + words[start - 1].tokens <= overlap_tokens:
            overlap += words[start - 1].tokens
            start -= 1
        if overlap + words[fresh].tokens > max_tokens:
            start = fresh


def _text_between(lines: list[str], first: _Word, last: _Word) -> str:
    """The file's text from the start of ``first`` to the end of ``last``."""
    if first.line == last.line:
        return lines[first.line][first.start : last.end]
    return "\n".join(
        [
            lines[first.line][first.start :],
            *lines[first.line + 1 : last.line],
            lines[last.line][: last.end],
        ]
    )

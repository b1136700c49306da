"""``memory_get``: the text at a virtual path, read a window of lines at a time.

The path names a memory (``memory/<memory_id>.md``) or an ingested document
(see :mod:`tribal_memory.interfaces.tool_paths`); a document is reassembled
from the chunks the caller can see (:func:`document_lines`). The answer's
shape is in :mod:`tribal_memory.interfaces.tools`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from tribal_memory.base.errors import EmbeddingError, NotFound, StoreUnavailable
from tribal_memory.base.models import SHARED_OWNER, Memory, SearchFilters
from tribal_memory.interfaces.tool_args import MemoryGetIn, count
from tribal_memory.interfaces.tool_paths import line_metadata, normalize_path
from tribal_memory.service.memory_service import MemoryService

READ_DEFAULT_LINES = 120
"""Lines ``memory_get`` returns when the call gives no ``lines`` (memory-core's window)."""
READ_MAX_CHARS = 12_000
"""Most characters of text ``memory_get`` returns (memory-core's budget)."""
MAX_DOCUMENT_CHUNKS = 10_000
"""Most chunks read to reassemble one document for ``memory_get``."""

_MEMORY_PATH = re.compile(r"^memory/([0-9a-fA-F-]{36})\.md$")


def memory_get(service: MemoryService, args: MemoryGetIn, *, owner: str | None) -> dict[str, Any]:
    """The text at a virtual path, a window of lines of it (see the module docstring).

    Args:
        service: The memory service read.
        args: The parsed arguments: ``from`` a 1-based line, ``lines`` a count.
        owner: The caller (None: every owner).

    Returns:
        ``{status: "ok", text, path, from, lines, truncated?, nextFrom?}``;
        ``{status: "not_found", text: "", path}`` for an unknown or invisible
        path; ``{status: "error", text: "", path, code, error}`` for a path
        outside the workspace or a failed store.
    """
    raw = args.path
    first = count(args.from_, 1)
    lines_wanted = count(args.lines, READ_DEFAULT_LINES)
    corpus = args.corpus
    path = normalize_path(raw)
    if path is None or not path:
        return {
            "status": "error",
            "text": "",
            "path": raw,
            "code": "MEMORY_PATH_NOT_ALLOWED",
            "error": "path must be a relative path inside the memory workspace",
        }
    not_found = {"status": "not_found", "text": "", "path": path}
    if corpus == "wiki":
        return not_found
    try:
        lines = _lines_at(service, path, owner)
    except (StoreUnavailable, EmbeddingError) as exc:
        return {
            "status": "error",
            "text": "",
            "path": path,
            "code": "MEMORY_READ_FAILED",
            "error": exc.detail,
        }
    if not lines:
        return not_found
    # A document's file is in the workspace: the agent can read a cut line whole there.
    return read_window(lines, path, first, lines_wanted, file_on_disk=not _MEMORY_PATH.match(path))


def read_window(
    lines: Sequence[str],
    path: str,
    first: int,
    count: int,
    max_chars: int = READ_MAX_CHARS,
    *,
    file_on_disk: bool = False,
) -> dict[str, Any]:
    """``count`` lines from line ``first`` (1-based) of ``lines``, within ``max_chars``.

    Whole lines are kept while they fit (one line at least, cut to
    ``max_chars`` if it alone is longer). When lines remain past the window,
    the answer has ``truncated: true``, ``nextFrom`` (the line to read next;
    absent when a single line had to be cut) and a continuation notice
    appended to a non-empty ``text``: memory-core's words, ``Use from=N to
    continue``, or for a cut line that it exceeded the budget, and, when
    ``file_on_disk`` (an ingested workspace file), that ``read`` on the
    source file gives the whole line; else that only the line's start is shown.

    Returns:
        ``{status: "ok", text, path, from, lines, truncated?, nextFrom?}``;
        ``lines`` is how many lines ``text`` holds.
    """
    selected = list(lines[first - 1 : first - 1 + count])
    more_after = first - 1 + len(selected) < len(lines)
    kept, size = 0, 0
    for line in selected:
        grown = size + len(line) + (1 if kept else 0)
        if kept and grown > max_chars:
            break
        kept, size = kept + 1, grown
    cut_line = size > max_chars
    text = "\n".join(selected[:kept])[:max_chars]
    truncated = cut_line or kept < len(selected) or more_after
    next_from = None if cut_line or not (more_after or kept < len(selected)) else first + kept
    if truncated and text:
        notice = (
            f"[More content available. Use from={next_from} to continue.]"
            if next_from is not None
            else "[More content available. Requested excerpt exceeded the default maxChars budget."
            + (
                " If you need the full raw line, use read on the source file.]"
                if file_on_disk
                else f" The line is longer than {max_chars} characters; only its start is shown.]"
            )
        )
        text = f"{text}\n\n{notice}"
    answer: dict[str, Any] = {"status": "ok", "text": text, "path": path, "from": first}
    answer["lines"] = kept
    if truncated:
        answer["truncated"] = True
    if next_from is not None:
        answer["nextFrom"] = next_from
    return answer


def _lines_at(service: MemoryService, path: str, owner: str | None) -> list[str]:
    """Lines of the memory or document at ``path`` ([] when there is none)."""
    match = _MEMORY_PATH.match(path)
    if match is not None:
        try:
            return service.get(match.group(1).lower(), owner=owner).content.split("\n")
        except NotFound:
            pass  # maybe a document that happens to be named like a memory
    if not path:
        return []
    chunks = service.list_memories(
        SearchFilters(owner=owner, kinds=("chunk",), sources=(path,)), limit=MAX_DOCUMENT_CHUNKS
    )
    return document_lines(chunks, owner)


def document_lines(chunks: Sequence[Memory], owner: str | None) -> list[str]:
    """A document's lines reassembled from its chunks, 1-based line n at index n-1.

    Only chunks with line metadata count. When several owners' chunks of the
    path are visible, one owner's are used: the caller's own, else
    ``shared``, else the first owner by name. Chunks are read in
    ``chunk_index`` order and merged by line number: a line a chunk holds
    whole (any line but its first and last) is taken as it is; a line only
    held in pieces (chunks start or end inside it) is joined from its pieces
    in chunk order, the words two pieces overlap on counted once. A chunk's first line lacks
    its leading indentation unless another chunk holds the line whole. The
    lines of headings with no text under them (a document's ``# Title``) come
    from the ``heading_lines`` metadata of the chunk after them; other lines
    no chunk covers (blank lines) are empty.

    Returns:
        The lines; [] when no chunk has line metadata.
    """
    usable = [c for c in chunks if line_metadata(c) is not None]
    if not usable:
        return []
    owners = {c.owner for c in usable}
    chosen = owner if owner in owners else SHARED_OWNER if SHARED_OWNER in owners else min(owners)
    mine = sorted(
        (c for c in usable if c.owner == chosen),
        key=lambda c: (c.chunk_index if c.chunk_index is not None else 0, line_metadata(c)),
    )
    whole: dict[int, str] = {}
    parts: dict[int, list[str]] = {}  # pieces of lines chunks start or end inside, in order
    last = 0
    for chunk in mine:
        for number, text in _heading_lines(chunk):
            whole.setdefault(number, text)
            last = max(last, number)
        span = line_metadata(chunk)
        assert span is not None  # filtered above
        start, end = span
        texts = chunk.content.split("\n")
        if len(texts) != end - start + 1:
            continue  # metadata that does not fit the content: skip rather than misplace
        last = max(last, end)
        for number, text in enumerate(texts, start):
            if start < number < end:
                whole.setdefault(number, text)
            else:
                parts.setdefault(number, []).append(text)
    lines: list[str] = []
    for number in range(1, last + 1):
        if number in whole:
            lines.append(whole[number])
        else:
            pieces = parts.get(number, [""])
            line = pieces[0]
            for piece in pieces[1:]:
                line = _join(line, piece)
            lines.append(line)
    return lines


def _heading_lines(chunk: Memory) -> list[tuple[int, str]]:
    """The ``heading_lines`` metadata of a chunk: ``[[line, text], ...]``, sane pairs only."""
    value = chunk.metadata.get("heading_lines")
    if not isinstance(value, list):
        return []
    return [
        (pair[0], pair[1])
        for pair in value
        if isinstance(pair, list)
        and len(pair) == 2
        and type(pair[0]) is int
        and pair[0] >= 1
        and isinstance(pair[1], str)
    ]


def _join(left: str, right: str) -> str:
    """Two pieces of one line, joined in order.

    The longest whole-word overlap of the end of ``left`` with the start of
    ``right`` is counted once; without one, they are joined by a space.
    """
    if not right or right in left:
        return left
    if not left or left.strip() in right and right.startswith(left.strip()):
        return left[: len(left) - len(left.lstrip())] + right
    for size in range(min(len(left), len(right)), 0, -1):
        if (
            left.endswith(right[:size])
            and (size == len(right) or right[size].isspace())
            and (size == len(left) or left[-size - 1].isspace())
        ):
            return left + right[size:]
    return f"{left} {right}"

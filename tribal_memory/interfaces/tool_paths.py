"""Virtual paths of memories and document chunks, and citations of their lines.

The agent tools (:mod:`tribal_memory.interfaces.tools`) name what they return
by path. A memory's path is ``memory/<memory_id>.md`` and its lines are the
lines of its content. A chunk of an ingested document (kind ``chunk`` with a
``source`` and ``start_line``/``end_line`` in its metadata, 1-based and
inclusive) has the document's path (its ``source``) and those lines. A
citation is ``<path>#L<a>-L<b>`` (``#L<a>`` for one line), as OpenClaw's
memory-core writes them.
"""

from __future__ import annotations

import re

from tribal_memory.base.models import Memory
from tribal_memory.base.paths import workspace_path

MEMORY_DIR = "memory/"
"""Prefix of the virtual path of a memory: ``memory/<memory_id>.md``."""

_LINE_ANCHOR = re.compile(r"#L(\d+)(?:-L(\d+))?$")


def line_metadata(memory: Memory) -> tuple[int, int] | None:
    """The chunk's (start_line, end_line) from its metadata, if both are sane integers."""
    start, end = memory.metadata.get("start_line"), memory.metadata.get("end_line")
    if type(start) is int and type(end) is int and 1 <= start <= end:
        return start, end
    return None


def _is_document_chunk(memory: Memory) -> bool:
    return memory.kind == "chunk" and bool(memory.source) and line_metadata(memory) is not None


def memory_path(memory: Memory) -> str:
    """The virtual path of a memory.

    Its document's path for a document chunk, else ``memory/<memory_id>.md``.
    """
    if _is_document_chunk(memory):
        assert memory.source is not None  # checked by _is_document_chunk
        return memory.source
    return f"{MEMORY_DIR}{memory.memory_id}.md"


def line_span(memory: Memory) -> tuple[int, int]:
    """1-based inclusive (start, end) lines of the memory within its :func:`memory_path`."""
    if _is_document_chunk(memory):
        span = line_metadata(memory)
        assert span is not None  # checked by _is_document_chunk
        return span
    return 1, len(memory.content.split("\n"))


def citation(path: str, start: int, end: int) -> str:
    """``"<path>#L<start>-L<end>"``, or ``"<path>#L<start>"`` for one line (as memory-core)."""
    return f"{path}#L{start}" if start == end else f"{path}#L{start}-L{end}"


def split_citation(text: str) -> tuple[str, tuple[int, int] | None]:
    """A path as an agent may cite it: the plain path and the cited lines, if any.

    Strips surrounding space, a leading ``Source:`` and a trailing
    ``#L<a>[-L<b>]`` anchor (returned as ``(a, b)``), so a citation works
    wherever a path does.
    """
    path = text.strip()
    if path.lower().startswith("source:"):
        path = path[len("source:") :].strip()
    anchor = _LINE_ANCHOR.search(path)
    if anchor is None:
        return path, None
    start = int(anchor.group(1))
    end = int(anchor.group(2)) if anchor.group(2) else start
    return path[: anchor.start()], (min(start, end), max(start, end))


def normalize_path(path: str) -> str | None:
    """A path as an agent may write it, in the form results carry; None when it escapes.

    Strips a citation (see :func:`split_citation`), then applies the
    workspace rule documents are stored under
    (:func:`tribal_memory.base.paths.workspace_path`: backslashes to slashes,
    no empty or ``.`` segments, no leading ``/`` or drive, ``..`` takes back
    the segment before it).

    Returns:
        The normalised path (``""`` for an empty one), or None when ``..``
        climbs out of the workspace.
    """
    plain, _ = split_citation(path)
    return workspace_path(plain)

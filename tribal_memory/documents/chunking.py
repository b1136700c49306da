"""Splitting a document's lines into sections and token-sized, overlapping chunks.

Sections start at Markdown ATX headings (``#`` to ``######``, outside fenced
code blocks); text before the first heading, and a whole plain-text document,
is one section of level 0. Each section is cut into chunks of at most
``max_tokens`` model tokens (:mod:`tribal_memory.documents.tokens`, special tokens
not counted) that repeat up to ``overlap_tokens`` tokens of the chunk before
them in the same section. Chunks never cross a section boundary, so the first
chunk of a heading section starts with its heading line.

Chunk boundaries fall between whitespace-separated words; a chunk ends at a
line break instead when one lies in the second half of its span, so prose
chunks usually hold whole lines. A single word longer than ``max_tokens``
tokens (a long URL, a base64 blob) is cut at token boundaries into pieces of
``max_tokens`` tokens. A chunk's text is the document's text from its first to
its last word, line breaks and indentation kept.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from tribal_memory.documents.tokens import token_offsets

_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_WORD = re.compile(r"\S+")


@dataclass(frozen=True, slots=True)
class Section:
    """A heading and the lines under it, up to the next heading (any level).

    ``heading`` is the path of open headings, ``"Guide > Install"`` (``""``
    for level 0). ``enclosing`` is the index of the nearest earlier section
    with a lower heading level (None at the top). Lines are 0-based,
    ``first_line`` inclusive and ``last_line`` exclusive. ``has_body``: holds
    a non-blank line besides its heading.
    """

    index: int
    heading: str
    level: int
    enclosing: int | None
    first_line: int
    last_line: int
    has_body: bool


@dataclass(frozen=True, slots=True)
class Chunk:
    """One chunk: its text, section index, where it lies and its token count.

    Lines are 1-based and inclusive; ``start_column`` (inclusive) and
    ``end_column`` (exclusive) are 0-based character offsets within the first
    and the last line.
    """

    content: str
    section: int
    start_line: int
    end_line: int
    tokens: int
    start_column: int
    end_column: int


@dataclass(frozen=True, slots=True)
class _Unit:
    line: int  # 0-based line index
    start: int  # character offsets within that line
    end: int
    tokens: int


def split_sections(lines: list[str], *, markdown: bool) -> list[Section]:
    """Sections of ``lines`` in document order (plain text: at most one section).

    An empty preamble (the document starts with a heading) is no section;
    every heading opens one, even when nothing but the heading is in it.
    """
    raw: list[tuple[int, str, int, int | None]] = [(0, "", 0, None)]  # first line, path, level
    if markdown:
        open_headings: list[tuple[int, str, int]] = []  # (level, title, raw index)
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
                open_headings = [h for h in open_headings if h[0] < level]
                enclosing = open_headings[-1][2] if open_headings else None
                open_headings.append((level, heading.group(2).strip(), len(raw)))
                path = " > ".join(title for _, title, _ in open_headings)
                raw.append((number, path, level, enclosing))
    bounds = [first for first, *_ in raw[1:]] + [len(lines)]
    keep_preamble = bounds[0] > 0
    shift = 0 if keep_preamble else 1  # raw index -> section index
    sections: list[Section] = []
    for position, ((first, path, level, enclosing), last) in enumerate(
        zip(raw, bounds, strict=True)
    ):
        if position == 0 and not keep_preamble:
            continue
        body_from = first + 1 if level else first
        sections.append(
            Section(
                index=position - shift,
                heading=path,
                level=level,
                enclosing=None if enclosing is None else enclosing - shift,
                first_line=first,
                last_line=last,
                has_body=any(line.strip() for line in lines[body_from:last]),
            )
        )
    return sections


def chunk_lines(
    lines: list[str], *, markdown: bool, max_tokens: int, overlap_tokens: int
) -> tuple[list[Section], list[Chunk]]:
    """Sections of ``lines`` and their chunks, in document order.

    Sections holding only their heading give no chunk.

    Args:
        lines: The document's lines (no line ends).
        markdown: Split at ATX headings; False: one section.
        max_tokens: Most model tokens in a chunk (>= 1).
        overlap_tokens: Most tokens a chunk repeats from the one before it in
            its section (0 <= overlap_tokens < max_tokens).

    Returns:
        ``(sections, chunks)``; no chunks for a document without text.
    """
    sections = split_sections(lines, markdown=markdown)
    units = _units(lines, max_tokens)
    chunks: list[Chunk] = []
    for section in sections:
        if not section.has_body:
            continue
        words = [u for n in range(section.first_line, section.last_line) for u in units[n]]
        for first, last in _chunk_spans(words, max_tokens, overlap_tokens):
            chunks.append(
                Chunk(
                    content=_text_between(lines, words[first], words[last]),
                    section=section.index,
                    start_line=words[first].line + 1,
                    end_line=words[last].line + 1,
                    tokens=sum(u.tokens for u in words[first : last + 1]),
                    start_column=words[first].start,
                    end_column=words[last].end,
                )
            )
    return sections, chunks


def _units(lines: list[str], max_tokens: int) -> list[list[_Unit]]:
    """The words of each line with their token counts; over-long words cut into pieces.

    The document is tokenized once; each token belongs to the word its first
    character is in (tokens never span whitespace).
    """
    words: list[tuple[int, int, int, int]] = []  # (line, start, end, absolute start)
    base = 0
    for number, line in enumerate(lines):
        for match in _WORD.finditer(line):
            words.append((number, match.start(), match.end(), base + match.start()))
        base += len(line) + 1
    starts: list[list[int]] = [[] for _ in words]  # token starts within each word's line
    position = 0
    for token_start, _ in token_offsets("\n".join(lines)):
        while position < len(words) - 1 and words[position + 1][3] <= token_start:
            position += 1
        if words:
            _, word_start, _, absolute = words[position]
            starts[position].append(token_start - absolute + word_start)
    by_line: list[list[_Unit]] = [[] for _ in lines]
    for (number, start, end, _), token_starts in zip(words, starts, strict=True):
        if len(token_starts) <= max_tokens:
            by_line[number].append(_Unit(number, start, end, len(token_starts)))
            continue
        cuts = [start, *token_starts[max_tokens::max_tokens], end]
        for n, (piece_start, piece_end) in enumerate(zip(cuts, cuts[1:], strict=False)):
            tokens = min(max_tokens, len(token_starts) - n * max_tokens)
            by_line[number].append(_Unit(number, piece_start, piece_end, tokens))
    return by_line


def _chunk_spans(
    words: list[_Unit], max_tokens: int, overlap_tokens: int
) -> Iterator[tuple[int, int]]:
    """Inclusive unit-index spans of the chunks of one section.

    Greedy: take units while the sum stays within ``max_tokens``; end at a
    line break instead when one lies in the second half of the span; start
    the next chunk up to ``overlap_tokens`` back. Every chunk holds at least
    one unit the chunk before it did not.
    """
    start, fresh = 0, 0  # fresh: first unit not in the previous chunk
    while start < len(words):
        end, total = start, 0  # end is exclusive
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
        overlap = 0
        while start - 1 > previous_start and overlap + words[start - 1].tokens <= overlap_tokens:
            overlap += words[start - 1].tokens
            start -= 1
        if overlap + words[fresh].tokens > max_tokens:
            start = fresh


def _text_between(lines: list[str], first: _Unit, last: _Unit) -> str:
    """The document's text from the start of ``first`` to the end of ``last``."""
    if first.line == last.line:
        return lines[first.line][first.start : last.end]
    return "\n".join(
        [
            lines[first.line][first.start :],
            *lines[first.line + 1 : last.line],
            lines[last.line][: last.end],
        ]
    )

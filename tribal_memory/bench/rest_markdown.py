"""reStructuredText section titles as Markdown headings, for the documents benchmark.

The ingest pipeline reads Markdown headings (:mod:`tribal_memory.documents.chunking`);
reST marks a section title by underlining it, optionally overlining it too,
with a line of one repeated punctuation character at least as long as the
title. Each (character, overlined) style gets the next level the first time it
appears in a document, as docutils assigns them. :func:`rest_to_markdown`
turns each title into ``#`` x level (at most 6) and keeps every other line as
it is, with two exceptions so that the Markdown reader sees no heading or code
fence the reST does not have: a line that would read as an ATX heading or a
fence (``   # comment`` in a code block indented by three spaces) is indented
by four more spaces. Titles lose their inline markup (``:mod:`argparse``` ->
``argparse``), so the heading path reads as plain text.

Not handled (none occurs in the benchmark's chapters): titles inside
directives, and a one-column simple table whose border lines would read as an
overline and underline.
"""

from __future__ import annotations

import re

_ADORNMENT = re.compile(r"^([!-/:-@\[-`{-~])\1+[ \t]*$")
_MARKDOWN_BLOCK = re.compile(r"^ {0,3}(#{1,6}([ \t]|$)|`{3,}|~{3,})")
_ROLE = re.compile(r":[A-Za-z][\w:.+-]*:`([^`]*)`")
_TARGET = re.compile(r"^(.*?)\s*<[^<>]+>$")
_LITERAL = re.compile(r"``([^`]+)``")
MAX_LEVEL = 6


def _adornment(line: str) -> str | None:
    """The character of an adornment line (``=====``), else None."""
    match = _ADORNMENT.match(line)
    return match.group(1) if match else None


def plain_title(title: str) -> str:
    """A section title without inline markup: roles, literals and link targets unwrapped.

    ``:mod:`argparse` --- Parser`` -> ``argparse --- Parser``; ``:ref:`text
    <target>``` -> ``text``; ``:class:`~a.B``` -> ``B``.
    """

    def role(match: re.Match[str]) -> str:
        text = match.group(1).lstrip("!")
        if target := _TARGET.match(text):
            return target.group(1)
        return text.rsplit(".", 1)[-1] if text.startswith("~") else text.lstrip(".")

    text = _ROLE.sub(role, title.strip())
    return _LITERAL.sub(r"\1", text).replace("\\", "")


def _is_title(line: str) -> bool:
    return bool(line.strip()) and _adornment(line) is None


def rest_to_markdown(text: str) -> str:
    """A reST text with its section titles as Markdown ATX headings (see the module docstring).

    Args:
        text: A reST document.

    Returns:
        The same lines, each title (with its adornment lines) replaced by one
        ``# Title`` line; no trailing newline is added or removed.
    """
    lines = text.split("\n")
    styles: list[tuple[str, bool]] = []
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        previous_blank = i == 0 or not lines[i - 1].strip()
        heading = _title_at(lines, i) if previous_blank else None
        if heading is not None:
            title, style, used = heading
            if style not in styles:
                styles.append(style)
            level = min(styles.index(style) + 1, MAX_LEVEL)
            out.append(f"{'#' * level} {plain_title(title)}")
            i += used
            continue
        out.append(f"    {line}" if _MARKDOWN_BLOCK.match(line) else line)
        i += 1
    return "\n".join(out)


def _title_at(lines: list[str], i: int) -> tuple[str, tuple[str, bool], int] | None:
    """The title starting at line ``i``: (title, (character, overlined), lines used), or None."""
    line = lines[i]
    over = _adornment(line)
    if over is not None and i + 2 < len(lines):
        title, under = lines[i + 1], lines[i + 2]
        if (
            _is_title(title)
            and _adornment(under) == over
            and len(under.rstrip()) >= len(title.rstrip())
            and len(line.rstrip()) == len(under.rstrip())
        ):
            return title.strip(), (over, True), 3
    if i + 1 >= len(lines) or not _is_title(line) or line[0] in " \t":
        return None
    under_char = _adornment(lines[i + 1])
    if under_char is None or len(lines[i + 1].rstrip()) < len(line.rstrip()):
        return None
    return line.strip(), (under_char, False), 2

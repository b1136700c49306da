"""Write tribal_memory/client/_sync.py from the hand-written _async.py.

Regex substitutions, applied line by line: ``async def`` -> ``def``, no
``await``, ``Async*`` names and ``aclose``/``aread``/``aiter_lines`` to their
synchronous twins. ``--check`` exits 1 when _sync.py is not what this writes
(or a substitution no longer matches anything), without writing.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

CLIENT = Path(__file__).resolve().parent.parent / "tribal_memory" / "client"
SOURCE, TARGET = CLIENT / "_async.py", CLIENT / "_sync.py"
HEADER = (
    '"""The synchronous HTTP client. GENERATED from _async.py by scripts/unasync.py: do not edit.\n'
    '\nEdit _async.py, then run ``python scripts/unasync.py``.\n"""\n'
)
SUBSTITUTIONS = [
    (r"\basync def\b", "def"),
    (r"\basync for\b", "for"),
    (r"\bawait ", ""),
    (r"\bAsyncTribalMemoryClient\b", "TribalMemoryClient"),
    (r"\bAsyncIterator\b", "Iterator"),
    (r"\bhttpx\.AsyncClient\b", "httpx.Client"),
    (r"\b__aenter__\b", "__enter__"),
    (r"\b__aexit__\b", "__exit__"),
    (r"\baclose\b", "close"),
    (r"\baread\b", "read"),
    (r"\baiter_lines\b", "iter_lines"),
    (r", awaited\.", "."),
]


def generate(source: str) -> tuple[str, list[str]]:
    """The sync module's text, and the patterns that matched nothing."""
    body = source.split('"""\n', 1)[1]  # drop the module docstring
    unused = []
    for pattern, replacement in SUBSTITUTIONS:
        body, count = re.subn(pattern, replacement, body)
        if count == 0:
            unused.append(pattern)
    return HEADER + body, unused


def main(argv: list[str]) -> int:
    """Write (or with ``--check`` compare) _sync.py; 0 when it is up to date."""
    text, unused = generate(SOURCE.read_text(encoding="utf-8"))
    if unused:
        print(f"unasync: patterns that matched nothing: {unused}", file=sys.stderr)
        return 1
    if "--check" in argv:
        if not TARGET.exists() or TARGET.read_text(encoding="utf-8") != text:
            print(f"unasync: {TARGET} is out of date: run scripts/unasync.py", file=sys.stderr)
            return 1
        return 0
    TARGET.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

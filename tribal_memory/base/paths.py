"""Workspace paths: the one rule for the path of a document or a memory.

A document is ingested under a path, and the agent tools read it back by that
path (``memory_get``) and cite it (``<path>#L3-L9``). Both go through
:func:`workspace_path`, so a path that reads a document back is always the
path it was stored under.
"""

from __future__ import annotations

import re

_DRIVE = re.compile(r"^[A-Za-z]:$")


def workspace_path(path: str) -> str | None:
    r"""``path`` as a relative POSIX path inside the workspace; None when it climbs out.

    Backslashes become slashes; empty and ``.`` segments are dropped, so a
    leading ``/`` is (paths are relative to the workspace), and so is a
    Windows drive (``C:`` as the first segment of ``C:\x\y.md``); ``..``
    takes back the segment before it.

    Examples: ``/abs/okapi.md`` -> ``abs/okapi.md``; ``C:\x\y.md`` ->
    ``x/y.md``; ``a/./b/../c.md`` -> ``a/c.md``; ``../up/zebra.md`` -> None.

    Returns:
        The normalised path (``""`` when nothing is left, e.g. for ``/``),
        or None when ``..`` climbs out of the workspace.
    """
    segments = path.replace("\\", "/").split("/")
    if len(segments) > 1 and _DRIVE.match(segments[0]):
        segments = segments[1:]
    parts: list[str] = []
    for part in segments:
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                return None
            parts.pop()
            continue
        parts.append(part)
    return "/".join(parts)

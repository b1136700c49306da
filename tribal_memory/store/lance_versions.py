"""Which old versions of the memory table ``optimize()`` removes, and pins that keep one.

Every LanceDB write commits a new table version; a version's files stay on
disk until a cleanup removes the version. A compaction or index rebuild
supersedes files without deleting them, so a table that is optimised often
(a bulk load runs one ``optimize()`` per import) keeps copy after copy of its
data and indexes: 4.6-6.0 GB at 100k memories where the newest version holds
about 0.3 GB (docs/benchmarks.md, Performance, Disk).

A reader needs a version's files for as long as it reads that version: a
search in flight when a compaction commits, another process whose handle
re-reads the newest version every ``read_consistency_s``, a backup or an
export that pinned a version for the whole copy. So a version is removed
only once it was *superseded* at least ``keep_s`` seconds ago (not once it
is ``keep_s`` old: a version current for an hour is still read for a moment
after the next commit), and a version pinned by a tag (:func:`pin_name`) is
never removed while the tag exists.

LanceDB removes versions by creation time (``optimize(cleanup_older_than=)``:
every version created before the cut-off except the newest);
:func:`cleanup_age` turns the rule above into that cut-off.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from lancedb.table import AsyncTable

PIN_PREFIX = "pin-"
"""Name prefix of the tags that keep a version while a copy reads it (:func:`pin_name`)."""
PIN_MAX_S = 86_400
"""Seconds after which a pin is removed anyway (the copy that made it crashed)."""
PRUNE_MARGIN_S = 1.0
"""Most seconds LanceDB may take between the age being computed and applied (see below)."""
PIN_MARGIN_S = 60.0
"""The margin before a pinned version: a cleanup that reaches one fails in LanceDB."""
NO_CLEANUP = timedelta(days=365_000)
"""``cleanup_older_than`` that removes nothing (LanceDB's own default is 7 days)."""
VERSION_LIST_TRIES = 3
"""Tries of :func:`list_versions` before a failure passes."""


def pin_name(now_s: float | None = None) -> str:
    """A new tag name for a pin: ``pin-<unix seconds>-<random hex>``."""
    stamp = int(time.time() if now_s is None else now_s)
    return f"{PIN_PREFIX}{stamp}-{secrets.token_hex(4)}"


def stale_pins(tags: Sequence[str], now_s: float, max_age_s: float = PIN_MAX_S) -> list[str]:
    """The pins among ``tags`` made more than ``max_age_s`` seconds before ``now_s``.

    Tags not named by :func:`pin_name` are never stale (a user's own tags stay).
    """
    stale: list[str] = []
    for tag in tags:
        if not tag.startswith(PIN_PREFIX):
            continue
        stamp = tag[len(PIN_PREFIX) :].split("-", 1)[0]
        if stamp.isdigit() and now_s - int(stamp) > max_age_s:
            stale.append(tag)
    return stale


def cleanup_age(
    created_s: Sequence[float], now_s: float, keep_s: float, *, pinned_s: float | None = None
) -> timedelta | None:
    """LanceDB's ``cleanup_older_than`` that removes the versions superseded ``keep_s`` ago.

    Args:
        created_s: Creation times (unix seconds) of the table's versions, oldest first.
        now_s: The time now (unix seconds).
        keep_s: Seconds a superseded version stays readable.
        pinned_s: Creation time of the oldest pinned (tagged) version, if any:
            it and every later version stay, and so do those created up to
            ``PIN_MARGIN_S`` before it (LanceDB fails a cleanup that would
            remove a tagged version).

    Returns:
        The age past which versions may go, or None when none may (no
        version was superseded ``keep_s`` seconds ago). The version current
        at ``now_s - keep_s`` is kept. LanceDB applies the age a moment
        after it is computed (it compacts and indexes first, milliseconds
        unless rows came in), so the cut-off is set ``PRUNE_MARGIN_S`` (at
        most ``keep_s``) before that version, or just after the one before
        it when that came less than the margin earlier.
    """
    if pinned_s is not None and pinned_s < now_s - keep_s:
        older = [t for t in created_s if t < pinned_s - PIN_MARGIN_S]
        return timedelta(seconds=now_s - pinned_s + PIN_MARGIN_S) if older else None
    current_then = [t for t in created_s if t <= now_s - keep_s]
    if len(current_then) < 2:
        return None
    kept, before = current_then[-1], current_then[-2]
    cut = max(before + 0.001, kept - min(keep_s, PRUNE_MARGIN_S))
    # LanceDB takes whole milliseconds and warns on 0 (a version made under 0.5 ms ago).
    return timedelta(seconds=max(now_s - cut, 0.001))


async def list_versions(table: AsyncTable) -> list[dict[str, Any]]:
    """The table's versions on disk, oldest first (LanceDB's ``list_versions()``).

    LanceDB lists the version manifests and then reads each one, so a cleanup
    committed between the two (by this process's ``optimize()`` or another
    replica's) fails the read of a manifest it removed ("Not found"). That
    is the only read a prune breaks (a stress test with versions removed as
    soon as they are superseded: searches, reads by id and row counts never
    failed, this listing did about once in a hundred), so the listing is
    tried again, up to :data:`VERSION_LIST_TRIES` times, and the last
    failure passes.
    """
    for _ in range(VERSION_LIST_TRIES - 1):
        try:
            return await table.list_versions()  # type: ignore[no-any-return,no-untyped-call]
        except Exception:  # noqa: BLE001, S112 - LanceDB raises OSError/RuntimeError/...
            continue
    return await table.list_versions()  # type: ignore[no-any-return,no-untyped-call]


async def pin_version(table: AsyncTable, version: int) -> str:
    """Tag ``version`` of ``table`` so no cleanup removes it; returns the tag.

    Delete the tag (``table.tags.delete``) once done reading; a tag left by
    a crash goes after ``PIN_MAX_S`` (:func:`prune_versions`). LanceDB's
    errors pass.
    """
    name = pin_name()
    await table.tags.create(name, version)
    return name


@dataclass(frozen=True, slots=True)
class Prune:
    """What one :func:`prune_versions` did.

    Attributes:
        ran: LanceDB's ``optimize()`` ran (False: no version was old enough to go).
        committed: Versions that ``optimize()`` committed. It removes old
            versions between its compaction and its index steps, so rows
            written since the last run, or an index step the last run left
            undone, leave the version before them on disk: a later prune
            removes it.
    """

    ran: bool
    committed: int


async def prune_versions(table: AsyncTable, keep_s: float) -> Prune:
    """Remove stale pins, then the versions superseded more than ``keep_s`` seconds ago.

    Runs LanceDB's ``optimize()`` with the age from :func:`cleanup_age`;
    called right after the compaction and index steps of an ``optimize()``,
    which it then finds done (rows appended meanwhile are folded in too).
    A version that a tag names stays, and so does every later one. LanceDB's
    errors pass.
    """
    now = time.time()
    tags = await table.tags.list()
    for tag in stale_pins(list(tags), now):
        await table.tags.delete(tag)
        del tags[tag]
    versions = await list_versions(table)
    created = {int(v["version"]): v["timestamp"].timestamp() for v in versions}
    pinned = [created[t["version"]] for t in tags.values() if t["version"] in created]
    age = cleanup_age(
        sorted(created.values()), now, keep_s, pinned_s=min(pinned) if pinned else None
    )
    if age is None:
        return Prune(ran=False, committed=0)
    before = await table.version()
    await table.optimize(cleanup_older_than=age)
    return Prune(ran=True, committed=await table.version() - before)

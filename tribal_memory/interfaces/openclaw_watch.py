"""``serve --watch-openclaw``: the server keeps an OpenClaw workspace's memory files indexed.

The files are the ones OpenClaw's memory-core indexes and ``openclaw setup``
ingests (:func:`~tribal_memory.interfaces.openclaw_setup.is_memory_file`:
``MEMORY.md``, ``USER.md``, Markdown under ``memory/``), owned by the agent,
with workspace-relative paths. :func:`workspace_watcher` makes the server's
background worker (:data:`~tribal_memory.interfaces.api.app.Worker`): it runs
``ingest --watch``'s machinery
(:meth:`~tribal_memory.service.memory_service.MemoryService.watch_directory`)
on the workspace with that filter, in the server's process and on its open
service, so notes the agent writes are searchable a second or so later and
bootstrap files (``AGENTS.md``, ``SOUL.md``, ...) are never indexed. Started,
it syncs the workspace first (changes made while the server was down, files
deleted meanwhile).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

from tribal_memory.base.errors import TribalError
from tribal_memory.documents.sync import FileOutcome
from tribal_memory.interfaces.openclaw_setup import is_memory_file
from tribal_memory.service.memory_service import MemoryService

logger = logging.getLogger("tribal_memory.interfaces.openclaw_watch")

RETRY_S = 5.0
"""Wait before watching again after the store failed, in seconds."""


def report(outcome: FileOutcome) -> None:
    """Log one file's outcome (a failure as a warning)."""
    if outcome.error is not None:
        logger.warning("openclaw workspace: %s not indexed: %s", outcome.file.path, outcome.error)
    elif outcome.result is not None and outcome.result.status != "unchanged":
        result = outcome.result
        logger.info(
            "openclaw workspace: %s %s for %s (%d chunks)",
            result.path, result.status, result.owner, result.chunks,
        )  # fmt: skip


def workspace_watcher(
    workspace: Path, agent: str
) -> Callable[[MemoryService, threading.Event], None]:
    """The worker keeping ``workspace``'s memory files indexed as ``agent``'s documents.

    It returns when its stop event is set; when the store fails it logs why
    and watches again after :data:`RETRY_S`.
    """

    def watch_openclaw_workspace(service: MemoryService, stop: threading.Event) -> None:
        def ready() -> None:
            logger.info(
                "watching %s: MEMORY.md, USER.md and memory/ as %s's documents", workspace, agent
            )

        while not stop.is_set():
            try:
                service.watch_directory(
                    workspace, owner=agent, root=workspace, report=report,
                    ready=ready, include=is_memory_file, stop=stop,
                )  # fmt: skip
                return
            except TribalError as exc:
                logger.warning("watching %s failed (%s); retrying", workspace, exc.detail)
                stop.wait(RETRY_S)

    return watch_openclaw_workspace

"""The ``tribal-memory`` command line: a thin client of :class:`MemoryService`.

Output is a readable table on a terminal and JSON lines (one object per hit,
memory or summary) when stdout is not a terminal or with ``--json``
(``--no-json`` forces the tables). Progress bars go to stderr, on a terminal
only. Errors are one line on stderr, ``error: <message>``, with exit status 1
(2 for a bad command line); ``--debug`` (or ``TRIBAL_DEBUG=1``) re-raises
unexpected errors with their traceback.

``--data-dir`` and ``--json`` are accepted before the command
(``tribal-memory --json stats``) and after it (``tribal-memory stats --json``).
Every other setting comes from ``TRIBAL_*`` environment variables (see
:class:`tribal_memory.base.config.Settings`).

Modules: :mod:`.root` (the typer app, its error handling and the options
before the command), :mod:`.run` (:class:`~.run.Run`, what a command needs,
and :func:`~.run.with_run`, which opens and closes it and prints what the
command returns), :mod:`.options` (options several commands share),
:mod:`.output` (JSON lines or tables, progress bars, errors),
:mod:`.commands`, :mod:`.graph` (``intersection``,
``relate-batch``, ``memories``, ``clear-owner``, ``search-vector``),
:mod:`.documents` (``ingest``, ``documents``), :mod:`.learned` (feedback,
anchors, variants), :mod:`.keys` (API keys), :mod:`.maintenance` (``check``,
``backup``, ``restore``),
:mod:`.transfer` (``export`` and ``import``), :mod:`.agent` (``mcp`` and
``context``), :mod:`.openclaw` (``openclaw setup``) and :mod:`.bench` (the
``bench`` sub-commands).
"""

# Importing the command modules registers their commands on ``app``.
from tribal_memory.interfaces.cli import (  # noqa: F401
    agent,
    bench,
    commands,
    documents,
    graph,
    keys,
    learned,
    maintenance,
    openclaw,
    transfer,
)
from tribal_memory.interfaces.cli.root import app, main
from tribal_memory.interfaces.cli.run import Run

_Run = Run  # tests patch it as ``cli._Run``

__all__ = ["app", "main"]

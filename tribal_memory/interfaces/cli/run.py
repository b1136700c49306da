"""What one command needs (:class:`Run`) and :func:`with_run`, which gives it to a command.

A command is written as ``def get(run: Run, memory_id: IdArgument, ...) ->
Output``: :func:`with_run` adds ``ctx``, ``--data-dir`` and ``--json`` to the
signature typer reads, builds the :class:`Run`, closes the service the command
opened and prints the :class:`~.output.Output` it returned.
"""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, overload

import typer

from tribal_memory.base.config import ClientSettings, Settings
from tribal_memory.base.errors import InvalidInput
from tribal_memory.interfaces.cli.options import DataDirOption, JsonOption, UrlOption
from tribal_memory.interfaces.cli.output import Output, Printer
from tribal_memory.interfaces.cli.root import Globals

if TYPE_CHECKING:
    from tribal_memory.base.api import MemoryAPI
    from tribal_memory.service.memory_service import MemoryService


class Run(Printer):
    """One command's settings, its service (opened on first use) and its output.

    Args:
        ctx: The command's context (its parent holds the options before the command).
        data_dir: The command's ``--data-dir`` (None: the one before the command, if any).
        json_out: The command's ``--json/--no-json`` (None: the one before the command,
            else JSON lines when stdout is not a terminal).
        url: The command's ``--url`` (None: the one before the command; for a
            command that can act on a server, else ``TRIBAL_URL``).
        remote: Whether the command can act on a server (it calls :meth:`api`).
    """

    def __init__(
        self,
        ctx: typer.Context,
        data_dir: Path | None,
        json_out: bool | None,
        url: str | None = None,
        *,
        remote: bool = False,
    ) -> None:
        root = ctx.obj if isinstance(ctx.obj, Globals) else Globals(None, None, False)
        self.data_dir = data_dir or root.data_dir
        self.command = ctx.command_path
        self.url = url or root.url
        if self.url is None and remote:
            self.url = ClientSettings().url
        chosen = json_out if json_out is not None else root.json
        super().__init__(json=chosen if chosen is not None else not sys.stdout.isatty())
        self._resources = ExitStack()
        self._service: MemoryService | None = None
        self._client: MemoryAPI | None = None

    def settings(self, **overrides: Any) -> Settings:
        """Settings from the environment, with ``--data-dir`` and ``overrides`` applied."""
        if self.data_dir is not None:
            overrides["data_dir"] = self.data_dir
        return Settings(**overrides)

    def api(self) -> MemoryAPI:
        """What the command acts on: the server at ``--url``, else the open service.

        A :class:`~tribal_memory.client.TribalMemoryClient` (its key from
        ``TRIBAL_API_KEY``) when the command was given ``--url`` (or, for a
        command that can act on a server, ``TRIBAL_URL`` is set); else
        :meth:`service`. Closed when the command ends.

        Raises:
            InvalidInput: both ``--url`` and ``--data-dir`` were given.
        """
        if self.url is None:
            return self.service()
        if self.data_dir is not None:
            raise InvalidInput("give --url (a running server) or --data-dir, not both")
        if self._client is None:
            from tribal_memory.client import TribalMemoryClient

            self._client = self._resources.enter_context(TribalMemoryClient(self.url))
        return self._client

    def service(self) -> MemoryService:
        """The open service: opened (loading the embedding model) on the first call.

        It is closed when the command ends (see :func:`with_run`).

        Raises:
            InvalidInput: ``--url`` was given to a command that needs the data dir itself.
        """
        if self.url is not None:
            raise InvalidInput(
                f"'{self.command}' works on a data dir, not over HTTP: drop --url "
                "(a running server holds its data dir; stop it first)"
            )
        if self._service is None:
            from tribal_memory.service.memory_service import MemoryService

            self._service = self._resources.enter_context(MemoryService(self.settings()))
        return self._service

    def __enter__(self) -> Run:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool | None:
        self._service = self._client = None
        return self._resources.__exit__(exc_type, exc, traceback)


Command = Callable[..., Output | None]


@overload
def with_run(command: Command) -> Callable[..., None]: ...


@overload
def with_run(
    *, data_dir: bool = True, remote: bool = False
) -> Callable[[Command], Callable[..., None]]: ...


def with_run(
    command: Command | None = None, *, data_dir: bool = True, remote: bool = False
) -> Callable[..., None] | Callable[[Command], Callable[..., None]]:
    """Make ``command(run, ...)`` a typer callback that also takes ``--data-dir`` and ``--json``.

    The callback's parameters are ``ctx``, ``command``'s own (after ``run``),
    then ``data_dir`` and ``json_out``. It builds the :class:`Run`, calls
    ``command``, closes the service if it was opened, then shows the returned
    :class:`~.output.Output` (None: the command printed everything itself).
    ``@with_run(data_dir=False)``: a command that opens no data dir (the
    benchmarks make their own) takes no ``--data-dir``. ``@with_run(remote=True)``:
    a command that can act on a running server (it calls :meth:`Run.api`) also
    takes ``--url`` and reads ``TRIBAL_URL``.
    """
    if command is None:
        return functools.partial(_wrap, data_dir=data_dir, remote=remote)
    return _wrap(command, data_dir=data_dir, remote=remote)


def _wrap(command: Command, *, data_dir: bool, remote: bool = False) -> Callable[..., None]:
    own = list(inspect.signature(command, eval_str=True).parameters.values())[1:]
    param = functools.partial(inspect.Parameter, kind=inspect.Parameter.POSITIONAL_OR_KEYWORD)
    parameters = [
        param("ctx", annotation=typer.Context),
        *own,
        *([param("data_dir", default=None, annotation=DataDirOption)] if data_dir else []),
        *([param("url", default=None, annotation=UrlOption)] if remote else []),
        param("json_out", default=None, annotation=JsonOption),
    ]

    @functools.wraps(command)
    def callback(
        ctx: typer.Context,
        data_dir: Path | None = None,
        json_out: bool | None = None,
        url: str | None = None,
        **own: Any,
    ) -> None:
        with Run(ctx, data_dir, json_out, url, remote=remote) as run:
            output = command(run, **own)
        if output is not None:
            run.show(output)

    signature = inspect.Signature(parameters, return_annotation=None)
    callback.__signature__ = signature  # type: ignore[attr-defined]
    callback.__annotations__ = {p.name: p.annotation for p in parameters}
    return callback

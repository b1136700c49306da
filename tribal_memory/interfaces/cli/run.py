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

from tribal_memory.base.config import Settings
from tribal_memory.interfaces.cli.options import DataDirOption, JsonOption
from tribal_memory.interfaces.cli.output import Output, Printer
from tribal_memory.interfaces.cli.root import Globals

if TYPE_CHECKING:
    from tribal_memory.service.memory_service import MemoryService


class Run(Printer):
    """One command's settings, its service (opened on first use) and its output.

    Args:
        ctx: The command's context (its parent holds the options before the command).
        data_dir: The command's ``--data-dir`` (None: the one before the command, if any).
        json_out: The command's ``--json/--no-json`` (None: the one before the command,
            else JSON lines when stdout is not a terminal).
    """

    def __init__(self, ctx: typer.Context, data_dir: Path | None, json_out: bool | None) -> None:
        root = ctx.obj if isinstance(ctx.obj, Globals) else Globals(None, None, False)
        self.data_dir = data_dir or root.data_dir
        chosen = json_out if json_out is not None else root.json
        super().__init__(json=chosen if chosen is not None else not sys.stdout.isatty())
        self._resources = ExitStack()
        self._service: MemoryService | None = None

    def settings(self, **overrides: Any) -> Settings:
        """Settings from the environment, with ``--data-dir`` and ``overrides`` applied."""
        if self.data_dir is not None:
            overrides["data_dir"] = self.data_dir
        return Settings(**overrides)

    def service(self) -> MemoryService:
        """The open service: opened (loading the embedding model) on the first call.

        It is closed when the command ends (see :func:`with_run`).
        """
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
        self._service = None
        return self._resources.__exit__(exc_type, exc, traceback)


Command = Callable[..., Output | None]


@overload
def with_run(command: Command) -> Callable[..., None]: ...


@overload
def with_run(*, data_dir: bool = True) -> Callable[[Command], Callable[..., None]]: ...


def with_run(
    command: Command | None = None, *, data_dir: bool = True
) -> Callable[..., None] | Callable[[Command], Callable[..., None]]:
    """Make ``command(run, ...)`` a typer callback that also takes ``--data-dir`` and ``--json``.

    The callback's parameters are ``ctx``, ``command``'s own (after ``run``),
    then ``data_dir`` and ``json_out``. It builds the :class:`Run`, calls
    ``command``, closes the service if it was opened, then shows the returned
    :class:`~.output.Output` (None: the command printed everything itself).
    ``@with_run(data_dir=False)``: a command that opens no data dir (the
    benchmarks make their own) takes no ``--data-dir``.
    """
    if command is None:
        return functools.partial(_wrap, data_dir=data_dir)
    return _wrap(command, data_dir=data_dir)


def _wrap(command: Command, *, data_dir: bool) -> Callable[..., None]:
    own = list(inspect.signature(command, eval_str=True).parameters.values())[1:]
    param = functools.partial(inspect.Parameter, kind=inspect.Parameter.POSITIONAL_OR_KEYWORD)
    parameters = [
        param("ctx", annotation=typer.Context),
        *own,
        *([param("data_dir", default=None, annotation=DataDirOption)] if data_dir else []),
        param("json_out", default=None, annotation=JsonOption),
    ]

    @functools.wraps(command)
    def callback(
        ctx: typer.Context, data_dir: Path | None = None, json_out: bool | None = None, **own: Any
    ) -> None:
        with Run(ctx, data_dir, json_out) as run:
            output = command(run, **own)
        if output is not None:
            run.show(output)

    signature = inspect.Signature(parameters, return_annotation=None)
    callback.__signature__ = signature  # type: ignore[attr-defined]
    callback.__annotations__ = {p.name: p.annotation for p in parameters}
    return callback

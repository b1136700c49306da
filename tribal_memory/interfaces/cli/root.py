"""The root command: the typer app, its error handling, global options and ``_Run``."""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from pydantic import ValidationError
from rich.console import Console
from typer.core import TyperGroup

from tribal_memory.base.config import Settings
from tribal_memory.base.errors import TribalError
from tribal_memory.interfaces.cli.output import _fail, _json_default, _one_line, _settings_error

if TYPE_CHECKING:
    from tribal_memory.service.memory_service import MemoryService


class _Group(TyperGroup):
    """The root command: turns every failure into one line on stderr.

    Errors raised by commands are handled in :meth:`invoke` (where the
    ``--debug`` flag is known); command-line errors in :meth:`main`. Both run
    under ``typer.testing.CliRunner`` too, so tests see what users see.
    """

    # ``Any``: the base class types ctx with typer's vendored click Context.
    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except (typer.TyperException, typer.Exit, typer.Abort, BrokenPipeError):
            raise
        except TribalError as exc:
            _fail(exc.detail)
        except ValidationError as exc:
            _fail(_settings_error(exc))
        # Last resort, so an unforeseen failure is one line, not a traceback.
        except Exception as exc:  # noqa: BLE001
            if isinstance(ctx.obj, _Globals) and ctx.obj.debug:
                raise
            _fail(f"{type(exc).__name__}: {exc} (set TRIBAL_DEBUG=1 for the traceback)")

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        try:
            result = super().main(
                args, prog_name, complete_var, False, windows_expand_args, **extra
            )
        except typer.TyperException as exc:  # click's ClickException and UsageError
            result = exc.exit_code
            if type(exc).__name__ == "NoArgsIsHelpError":  # its message is the help text
                typer.echo(exc.format_message(), err=True)
            else:
                usage_ctx = getattr(exc, "ctx", None)
                hint = f" (see '{usage_ctx.command_path} --help')" if usage_ctx else ""
                typer.echo(f"error: {_one_line(exc.format_message())}{hint}", err=True)
        except typer.Abort:
            typer.echo("error: aborted", err=True)
            result = 1
        if not standalone_mode:
            return result
        sys.exit(result if isinstance(result, int) else 0)


app = typer.Typer(
    cls=_Group,
    name="tribal-memory",
    help="A memory server for AI agents: capture, search and serve memories.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


# -- options shared by every command ---------------------------------------------

DataDirOption = Annotated[
    Path | None,
    typer.Option(
        "--data-dir",
        help="Data directory (default: $TRIBAL_DATA_DIR, else the per-user data dir).",
        file_okay=False,
    ),
]
JsonOption = Annotated[
    bool | None,
    typer.Option(
        "--json/--no-json",
        help="JSON lines output (default: when stdout is not a terminal).",
        show_default=False,
    ),
]


@dataclasses.dataclass(frozen=True)
class _Globals:
    data_dir: Path | None
    json: bool | None
    debug: bool


@app.callback()
def _root(
    ctx: typer.Context,
    data_dir: DataDirOption = None,
    json_out: JsonOption = None,
    debug: Annotated[
        bool,
        typer.Option(
            "--debug", envvar="TRIBAL_DEBUG", help="Show tracebacks of unexpected errors."
        ),
    ] = False,
) -> None:
    """tribal-memory: memories for AI agents that improve with use."""
    ctx.obj = _Globals(data_dir, json_out, debug)


class _Run:
    """What one command needs: its settings, output mode and consoles."""

    def __init__(self, ctx: typer.Context, data_dir: Path | None, json_out: bool | None) -> None:
        root = ctx.obj if isinstance(ctx.obj, _Globals) else _Globals(None, None, False)
        self.data_dir = data_dir or root.data_dir
        chosen = json_out if json_out is not None else root.json
        self.json = chosen if chosen is not None else not sys.stdout.isatty()
        # markup=False: memory text is printed as it is, never read as rich markup.
        self.out = Console(markup=False, highlight=False)
        self.err = Console(stderr=True, markup=False, highlight=False)

    def settings(self, **overrides: Any) -> Settings:
        """Settings from the environment, with ``--data-dir`` and ``overrides`` applied."""
        if self.data_dir is not None:
            overrides["data_dir"] = self.data_dir
        return Settings(**overrides)

    @contextmanager
    def service(self, settings: Settings | None = None) -> Iterator[MemoryService]:
        """An open service (loads the embedding model), closed on exit."""
        from tribal_memory.service.memory_service import MemoryService

        with MemoryService(settings or self.settings()) as service:
            yield service

    def emit(self, obj: dict[str, Any]) -> None:
        """One JSON line on stdout."""
        typer.echo(json.dumps(obj, ensure_ascii=False, default=_json_default))

    @property
    def show_progress(self) -> bool:
        return not self.json and sys.stderr.isatty()


def main() -> None:
    """Entry point of the ``tribal-memory`` console script."""
    app()

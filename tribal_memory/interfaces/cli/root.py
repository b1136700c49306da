"""The root command: the typer app, its error handling and the options before the command."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import ValidationError
from typer.core import TyperGroup

from tribal_memory.base.errors import TribalError
from tribal_memory.interfaces.cli.options import DataDirOption, JsonOption, UrlOption
from tribal_memory.interfaces.cli.output import fail, one_line


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
            fail(exc.detail)
        except ValidationError as exc:
            fail(_settings_error(exc))
        # Last resort, so an unforeseen failure is one line, not a traceback.
        except Exception as exc:  # noqa: BLE001
            if isinstance(ctx.obj, Globals) and ctx.obj.debug:
                raise
            fail(f"{type(exc).__name__}: {exc} (set TRIBAL_DEBUG=1 for the traceback)")

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
                typer.echo(f"error: {one_line(exc.format_message())}{hint}", err=True)
        except typer.Abort:
            typer.echo("error: aborted", err=True)
            result = 1
        if not standalone_mode:
            return result
        sys.exit(result if isinstance(result, int) else 0)


def _settings_error(exc: ValidationError) -> str:
    """A settings validation error as one message naming the ``TRIBAL_*`` variables."""
    problems = [
        f"TRIBAL_{'_'.join(str(part) for part in error['loc']).upper()}: {error['msg']}"
        for error in exc.errors()
    ]
    return "invalid setting " + "; ".join(problems)


app = typer.Typer(
    cls=_Group,
    name="tribal-memory",
    help="A memory server for AI agents: capture, search and serve memories.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@dataclasses.dataclass(frozen=True)
class Globals:
    """The options given before the command (``tribal-memory --json stats``)."""

    data_dir: Path | None
    json: bool | None
    debug: bool
    url: str | None = None


def _show_version(show: bool) -> None:
    """``--version``: print the installed version and stop."""
    if show:
        from tribal_memory import __version__

        typer.echo(f"tribal-memory {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    ctx: typer.Context,
    data_dir: DataDirOption = None,
    url: UrlOption = None,
    json_out: JsonOption = None,
    debug: Annotated[
        bool,
        typer.Option(
            "--debug", envvar="TRIBAL_DEBUG", help="Show tracebacks of unexpected errors."
        ),
    ] = False,
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_show_version, is_eager=True, help="Show the version and exit."
        ),
    ] = False,
) -> None:
    """tribal-memory: memories for AI agents that improve with use."""
    ctx.obj = Globals(data_dir, json_out, debug, url)


def main() -> None:
    """Entry point of the ``tribal-memory`` console script."""
    app()

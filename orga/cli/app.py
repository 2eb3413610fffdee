"""The ``orga`` command: one Typer application; a verb's module is imported only when that verb
runs (or its own help is asked), so ``orga --help`` answers at once (``orga.cli.verbs``)."""

from __future__ import annotations

import sys
import traceback
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from typer.core import TyperCommand, TyperGroup

if TYPE_CHECKING:  # Typer's own copy of click
    from typer._click import Command, Context, HelpFormatter

from orga.cli.help_text import VARIABLES, VERBS
from orga.cli.leave import exit_process
from orga.cli.verbs import load

__all__ = ["app", "main"]

HELP = f"""Durable, governed agent reasoning loops on Temporal.

Every verb talks to Temporal with the worker's settings, read from the environment (the list
comes from orga.runtime.settings.Settings, as does the docs' reference/environment page):

{VARIABLES}

A day at the desk: `orga pending` (what waits), `orga state ID` (inspect), then
`orga approve` / `deny` / `resolve` (act); `orga desk` does the same in a browser.
Every verb takes --json. Exit codes: 0 done, 1 failed, 2 invalid input, 130 interrupted."""

_SETTINGS: dict[str, Any] = {
    "rich_markup_mode": "markdown",
    "context_settings": {"help_option_names": ["-h", "--help"]},
    "pretty_exceptions_enable": False,
}
_MODULE_OF = {verb: module for verb, module, _ in VERBS}
_HELP_OF = {verb: first for verb, _, first in VERBS}


class _Verbs(TyperGroup):
    """The verbs, each imported only when it runs (or its own help is asked): the list in
    ``orga --help`` comes from ``orga.cli.help_text``, so asking for it imports no verb."""

    listing = False

    def list_commands(self, ctx: Context) -> list[str]:
        return list(_MODULE_OF)

    def get_command(self, ctx: Context, cmd_name: str) -> Command | None:
        module = _MODULE_OF.get(cmd_name)
        if module is None:
            return None
        if self.listing:  # the application's help: the verb's name and first paragraph
            return TyperCommand(cmd_name, help=_HELP_OF[cmd_name])
        return typer.main.get_group(load(module, **_SETTINGS)).get_command(ctx, cmd_name)

    def format_help(self, ctx: Context, formatter: HelpFormatter) -> None:
        self.listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self.listing = False


app = typer.Typer(name="orga", help=HELP, no_args_is_help=True, cls=_Verbs, **_SETTINGS)


def _print_version(asked: bool) -> None:
    if asked:
        from importlib.metadata import PackageNotFoundError, version

        from orga.runtime.safe_text import one_line

        try:
            found = version("orga")
        except PackageNotFoundError:  # run from a source tree that was never installed
            found = "unknown (not installed)"
        print(one_line(f"orga {found}"))
        raise typer.Exit()


@app.callback()
def _root(
    show_version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_print_version,
            is_eager=True,
            help="Print orga's version (the installed package's) and exit.",
        ),
    ] = False,
) -> None:
    # The application's options (its help is HELP): each verb is a command of its own.
    del show_version


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """Entry point of the ``orga`` command. Every verb ends here: its output flushed, the
    process leaves with ``os._exit`` (``orga.cli.leave.exit_process``), never through the
    interpreter's finalisation, in which temporalio's threads can still run and crash it
    (``Fatal Python error: PyGILState_Release``, sdk-python#300) after the verb succeeded."""
    code = 1
    try:
        app(args=list(argv) if argv is not None else None, prog_name="orga")
        code = 0
    except SystemExit as stop:
        if isinstance(stop.code, int) or stop.code is None:
            code = stop.code or 0
        else:  # a message instead of a code: what the interpreter would print, then 1
            from orga.runtime.safe_text import one_line

            print(one_line(str(stop.code)), file=sys.stderr)
    except KeyboardInterrupt:
        code = 130
    except BaseException:  # reported as the interpreter would: a traceback, exit status 1
        traceback.print_exc()
    exit_process(code)

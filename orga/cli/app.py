"""The ``orga`` command: one Typer application, its verbs registered by their modules."""

from __future__ import annotations

import sys
import traceback
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import Annotated, NoReturn

import typer

from orga.cli import (
    api,
    approvers,
    audit,
    chat,
    codec,
    conversations,
    decisions,
    desk,
    incidents,
    knowledge,
    loops,
    mcp,
    policy,
    receipts,
    run,
    schedule,
    server,
    spend,
    store,
    tasks,
)
from orga.cli.common import exit_process
from orga.runtime.safe_text import one_line
from orga.runtime.settings_docs import cli_variables

__all__ = ["app", "main"]

HELP = f"""Durable, governed agent reasoning loops on Temporal.

Every verb talks to Temporal with the worker's settings, read from the environment (the list
comes from orga.runtime.settings.Settings, as does the docs' reference/environment page):

{cli_variables()}

A day at the desk: `orga pending` (what waits), `orga state ID` (inspect), then
`orga approve` / `deny` / `resolve` (act); `orga desk` does the same in a browser.
Every verb takes --json. Exit codes: 0 done, 1 failed, 2 invalid input, 130 interrupted."""

app = typer.Typer(
    name="orga",
    help=HELP,
    no_args_is_help=True,
    rich_markup_mode="markdown",
    context_settings={"help_option_names": ["-h", "--help"]},
    pretty_exceptions_enable=False,
)
for module in (
    server,
    run,
    api,
    loops,
    decisions,
    conversations,
    chat,
    approvers,
    desk,
    tasks,
    schedule,
    knowledge,
    audit,
    receipts,
    incidents,
    policy,
    mcp,
    store,
    spend,
    codec,
):
    module.register(app)


def _print_version(asked: bool) -> None:
    if asked:
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
    process leaves with ``os._exit`` (``common.exit_process``), never through the
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
            print(one_line(str(stop.code)), file=sys.stderr)
    except KeyboardInterrupt:
        code = 130
    except BaseException:  # reported as the interpreter would: a traceback, exit status 1
        traceback.print_exc()
    exit_process(code)

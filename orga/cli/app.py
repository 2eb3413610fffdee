"""The ``orga`` command: one Typer application, its verbs registered by their modules."""

from __future__ import annotations

from collections.abc import Sequence

import typer

from orga.cli import (
    approvers,
    audit,
    chat,
    codec,
    conversations,
    decisions,
    knowledge,
    loops,
    mcp,
    policy,
    schedule,
    server,
    store,
    tasks,
)
from orga.desk import page
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
    loops,
    decisions,
    conversations,
    chat,
    approvers,
    page,
    tasks,
    schedule,
    knowledge,
    audit,
    policy,
    mcp,
    store,
    codec,
):
    module.register(app)


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of the ``orga`` command."""
    app(args=list(argv) if argv is not None else None, prog_name="orga")

"""What ``orga --help`` shows without importing the verbs: written from the code by ``uv run
python -m orga.cli.verbs`` into ``orga/cli/help_text.py`` (``tests/test_cli_startup.py`` fails
when it differs, so it cannot drift).

The ``orga`` command imports a verb's module only when that verb runs (``orga.cli.app``), so
``orga --help`` lists each verb with the first paragraph of its help as written here, and the
variables the CLI reads as ``Settings`` documents them.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from pathlib import Path

import typer
from typer.core import TyperGroup

__all__ = ["MODULES", "help_text_module", "load", "main"]

MODULES: tuple[str, ...] = (
    "server",
    "run",
    "api",
    "loops",
    "decisions",
    "conversations",
    "chat",
    "approvers",
    "desk",
    "tasks",
    "schedule",
    "knowledge",
    "audit",
    "receipts",
    "incidents",
    "policy",
    "judges",
    "mcp",
    "store",
    "spend",
    "codec",
)
"""The modules of ``orga.cli`` that register verbs (``register(app)``), in the help's order."""

HELP_TEXT = Path(__file__).with_name("help_text.py")


def load(module: str, **settings: object) -> typer.Typer:
    """A Typer application with the verbs of ``orga.cli.<module>`` registered."""
    verbs = typer.Typer(**settings)  # pyright: ignore[reportArgumentType]
    importlib.import_module(f"orga.cli.{module}").register(verbs)
    return verbs


def _first_paragraph(help_text: str | None) -> str:
    """What Typer shows of a verb in a list: its help's first paragraph, on one line."""
    return inspect.cleandoc(help_text or "").split("\n\n")[0].replace("\n", " ").strip()


def help_text_module() -> str:
    """``orga/cli/help_text.py`` as the code says it."""
    from orga.runtime.settings_docs import cli_variables

    verbs: list[str] = []
    groups: list[str] = []  # verbs with verbs of their own: listed last, as Typer lists them
    for module in MODULES:
        group = typer.main.get_group(load(module))
        for name, command in group.commands.items():
            first = _first_paragraph(command.short_help or command.help)
            row = f"    ({name!r}, {module!r}, {first!r}),"
            (groups if isinstance(command, TyperGroup) else verbs).append(row)
    rows = verbs + groups
    return (
        '"""Written by ``uv run python -m orga.cli.verbs`` from the verbs and ``Settings``: do '
        'not edit."""\n\n'
        "from __future__ import annotations\n\n"
        "from typing import Final\n\n"
        '__all__ = ["VARIABLES", "VERBS"]\n\n'
        f"VARIABLES: Final = {cli_variables()!r}\n"
        '"""The variables the ``orga`` command reads (Markdown)."""\n\n'
        "VERBS: Final[tuple[tuple[str, str, str], ...]] = (\n" + "\n".join(rows) + "\n)\n"
        '"""Each verb: its name, the module of ``orga.cli`` that defines it, the first '
        'paragraph of its help."""\n'
    )


def main() -> int:
    """Write ``orga/cli/help_text.py`` if it differs; say so."""
    text = help_text_module()
    if not HELP_TEXT.exists() or HELP_TEXT.read_text() != text:
        HELP_TEXT.write_text(text)
        print(f"wrote {HELP_TEXT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

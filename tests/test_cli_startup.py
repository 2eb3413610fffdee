"""``orga --help`` answers at once (issue 66): it imports no verb — no Temporal client, no
store, no pydantic — and lists the verbs from ``orga/cli/help_text.py``, which must say what
the verbs' own code says. ``bench/cli_startup.py`` measures the time; this holds the imports."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from orga.cli import verbs
from orga.cli.app import app
from orga.cli.help_text import VERBS

ROOT = Path(__file__).resolve().parent.parent

HELP_IMPORTS = {
    "orga",
    "orga.cli",
    "orga.cli.app",
    "orga.cli.help_text",
    "orga.cli.leave",
    "orga.cli.verbs",
}
"""Every module of orga's that ``orga --help`` imports."""
NEVER_FOR_HELP = ("temporalio", "sqlalchemy", "pydantic", "httpx", "cedarpy", "cryptography")
"""Libraries ``orga --help`` does not import (each a tenth of a second or more)."""


def test_the_help_text_is_what_the_verbs_say() -> None:
    assert verbs.HELP_TEXT.read_text() == verbs.help_text_module(), (
        "orga/cli/help_text.py differs from the verbs' help and the settings: run "
        "`uv run python -m orga.cli.verbs` and commit what it writes"
    )


def test_every_module_that_registers_verbs_is_listed() -> None:
    registering = {
        path.stem
        for path in (ROOT / "orga" / "cli").glob("*.py")
        if any(
            isinstance(node, ast.FunctionDef) and node.name == "register"
            for node in ast.parse(path.read_text()).body
        )
    }
    assert registering == set(verbs.MODULES)


def _imported_by(*argv: str) -> set[str]:
    """The modules ``orga <argv>`` has imported when it exits (in a fresh interpreter)."""
    code = (
        "import sys\n"
        "from orga.cli.app import app\n"
        "try:\n"
        f"    app({list(argv)!r}, prog_name='orga')\n"
        "except SystemExit:\n"
        "    pass\n"
        "print('\\n'.join(sorted(sys.modules)), file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True
    )
    return set(done.stderr.split())


@pytest.mark.parametrize("argv", [("--help",), ()], ids=["--help", "no verb"])
def test_orga_help_imports_no_verb(argv: tuple[str, ...]) -> None:
    imported = _imported_by(*argv)
    assert {m for m in imported if m == "orga" or m.startswith("orga.")} == HELP_IMPORTS
    assert not [m for m in imported if m.split(".")[0] in NEVER_FOR_HELP]


def test_a_verb_imports_its_own_module_and_what_it_uses() -> None:
    """``orga state --help``: the loops' verbs, and ``run``'s printer they use — no other."""
    imported = _imported_by("state", "--help")
    assert {m.removeprefix("orga.cli.") for m in imported} & set(verbs.MODULES) == {"loops", "run"}


def test_every_verb_listed_runs_its_own_help() -> None:
    """Each verb the list names is found in its module (``--help`` of each, in process)."""
    from typer.testing import CliRunner

    runner = CliRunner()
    for verb, _, first in VERBS:
        shown = runner.invoke(app, [verb, "--help"], prog_name="orga")
        assert shown.exit_code == 0, (verb, shown.output)
        assert " ".join(first.split()[:3]).rstrip(".:,") in " ".join(shown.output.split())

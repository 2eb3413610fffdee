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


def test_a_contract_is_built_when_first_used_and_a_worker_builds_them_all() -> None:
    """Importing the contracts builds no validator (``orga state`` builds what a loop's state
    holds, not the journal's events or a task's input); ``build_contracts`` — which a worker
    and a replayer call before their first task — builds every one, once."""
    code = (
        "from orga.cli import loops\n"  # what `orga state` imports
        "from orga.contracts.wire import Contract, build_contracts\n"
        "def every(model):\n"
        "    for sub in model.__subclasses__():\n"
        "        yield sub\n"
        "        yield from every(sub)\n"
        "models = {Contract, *every(Contract)}\n"
        "print(sum(m.__pydantic_complete__ for m in models), len(models))\n"
        "loops.LoopState.model_validate({'workflow_id': 'w', 'agent_id': 'a', 'usage': {},"
        " 'phase': 'observing', 'started_at': '2026-12-06T00:00:00Z', 'status': 'running',"
        " 'iteration': 1})\n"
        "complete = [m.__pydantic_complete__ for m in models]\n"
        "print(sum(complete), loops.Journal.__pydantic_complete__)\n"
        "built = build_contracts()\n"
        "print(built, all(m.__pydantic_complete__ for m in models), build_contracts())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True
    )
    imported, read, built = (line.split() for line in done.stdout.splitlines())
    assert imported[0] == "0" and int(imported[1]) > 100
    assert 0 < int(read[0]) < int(imported[1]) and read[1] == "False"
    assert built == [str(int(imported[1]) - int(read[0])), "True", "0"]


def test_a_worker_builds_every_contract_before_its_first_task() -> None:
    """A replayer (made as a worker's runner is) leaves no contract unbuilt; a worker's
    configuration calls the same ``build_contracts``."""
    import inspect

    from orga import plugin

    code = (
        "from orga.plugin import replayer\n"
        "from orga.contracts.wire import build_contracts\n"
        "replayer()\n"
        "print(build_contracts())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True
    )
    assert done.stdout.split() == ["0"]
    assert "build_contracts()" in inspect.getsource(plugin.OrgaPlugin.configure_worker)


@pytest.mark.parametrize("verb", ["state", "pending", "list"])
def test_a_read_verb_imports_no_store(verb: str) -> None:
    """The read verbs read Temporal, not orga's store: no SQLAlchemy (~0.2 s) — ``orga
    pending`` reads a held call's pause from its text (``orga.runtime.pause_targets``)."""
    imported = _imported_by(verb, "--help")
    assert not [m for m in imported if m.split(".")[0] in ("sqlalchemy", "cedarpy", "cryptography")]
    assert "orga.runtime.pauses" not in imported

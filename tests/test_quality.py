"""How the tests themselves are written: shared helpers live in ``tests.helpers``, and a test
waits on conditions, not on hand-written polling loops.

Lint, format and type checks are not tests: ``.ci/run`` and ``make check`` run ruff and pyright
as their own steps before the suite.
"""

from __future__ import annotations

import ast
from pathlib import Path
from types import ModuleType

import pytest

from tests.helpers import parse_python

TESTS = Path(__file__).resolve().parent
MODULES = sorted(TESTS.rglob("*.py"))


def imported(path: Path) -> list[str]:
    """The modules ``path`` imports from, wherever in the file."""
    found: list[str] = []
    for node in ast.walk(parse_python(path)):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.append(node.module)
        elif isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
    return found


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(TESTS)))
def test_no_module_imports_a_test_module(path: Path) -> None:
    """A helper two test modules need lives in ``tests.helpers`` (or a support module such as
    ``tests.sample_tools``), never in one of them for the other to import."""
    for module in imported(path):
        parts = module.split(".")
        assert not (parts[0] == "tests" and any(p.startswith("test_") for p in parts)), (
            f"{path.relative_to(TESTS)} imports {module!r}: a test module's helpers are its own; "
            "move what others need to tests/helpers"
        )


def test_the_helpers_are_one_import() -> None:
    """Every name ``tests.helpers`` offers is in its ``__all__`` (which ruff keeps sorted)."""
    import tests.helpers as helpers

    offered = {n for n, v in vars(helpers).items() if not isinstance(v, ModuleType)}
    assert set(helpers.__all__) == {n for n in offered if not n.startswith("_")}

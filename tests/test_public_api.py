"""The public surface, pinned: every package states it with a sorted ``__all__`` that resolves;
the public modules' lists are exactly the names in ``tests/public_api.json``, and every other
module is private
(``_name``) or in one of the internal rooms ``docs/reference/stability.md`` lists.

A change to a list here is a change to the stable surface: say it in ``CHANGELOG.md``.
"""

from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
import re
from pathlib import Path
from typing import get_args

import pytest

PACKAGES = ["orga"]

ROOT = Path(__file__).resolve().parent.parent

PUBLIC: dict[str, list[str]] = json.loads((ROOT / "tests" / "public_api.json").read_text())
"""What each public module exports, exactly (as httpx's tests/test_exported_members.py does):
kept in ``tests/public_api.json``, edited by hand — a change to it is a change to the stable
surface."""


def isort_key(name: str) -> tuple[int, str]:
    """Ruff's RUF022 order: CONSTANTS, then Classes, then functions."""
    if name.isupper():
        return (0, name)
    if name[:1].isupper():
        return (1, name)
    return (2, name)


def modules() -> list[str]:
    found: list[str] = []
    for package in PACKAGES:
        found.append(package)
        path = importlib.import_module(package).__path__
        found += [info.name for info in pkgutil.walk_packages(path, f"{package}.")]
    return found


@pytest.mark.parametrize("name", modules())
def test_all_is_sorted_and_resolves(name: str) -> None:
    module = importlib.import_module(name)
    exported = getattr(module, "__all__", None)
    assert exported is not None, f"{name} has no __all__"
    assert list(exported) == sorted(exported, key=isort_key), f"{name}.__all__ is not sorted"
    for symbol in exported:
        assert hasattr(module, symbol), f"{name}.__all__ names missing {symbol!r}"


def test_the_public_surface_loads_lazily() -> None:
    """``import orga`` loads nothing else; each public name resolves to its home module."""
    import subprocess
    import sys

    script = (
        "import sys, orga; loaded = sorted(m for m in sys.modules if m.startswith('orga.')); "
        "assert loaded == [], loaded; "
        "from orga import tool, ToolContext, LoopConfig, LoopResult, Message; "
        "assert tool.__module__ == 'orga.tools.sdk'; print('ok')"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert result.stdout.strip() == "ok", result.stderr


def test_committed_json_schemas_match_the_models() -> None:
    """``schemas/`` is what editors and the README point at: regenerate it after a contract
    changes (``uv run python -m orga.runtime.schemas``)."""
    import json
    from pathlib import Path

    from orga.runtime.schemas import SCHEMAS, render

    directory = Path(__file__).resolve().parent.parent / "schemas"
    for filename, (model, description) in SCHEMAS.items():
        committed = (directory / filename).read_text(encoding="utf-8")
        assert committed == render(model, description), f"{filename} is stale"
        assert "carry" not in json.loads(committed)["properties"]


def test_the_schemas_accept_the_examples_and_refuse_typos() -> None:
    import json
    from pathlib import Path

    import jsonschema

    root = Path(__file__).resolve().parent.parent
    task_schema = json.loads((root / "schemas" / "task.schema.json").read_text())
    for example in sorted((root / "examples" / "tasks").glob("*.json")):
        jsonschema.validate(json.loads(example.read_text()), task_schema)
    loop_schema = json.loads((root / "schemas" / "loop-input.schema.json").read_text())
    good = {"messages": [{"role": "user", "content": "hi"}], "config": {"tools": ["add"]}}
    jsonschema.validate(good, loop_schema)
    typo = {"messages": [{"role": "user", "content": "hi"}], "config": {"max_iteratons": 3}}
    with pytest.raises(jsonschema.ValidationError, match="max_iteratons"):
        jsonschema.validate(typo, loop_schema)
    with pytest.raises(jsonschema.ValidationError, match="carry"):  # a loop's own business
        jsonschema.validate({**good, "carry": {}}, loop_schema)


INTERNAL = (
    "orga.activities",
    "orga.cli",
    "orga.core",
    "orga.desk",
    "orga.gates",
    "orga.knowledge",
    "orga.providers",
    "orga.runtime",
    "orga.scripted",
    "orga.server",
    "orga.tools.mcp",
    "orga.web",
    "orga.worker",
    "orga.workflows",
)
"""The internal rooms: their names may change in any release."""


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_a_public_module_exports_exactly_its_pinned_names(name: str) -> None:
    module = importlib.import_module(name)
    assert list(module.__all__) == PUBLIC[name], (
        f"{name}.__all__ changed: a change to the stable surface (update PUBLIC here, "
        "docs/reference/stability.md and CHANGELOG.md)"
    )


@pytest.mark.parametrize("name", sorted(n for n in PUBLIC if n != "orga"))
def test_every_public_looking_name_of_a_public_module_is_exported(name: str) -> None:
    """A class or function a public module defines is in its ``__all__`` or named ``_x``."""
    module = importlib.import_module(name)
    defined = [
        n
        for n, value in vars(module).items()
        if not n.startswith("_")
        and (inspect.isclass(value) or inspect.isfunction(value))
        and getattr(value, "__module__", None) == name
    ]
    assert sorted(set(defined) - set(module.__all__)) == []


def test_every_module_is_public_private_or_internal() -> None:
    unclassified = [
        m
        for m in modules()
        if m not in PUBLIC
        and not any(part.startswith("_") for part in m.split("."))
        and not any(m == room or m.startswith(room + ".") for room in INTERNAL)
    ]
    assert unclassified == [], (
        f"{unclassified}: make each public (PUBLIC here and the stability note), private "
        "(_name) or part of an internal room"
    )


def test_the_stability_note_names_every_public_module_and_internal_room() -> None:
    note = (ROOT / "docs" / "reference" / "stability.md").read_text()
    named = set(re.findall(r"`(orga(?:\.[a-z_]+)*)`", note))
    assert sorted(set(PUBLIC) - named) == [], "public modules missing from the note"
    assert sorted(set(INTERNAL) - named) == [], "internal rooms missing from the note"


def test_the_version_is_the_changelogs() -> None:
    import tomllib

    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert f"## {version}" in changelog


def test_the_api_pages_show_no_rest_literal_markers() -> None:
    """The docs site renders these docstrings as Markdown, where reST's ``::`` before an
    indented block is printed as it is (a stray ``::`` on the ``orga.client`` page): an
    indented block is code already."""
    pages = sorted((ROOT / "docs").rglob("*.md"))
    rendered = {
        line.removeprefix("::: ").strip()
        for page in pages
        for line in page.read_text(encoding="utf-8").splitlines()
        if line.startswith("::: ")
    }
    assert "orga.client" in rendered
    found = []
    for name in sorted(rendered):
        source = inspect.getsource(importlib.import_module(name))
        for number, line in enumerate(source.splitlines(), 1):  # its docstrings, all of them
            if line.rstrip().endswith("::"):
                found.append(f"{name} line {number}: {line.strip()}")
    assert found == []


def test_the_running_loops_page_names_every_status_and_journal_entry() -> None:
    """The queries table of docs/guides/running-loops.md is what a reader checks a loop's state
    and journal against: a status or an entry added later is named there."""
    from orga.contracts.journal import JournalEntry
    from orga.contracts.state import LoopStatus

    page = (ROOT / "docs" / "guides" / "running-loops.md").read_text()
    rows = {row.split("|")[1].strip(): row for row in page.splitlines() if row.startswith("| `")}
    entries = get_args(get_args(JournalEntry)[0])
    assert not [s for s in get_args(LoopStatus) if f"`{s}`" not in rows["`state`"]]
    assert not [e.__name__ for e in entries if f"`{e.__name__}`" not in rows["`journal`"]]


def test_every_import_stable_module_has_an_api_page() -> None:
    """What a user may import (the pinned modules) is shown in the API reference: each is
    rendered (``::: module``) on a page of docs/reference that the site's navigation lists."""
    rendered: dict[str, Path] = {}
    for page in sorted((ROOT / "docs" / "reference").rglob("*.md")):
        for line in page.read_text(encoding="utf-8").splitlines():
            if line.startswith("::: "):
                rendered.setdefault(line.removeprefix("::: ").strip(), page)
    assert sorted(set(PUBLIC) - set(rendered)) == [], "import-stable modules with no API page"
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    unlisted = [
        str(page) for page in rendered.values() if str(page.relative_to(ROOT / "docs")) not in nav
    ]
    assert unlisted == [], "API pages the site's navigation does not list"

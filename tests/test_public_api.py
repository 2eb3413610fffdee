"""Every package states its public surface with a sorted ``__all__`` that resolves."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

PACKAGES = ["orga"]


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

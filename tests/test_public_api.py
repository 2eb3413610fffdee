"""Every package states its public surface with a sorted ``__all__`` that resolves."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

PACKAGES = ["orga", "workflows", "activities"]


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
        "assert tool.__module__ == 'orga.runtime.tools'; print('ok')"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert result.stdout.strip() == "ok", result.stderr

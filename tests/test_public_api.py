"""Every package states its public surface with a sorted ``__all__`` that resolves."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

PACKAGES = ["orga", "workflows", "activities", "activities.providers"]


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
        module = importlib.import_module(package)
        for info in pkgutil.iter_modules(module.__path__):
            if not info.ispkg:
                found.append(f"{package}.{info.name}")
    return found


@pytest.mark.parametrize("name", modules())
def test_all_is_sorted_and_resolves(name: str) -> None:
    module = importlib.import_module(name)
    exported = getattr(module, "__all__", None)
    assert exported is not None, f"{name} has no __all__"
    assert list(exported) == sorted(exported, key=isort_key), f"{name}.__all__ is not sorted"
    for symbol in exported:
        assert hasattr(module, symbol), f"{name}.__all__ names missing {symbol!r}"


def test_workflow_code_imports_no_http_client() -> None:
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    for path in [*(root / "workflows").glob("*.py"), *(root / "orga").glob("*.py")]:
        if path.name in {"cli.py", "scripted_model.py"}:
            continue  # client-side tools, never imported by workflow code
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            for imported in names:
                assert not imported.startswith(("httpx", "requests", "aiohttp", "activities")), (
                    f"{path.name} imports {imported}"
                )


def test_activities_never_import_the_workflow_module() -> None:
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    for path in (root / "activities").rglob("*.py"):
        text = path.read_text()
        assert (
            "temporalio.workflow" not in text and "from temporalio import workflow" not in text
        ), path

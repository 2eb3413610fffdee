"""Configuration is documented once (issue 29): the environment table, the loop config table,
``orga --help`` and the ``Settings`` docstring come from the fields, and nothing but
``Settings`` reads ``ORGA_*``."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from orga.cli.app import HELP
from orga.contracts.config import LoopConfig
from orga.contracts.errors import InvalidConfig
from orga.runtime import settings_docs
from orga.runtime.settings import Env, Settings
from orga.runtime.variables import attribute_docstrings
from tests.helpers import parse_python

ROOT = Path(__file__).resolve().parent.parent
NOT_FROM_THE_ENVIRONMENT = {"providers", "web_fetch_max_bytes", "web_fetch_timeout"}
"""Fields no single variable sets: the providers (three variables each, built together) and
``web_fetch``'s limits, which code sets."""


@pytest.mark.parametrize(
    "path", sorted(settings_docs.expected(), key=str), ids=lambda p: p.relative_to(ROOT).as_posix()
)
def test_the_written_reference_is_what_the_code_says(path: Path) -> None:
    written = path.read_text() if path.exists() else ""
    assert written == settings_docs.expected()[path], (
        f"{path.relative_to(ROOT)} differs from the fields it documents: run "
        "`uv run python -m orga.runtime.settings_docs` and commit what it writes"
    )


def test_orga_help_lists_what_the_cli_reads() -> None:
    assert settings_docs.cli_variables() in HELP
    for name in ("TEMPORAL_ADDRESS", "ORGA_APPROVER", "ORGA_UI_URL", "ORGA_DEBUG", "ORGA_DATA_DIR"):
        assert f"**{name}**" in HELP


def test_every_field_says_where_it_comes_from_and_what_it_means() -> None:
    names: list[str] = []
    meanings = attribute_docstrings(Settings)
    for field, info in Settings.model_fields.items():
        assert meanings.get(field), f"Settings.{field} has no docstring"
        env = [m for m in info.metadata if isinstance(m, Env)]
        if field not in NOT_FROM_THE_ENVIRONMENT:
            assert len(env) == 1, f"Settings.{field} names no variable (an Env in its annotation)"
            names.append(env[0].name)
    assert len(names) == len(set(names)), "two fields read the same variable"
    documented = {name for v in Settings.variables() for name in v.names}
    assert set(names) <= documented
    meanings = attribute_docstrings(LoopConfig)
    assert set(meanings) == set(LoopConfig.model_fields), "a LoopConfig field has no docstring"


def test_a_value_a_field_does_not_take_names_the_variable() -> None:
    with pytest.raises(InvalidConfig, match=r"ORGA_TARGET_CPU='2': input should be less"):
        Settings.from_env({"ORGA_TARGET_CPU": "2"})
    with pytest.raises(InvalidConfig, match=r"ORGA_STICKY_TIMEOUT='soon': input should be a"):
        Settings.from_env({"ORGA_STICKY_TIMEOUT": "soon"})
    read = Settings.from_env(
        {"ORGA_APPROVER": " ann ", "ORGA_UI_URL": "http://ui:8080", "ORGA_DEBUG": "1"}
    )
    assert (read.approver, read.ui_url, read.debug) == ("ann", "http://ui:8080", True)
    assert (read.sticky_timeout, read.graceful_shutdown) == (10.0, 30.0)


_READS = {"get", "getenv", "pop", "setdefault"}


def _reads_of_orga_variables(path: Path) -> list[str]:
    """Where ``path`` reads an ``ORGA_*`` variable: ``x.get("ORGA_…")``, ``getenv("ORGA_…")``,
    ``x["ORGA_…"]``."""
    found: list[str] = []
    for node in ast.walk(parse_python(path)):
        key: ast.expr | None = None
        if isinstance(node, ast.Call) and node.args:
            name = getattr(node.func, "attr", getattr(node.func, "id", ""))
            key = node.args[0] if name in _READS else None
        elif isinstance(node, ast.Subscript):
            key = node.slice
        if (
            isinstance(key, ast.Constant)
            and isinstance(key.value, str)
            and key.value.startswith("ORGA_")
        ):
            found.append(f"{path.name}:{key.lineno}: {key.value}")
    return found


def test_nothing_but_settings_reads_orga_variables(tmp_path: Path) -> None:
    sources = [ROOT / "worker.py"]
    for folder in ("orga", "bench"):
        sources += sorted((ROOT / folder).rglob("*.py"))
    reads = [
        where
        for path in sources
        if path != ROOT / "orga" / "runtime" / "settings.py"
        for where in _reads_of_orga_variables(path)
    ]
    assert reads == [], "read ORGA_* through orga.runtime.settings.Settings instead"
    planted = tmp_path / "planted.py"
    planted.write_text(
        'import os\nos.environ.get("ORGA_UI_URL")\nos.getenv("ORGA_DEBUG")\n'
        'env["ORGA_APPROVER"]\nprint("ORGA_DATA_DIR")\n'
    )
    assert _reads_of_orga_variables(planted) == [
        "planted.py:2: ORGA_UI_URL",
        "planted.py:3: ORGA_DEBUG",
        "planted.py:4: ORGA_APPROVER",
    ]

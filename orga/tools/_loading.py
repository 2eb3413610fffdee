"""Where a worker's tools come from, and how a tool's return value reads to the model.

``load_tool_modules`` imports the modules ``ORGA_TOOL_MODULES`` names and collects their
``@tool`` functions; ``render_value`` is the one rendering of a return value every runner uses
(the tool activity, the benchmarks' baseline).
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel

from orga.contracts.errors import InvalidConfig
from orga.tools.sdk import Tool

__all__ = ["load_tool_modules", "render_value"]


def load_tool_modules(modules: Iterable[str]) -> list[Tool]:
    """Import each module and collect the ``@tool`` objects it defines, in definition order.

    Raises:
        InvalidConfig: a module cannot be imported or defines no tool.
    """
    found: list[Tool] = []
    for name in modules:
        try:
            module = importlib.import_module(name)
        except ImportError as error:
            raise InvalidConfig(
                f"tool module {name!r} (from ORGA_TOOL_MODULES) cannot be imported: {error}"
            ) from error
        tools = [value for value in vars(module).values() if isinstance(value, Tool)]
        if not tools:
            raise InvalidConfig(f"tool module {name!r} defines no @tool function")
        found.extend(tools)
    return found


def render_value(value: Any) -> str:
    """What the model reads for a tool's return value."""
    if isinstance(value, str):
        return value
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    return json.dumps(value, ensure_ascii=False, default=str)

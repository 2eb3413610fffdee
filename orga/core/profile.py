"""Applying a tool profile: which of a loop's tools the model may see (pure).

The profile itself is ``orga.contracts.tools.ToolProfile``, whose docstring gives the rules.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

from orga.contracts.tools import ToolDefinition, ToolProfile

__all__ = ["VERIFIED_MARK", "glob_matches", "visible_tools"]

VERIFIED_MARK = "[verified]"


@lru_cache(maxsize=256)
def _pattern(glob: str) -> re.Pattern[str]:
    parts = (".*" if c == "*" else "." if c == "?" else re.escape(c) for c in glob)
    return re.compile("".join(parts), re.DOTALL)


def glob_matches(glob: str, name: str) -> bool:
    """Does ``name`` match ``glob`` (``*`` any run, ``?`` one character, anchored)?"""
    return _pattern(glob).fullmatch(name) is not None


def visible_tools(profile: ToolProfile, tools: Sequence[ToolDefinition]) -> list[ToolDefinition]:
    """The tools that pass ``profile``, in their original order."""
    kept = [
        t
        for t in tools
        if (not profile.include or any(glob_matches(g, t.name) for g in profile.include))
        and not any(glob_matches(g, t.name) for g in profile.exclude)
        and (not profile.require_verified or VERIFIED_MARK in t.description)
    ]
    return kept if profile.max_tools is None else kept[: profile.max_tools]

"""Tool profiles: which of a loop's tools the model may see (``config.tool_profile``).

Applied, in this order, to the complete tool list (the loop's tools and the tools pre-hydration
uses): ``include`` globs (when any are given, only matching tools pass), ``exclude`` globs,
``require_verified`` (only tools whose description carries ``[verified]``), then ``max_tools``
(the first N that are left). Globs know ``*`` and ``?`` only, match the whole name and are
case-sensitive. A tool the profile hides is not advertised, and a call to it is denied.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

from pydantic import BaseModel, ConfigDict, Field

from orga.tools import ToolDefinition

__all__ = ["VERIFIED_MARK", "ToolProfile", "glob_matches"]

VERIFIED_MARK = "[verified]"


@lru_cache(maxsize=256)
def _pattern(glob: str) -> re.Pattern[str]:
    parts = (".*" if c == "*" else "." if c == "?" else re.escape(c) for c in glob)
    return re.compile("".join(parts), re.DOTALL)


def glob_matches(glob: str, name: str) -> bool:
    """Does ``name`` match ``glob`` (``*`` any run, ``?`` one character, anchored)?"""
    return _pattern(glob).fullmatch(name) is not None


class ToolProfile(BaseModel):
    """A filter on the tools a loop advertises."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    include: list[str] = Field(default_factory=list[str])
    """Globs; when any are given, only tools matching one of them pass."""
    exclude: list[str] = Field(default_factory=list[str])
    """Globs; tools matching any of them are removed."""
    require_verified: bool = False
    """Only tools whose description carries ``[verified]``."""
    max_tools: int | None = Field(default=None, ge=0)
    """Keep at most the first N tools left."""

    def apply(self, tools: Sequence[ToolDefinition]) -> list[ToolDefinition]:
        """The tools that pass, in their original order."""
        kept = [
            t
            for t in tools
            if (not self.include or any(glob_matches(g, t.name) for g in self.include))
            and not any(glob_matches(g, t.name) for g in self.exclude)
            and (not self.require_verified or VERIFIED_MARK in t.description)
        ]
        return kept if self.max_tools is None else kept[: self.max_tools]

"""Applying a tool profile: which of a loop's tools the model may see (pure).

The profile itself is ``orga.contracts.tools.ToolProfile``, whose docstring gives the rules.
"""

from __future__ import annotations

from collections.abc import Sequence

from orga.contracts.tools import VERIFIED_MARK, ToolDefinition, ToolProfile

__all__ = ["VERIFIED_MARK", "glob_matches", "visible_tools"]


def glob_matches(glob: str, name: str) -> bool:
    """Does ``name`` match ``glob`` (``*`` any run, ``?`` one character, anchored)?

    Globs come from clients (tool profiles) and names from models and tool servers, so this is
    matched without a backtracking regex (``a*a*a*…b`` would take exponential time there): one
    pass that, on a mismatch, only moves the last ``*`` on by a character — at most
    ``len(glob) * len(name)`` steps.
    """
    g = n = 0
    star = -1  # position in the glob just after the last '*' seen
    resume = 0  # position in the name that '*' has swallowed up to
    while n < len(name):
        if g < len(glob) and glob[g] == "*":
            star, resume = g + 1, n
            g += 1
        elif g < len(glob) and glob[g] in ("?", name[n]):
            g += 1
            n += 1
        elif star >= 0:
            resume += 1
            g, n = star, resume
        else:
            return False
    return all(c == "*" for c in glob[g:])


def visible_tools(profile: ToolProfile, tools: Sequence[ToolDefinition]) -> list[ToolDefinition]:
    """The tools that pass ``profile``, in their original order."""
    kept = [
        t
        for t in tools
        if (not profile.include or any(glob_matches(g, t.name) for g in profile.include))
        and not any(glob_matches(g, t.name) for g in profile.exclude)
        and (not profile.require_verified or t.verified or VERIFIED_MARK in t.description)
    ]
    return kept if profile.max_tools is None else kept[: profile.max_tools]

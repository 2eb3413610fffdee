"""Which name each of a server's tools holds in orga, and what the operator's rules say of it.

A server's tool ``delete.repo`` is offered as ``<server>__delete_repo`` (``tool_name``): the
characters every provider accepts. Two of its tools can then want one name (``delete_repo`` and
``delete.repo``); ``bind`` never lets either win silently. Within one tool list, both are
refused (or, at the worker's start, the operator's ``on_name_collision = "stop"`` stops it);
across lists (``tools/list_changed``, a reconnection), a name stays with the remote tool it was
first bound to, and a newcomer that wants it is refused — so what the gate judged under a name
is what runs under it.

The operator's rules are matched against both spellings where they restrict (``approval``,
``serial``: a rule written for the offered name holds for the tool that runs under it) and
against the server's own name where they grant (``tools``, ``verified``). ``[verified]`` in a
description (``tool_profile.require_verified``) is orga's mark, given only by the operator's
``verified`` globs: a server's own text never carries it (``neutral``).

Worker-side code (never imported by workflows).
"""

from __future__ import annotations

import fnmatch
import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

__all__ = [
    "SEPARATOR",
    "Binding",
    "NameCollision",
    "bind",
    "matches",
    "neutral",
    "restricts",
    "tool_name",
]

SEPARATOR = "__"
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_MAX_NAME = 64
_CLAIM = re.compile(r"\[\s*verified\s*\]", re.IGNORECASE)


class NameCollision(Exception):
    """Two tools of one server want one name, at the worker's start, and the operator asked to
    stop (``on_name_collision = "stop"``, the default)."""


def tool_name(server: str, remote: str) -> str:
    """The name orga gives a server's tool: ``<server>__<tool>``, in characters every provider
    accepts, at most 64 long (a long name keeps a digest of the original)."""
    name = f"{server}{SEPARATOR}{_UNSAFE.sub('_', remote)}"
    if len(name) <= _MAX_NAME:
        return name
    digest = hashlib.sha256(remote.encode()).hexdigest()[:8]
    return f"{name[: _MAX_NAME - 9]}_{digest}"


def matches(name: str, globs: Iterable[str]) -> bool:
    """Whether a tool ``name`` matches one of ``globs``."""
    return any(fnmatch.fnmatchcase(name, glob) for glob in globs)


def restricts(server: str, remote: str, globs: Iterable[str]) -> bool:
    """Whether a restricting rule (``approval``, ``serial``) holds for ``remote``: its globs
    match the server's own name or the name orga offers (without the ``<server>__`` prefix)."""
    globs = list(globs)
    offered = tool_name(server, remote).removeprefix(f"{server}{SEPARATOR}")
    return matches(remote, globs) or matches(offered, globs)


def neutral(text: str) -> str:
    """A server's text without anything that reads as orga's ``[verified]`` mark
    (``orga.core.profile.VERIFIED_MARK``); the replacement holds no bracket, so no new mark
    can form around it."""
    return _CLAIM.sub("(unverified claim)", text)


@dataclass
class Binding:
    """The outcome of ``bind``: which remote tool each offered name runs, and what was
    refused (by name, with why)."""

    names: dict[str, str] = field(default_factory=dict[str, str])
    """Offered name → the server's own name of the tool it runs."""
    refused: dict[str, str] = field(default_factory=dict[str, str])
    """Offered name → why no tool (or not the newcomer) is offered under it."""


def bind(
    server: str,
    listed: Iterable[str],
    bound: Mapping[str, str],
    *,
    stop: bool,
) -> Binding:
    """Give each of ``listed`` (a server's tool names, already filtered by ``tools``) its
    offered name.

    Args:
        server: the server's name in the operator's file.
        listed: the server's own tool names, in its order.
        bound: offered name → remote name, as bound earlier in this worker's life.
        stop: raise on a collision within ``listed`` instead of refusing the tools.

    Raises:
        NameCollision: ``stop`` and two tools of ``listed`` want one name.
    """
    wanted: dict[str, list[str]] = {}
    for remote in listed:
        claimants = wanted.setdefault(tool_name(server, remote), [])
        if remote not in claimants:
            claimants.append(remote)
    binding = Binding()
    for name, claimants in wanted.items():
        earlier = bound.get(name)
        if len(claimants) == 1 and earlier in (None, claimants[0]):
            binding.names[name] = claimants[0]
            continue
        if earlier in claimants:
            assert earlier is not None
            binding.names[name] = earlier
            others = [r for r in claimants if r != earlier]
            binding.refused[name] = (
                f"MCP server {server!r} now also offers {_listed(others)} under {name!r}, which "
                f"runs its tool {earlier!r}: refused (a name keeps the tool it was first bound "
                "to; restart the worker to accept a change)"
            )
        elif earlier is not None:
            binding.refused[name] = (
                f"MCP server {server!r} now offers {_listed(claimants)} under {name!r}, which "
                f"ran its tool {earlier!r}: refused (a name keeps the tool it was first bound "
                "to; restart the worker to accept a change)"
            )
        elif stop:
            raise NameCollision(
                f"MCP server {server!r} offers tools {_listed(claimants)}, which would all be "
                f"named {name!r}: rename one on the server, leave one out (tools = [...]), or "
                'set on_name_collision = "skip" for it in ORGA_MCP_SERVERS to refuse them'
            )
        else:
            binding.refused[name] = (
                f"MCP server {server!r} offers tools {_listed(claimants)}, which would all be "
                f'named {name!r}: none of them is offered (on_name_collision = "skip")'
            )
    return binding


def _listed(names: list[str]) -> str:
    quoted = [repr(n) for n in names]
    return quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} and {quoted[-1]}"

"""What a pause names, and its text read back: pure, so a reader of loops' states (``orga
pending``, the desk) need not import the store that keeps the pauses (``orga.runtime.pauses``).

``split_target`` reads a key (``tool:NAME``, ``agent:NAME``, ``loop:ID``), and
``Pause.target_in`` reads a ``describe()`` text back — the reason a held call shows in its
loop's state — so the desk offers the command that ends it. Checked here once for every
surface (``orga pause``, the desk).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Final, Literal

__all__ = ["PAUSE_KINDS", "PAUSE_NAME", "Pause", "PauseKind", "split_target"]

PauseKind = Literal["tool", "agent", "loop"]
PAUSE_KINDS: Final[tuple[PauseKind, ...]] = ("tool", "agent", "loop")
PAUSE_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:@/-]{0,199}")
"""A tool's or agent's name or a loop's id, as a pause names it (``fullmatch``): plain, so
``describe`` quotes it the same way every time and a command needs no escape for it."""
_DESCRIBED: Final = re.compile(
    rf"({'|'.join(PAUSE_KINDS)}) '([^']*)' is paused by .*? since "
    r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d): ",
    re.DOTALL,
)
"""The start of ``Pause.describe()``'s text: the kind, the name and since when."""


@dataclass(frozen=True)
class Pause:
    """Something paused (``tool:NAME``, ``agent:NAME``, ``loop:ID``): by whom, why, since when."""

    target: str
    by: str
    reason: str
    since: datetime

    def describe(self) -> str:
        """``tool 'x' is paused by olu since 2025-05-01T09:14:02+00:00: why`` (``target_in``
        reads it back)."""
        kind, _, name = self.target.partition(":")
        return (
            f"{kind} {name!r} is paused by {self.by} since "
            f"{self.since.isoformat(timespec='seconds')}: {self.reason}"
        )

    @staticmethod
    def target_in(text: str) -> str | None:
        """The target a ``describe()`` text names (``tool:x``); None for any other text, or a
        name that is not plain — it comes back from a workflow's state: nothing is guessed."""
        found = _DESCRIBED.match(text)
        if found is None:
            return None
        target = f"{found[1]}:{found[2]}"
        return target if split_target(target) is not None else None

    @staticmethod
    def since_in(text: str) -> datetime | None:
        """Since when the pause a ``describe()`` text names holds; None for any other text (or
        a time that is not one ``describe`` writes)."""
        found = _DESCRIBED.match(text)
        if found is None or Pause.target_in(text) is None:
            return None
        try:
            since = datetime.fromisoformat(found[3])
        except ValueError:
            return None
        return since if since.tzinfo is not None else None


def split_target(target: str) -> tuple[PauseKind, str] | None:
    """``target``'s kind and name (``tool:x`` → ``("tool", "x")``); None unless the kind is one
    of ``PAUSE_KINDS`` and the name is plain (``PAUSE_NAME``)."""
    kind, colon, name = target.partition(":")
    if not colon or not PAUSE_NAME.fullmatch(name):
        return None
    return next(((known, name) for known in PAUSE_KINDS if known == kind), None)

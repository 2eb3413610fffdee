"""Processes found in ``/proc`` by their parent, whatever the machine runs beside them."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["children", "parent_of"]


def parent_of(pid: int) -> int | None:
    """The parent of process ``pid`` (None once it is gone). Its name comes first in
    ``/proc/PID/stat``, in parentheses, and may hold spaces and parentheses itself (tmux names
    its server ``tmux: server``): the fields after the name's last ``)`` are read, never the
    line split on spaces."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rpartition(")")[2].split()[1])  # after the name: state, then the parent


def children(parent: int, marker: bytes) -> set[int]:
    """The processes whose parent is ``parent`` and whose command line holds ``marker``."""
    found: set[int] = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            command = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if marker in command and parent_of(int(entry)) == parent:
            found.add(int(entry))
    return found

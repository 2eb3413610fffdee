"""Files the worker writes are its own: directories 0700, files 0600.

Blobs hold tool results and model answers, the ledger holds effects, the embedded server's
database holds every history: none of it is for other users of the machine. The modes are set
explicitly (not left to the umask) when a directory or file is created.

Nor does the worker take over what someone else prepared. Before it opens a file, it refuses
(``InvalidConfig``, saying why and what to do):

- a directory on the way that another user owns (root aside), or that anyone may write to
  without the sticky bit: whoever can write there can swap the files in it (a shared ``/tmp``,
  root's and sticky, is fine);
- a file that exists and another user owns, or that group or others may write (anyone could
  have put content in it, or read what the worker puts there), a link another user owns, or
  something that is not a regular file. SQLite's companions (``-wal``, ``-shm``, ``-journal``)
  are held to the same rule, since SQLite opens them as they are.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from orga.contracts.errors import InvalidConfig

__all__ = [
    "SQLITE_COMPANIONS",
    "check_private_file",
    "private_directory",
    "private_file",
]

SQLITE_COMPANIONS: Final = ("-wal", "-shm", "-journal")
"""The files SQLite keeps next to a database (``store.db-wal`` …)."""
_CHOOSE: Final = "choose another path"


def _refuse(path: Path, why: str, fix: str) -> InvalidConfig:
    return InvalidConfig(f"refusing {path}: {why}; {fix}")


def _check_directories(path: Path, setting: str) -> None:
    """Every existing directory from ``path`` up to ``/`` is this user's or root's, and only
    sticky ones may be writable by others."""
    me = os.geteuid()
    level = path
    while not level.exists() and level != level.parent:
        level = level.parent
    real = Path(os.path.realpath(level))
    for directory in (real, *real.parents):
        found = directory.stat()
        if found.st_uid not in (me, 0):
            raise _refuse(
                directory,
                f"the directory is owned by uid {found.st_uid}, not by this user (uid {me}) or "
                "root, and its owner can replace the files in it",
                f"use a directory of your own (chown it), or choose another {setting}",
            )
        if found.st_mode & stat.S_IWOTH and not found.st_mode & stat.S_ISVTX:
            raise _refuse(
                directory,
                f"anyone may write in this directory (mode {stat.S_IMODE(found.st_mode):04o}, "
                "no sticky bit), so anyone can replace the files in it",
                f"`chmod o-w` (or `chmod +t`) it, or choose another {setting}",
            )


def check_private_file(path: Path, setting: str = _CHOOSE, companions: Sequence[str] = ()) -> None:
    """Refuse ``path`` if it exists and is not this user's alone to write (see the module
    docstring), and so each of its ``companions`` (suffixes: ``SQLITE_COMPANIONS``);
    ``setting`` names where the operator chose the path, for the message.

    Raises:
        InvalidConfig: another user owns one (or the link to it), group or others may write
            it, or it is not a regular file.
    """
    for suffix in ("", *companions):
        _check_file(path.with_name(path.name + suffix), setting)


def _check_file(path: Path, setting: str) -> None:
    me = os.geteuid()
    fix = f"remove it or choose another {setting}"
    try:
        link = path.lstat()
    except FileNotFoundError:
        return
    if stat.S_ISLNK(link.st_mode) and link.st_uid not in (me, 0):
        raise _refuse(
            path,
            f"a symbolic link owned by uid {link.st_uid}, not by this user (uid {me}); it could "
            "lead anywhere",
            fix,
        )
    try:
        found = path.stat()
    except FileNotFoundError:
        raise _refuse(path, "a link to nothing", fix) from None
    if not stat.S_ISREG(found.st_mode):
        raise _refuse(path, "not a regular file", fix)
    if found.st_uid != me:
        raise _refuse(path, f"owned by uid {found.st_uid}, not by this user (uid {me})", fix)
    writable = [
        who
        for who, bit in (("group", stat.S_IWGRP), ("others", stat.S_IWOTH))
        if found.st_mode & bit
    ]
    if writable:
        raise _refuse(
            path,
            f"writable by {' and '.join(writable)} (mode {stat.S_IMODE(found.st_mode):04o}), "
            "so its content may not be this worker's",
            f"remove it (or `chmod 600` it if you trust what is in it), or choose another "
            f"{setting}",
        )


def private_directory(path: Path, setting: str = _CHOOSE) -> Path:
    """``path`` as a directory: each missing level is created 0700 (only its owner enters).
    A directory that exists keeps its mode — the operator's (``/tmp``, a shared volume): the
    files written in it are 0600 whatever the directory's mode.

    Raises:
        InvalidConfig: a directory on the way is another user's, or writable by anyone
            without the sticky bit.
    """
    _check_directories(path, setting)
    missing: list[Path] = []
    level = path
    while not level.exists():
        missing.append(level)
        level = level.parent
    for directory in reversed(missing):
        directory.mkdir(mode=0o700, exist_ok=True)
        directory.chmod(0o700)  # not left to the umask
    return path


def private_file(path: Path, setting: str = _CHOOSE, companions: Sequence[str] = ()) -> Path:
    """``path`` as an existing file only its owner can read (created empty if missing), in a
    directory no other user can swap it in; ``companions`` are suffixes of files kept next to
    it (``SQLITE_COMPANIONS``), checked when they exist.

    Raises:
        InvalidConfig: see ``private_directory`` and ``check_private_file``.
    """
    private_directory(path.parent, setting)
    check_private_file(path, setting, companions)
    try:
        # Never through a link, never over a file that appeared since it was checked.
        descriptor = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW, 0o600)
        os.close(descriptor)
    except FileExistsError:
        _check_file(path, setting)
    path.chmod(0o600)
    return path

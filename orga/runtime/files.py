"""Files the worker writes are its own: directories 0700, files 0600.

Blobs hold tool results and model answers, the ledger holds effects, the embedded server's
database holds every history: none of it is for other users of the machine. The modes are set
explicitly (not left to the umask) when a directory or file is created.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["private_directory", "private_file", "write_private"]


def private_directory(path: Path) -> Path:
    """``path`` as a directory: each missing level is created 0700 (only its owner enters).
    A directory that exists keeps its mode — the operator's (``/tmp``, a shared volume): the
    files written in it are 0600 whatever the directory's mode."""
    missing: list[Path] = []
    level = path
    while not level.exists():
        missing.append(level)
        level = level.parent
    for directory in reversed(missing):
        directory.mkdir(mode=0o700, exist_ok=True)
        directory.chmod(0o700)  # not left to the umask
    return path


def private_file(path: Path) -> Path:
    """``path`` as an existing file only its owner can read (created empty if missing)."""
    private_directory(path.parent)
    descriptor = os.open(path, os.O_CREAT | os.O_WRONLY, 0o600)
    os.close(descriptor)
    path.chmod(0o600)
    return path


def write_private(path: Path, data: bytes) -> None:
    """Write ``path`` atomically, 0600: a temporary file of this writer's own, then a rename
    (two writers never share a partial file)."""
    private_directory(path.parent)
    descriptor, temporary = tempfile.mkstemp(
        dir=path.parent, prefix=f".{path.name}.", suffix=".part"
    )
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(data)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise

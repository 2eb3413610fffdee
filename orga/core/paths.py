"""File paths as the gate judges them: relative, normalised, inside their root, not hidden.

Pure string rules (no file system): ``docs/../.env`` is judged as ``.env`` — and refused as a
dot-file unless hidden files are allowed. The gate normalises every argument a tool declares as
a path (``@tool(path_arguments=[...])``) before any policy sees it, and the call runs with the
normalised path, so a policy like ``path like "docs/*"`` judges the file that would be read.
The tool applies the same rules again, then resolves symlinks against its root.
"""

from __future__ import annotations

import posixpath

__all__ = ["PathRefused", "normalise"]


class PathRefused(ValueError):
    """A path the rules refuse; the message names the rule."""


def normalise(path: str, *, allow_hidden: bool = False) -> str:
    """``path`` normalised (``a/./b/../c`` → ``a/c``).

    Raises:
        PathRefused: the path is empty, absolute, leaves its root (``..``), contains a NUL or
            backslash, or names a dot-file or dot-directory while hidden files are not allowed.
    """
    if not path or not path.strip():
        raise PathRefused("the path is empty")
    if "\0" in path or "\\" in path:
        raise PathRefused(f"path {path!r} contains a NUL or a backslash")
    if path.startswith("/") or (len(path) > 1 and path[1] == ":"):
        raise PathRefused(f"path {path!r} is absolute; give a path relative to the root")
    normalised = posixpath.normpath(path)
    if normalised == ".." or normalised.startswith("../"):
        raise PathRefused(f"path {path!r} leads outside the root")
    if normalised == ".":
        raise PathRefused(f"path {path!r} names the root itself, not a file")
    if not allow_hidden and any(part.startswith(".") for part in normalised.split("/")):
        raise PathRefused(
            f"path {path!r} (normalised: {normalised!r}) names a hidden file or directory; "
            "the worker refuses them (ORGA_FILE_READ_HIDDEN=1 allows them)"
        )
    return normalised

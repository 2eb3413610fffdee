"""The built-in ``file_read`` tool: read a text file under the worker's file root.

Registered only when the worker's operator names a root (``ORGA_FILE_ROOT``): there is no
default, because a worker's own directory holds its secrets (``.env``), every history
(``.orga/temporal.db``) and the blobs. The path is judged as the gate judged it
(``orga.core.paths``: relative, normalised, inside the root, no dot-files unless
``ORGA_FILE_READ_HIDDEN=1``), then resolved — symlinks included — and refused unless it is a
regular file inside the root.
"""

from __future__ import annotations

from pathlib import Path

from orga.contracts.errors import ToolInputError, ToolPermissionError
from orga.core.paths import PathRefused, normalise
from orga.core.text import cut
from orga.tools.sdk import Tool, tool

__all__ = ["file_read_tool"]


def file_read_tool(root: Path, max_bytes: int, *, allow_hidden: bool = False) -> Tool:
    """``file_read`` confined to ``root``."""
    root = root.resolve()

    @tool(name="file_read", timeout=10, path_arguments=["path"])
    def file_read(path: str, max_chars: int = 50_000) -> str:
        """Read a UTF-8 text file under the worker's file root (ORGA_FILE_ROOT).

        Args:
            path: path of the file, relative to the file root.
            max_chars: return at most this many characters.
        """
        try:
            relative = normalise(path, allow_hidden=allow_hidden)
        except PathRefused as error:
            raise ToolPermissionError(f"file_read refused {path!r}: {error}") from error
        target = (root / relative).resolve()
        if not target.is_relative_to(root):
            raise ToolPermissionError(
                f"path {path!r} leads outside the readable root (a symlink out): file_read "
                "only reads files under it"
            )
        inside = target.relative_to(root).as_posix()
        if not allow_hidden and any(part.startswith(".") for part in inside.split("/")):
            raise ToolPermissionError(
                f"path {path!r} leads to a hidden file ({inside!r}); the worker refuses them"
            )
        if inside != relative:
            raise ToolPermissionError(
                f"path {path!r} is a symlink to {inside!r}: the policy judged {relative!r}, so "
                "file_read reads only that file, never where a link leads"
            )
        if not target.is_file():
            raise ToolInputError(f"there is no file {relative!r} under the readable root")
        with target.open("rb") as handle:
            data = handle.read(max_bytes + 1)
        text = data[:max_bytes].decode("utf-8", errors="replace")
        if len(data) > max_bytes:
            text += f"\n[… file longer than {max_bytes} bytes; the rest is left out]"
        return cut(text, max_chars, "file")

    return file_read

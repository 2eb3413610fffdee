"""The built-in ``file_read`` tool: read a text file under the worker's file root."""

from __future__ import annotations

from pathlib import Path

from orga.contracts.errors import ToolInputError
from orga.core.text import cut
from orga.runtime.tools import Tool, tool

__all__ = ["file_read_tool"]


def file_read_tool(root: Path, max_bytes: int) -> Tool:
    @tool(name="file_read", timeout=10)
    def file_read(path: str, max_chars: int = 50_000) -> str:
        """Read a UTF-8 text file under the worker's file root (ORGA_FILE_ROOT).

        Args:
            path: path of the file, relative to the file root.
            max_chars: return at most this many characters.
        """
        target = (root / path).resolve()
        if not target.is_relative_to(root):
            raise ToolInputError(
                f"path {path!r} leads outside the readable root {str(root)!r}; "
                "file_read only reads files under it (no '..', absolute paths or symlinks out)"
            )
        if not target.is_file():
            raise ToolInputError(f"there is no file {path!r} under the readable root")
        with target.open("rb") as handle:
            data = handle.read(max_bytes + 1)
        text = data[:max_bytes].decode("utf-8", errors="replace")
        if len(data) > max_bytes:
            text += f"\n[… file longer than {max_bytes} bytes; the rest is left out]"
        return cut(text, max_chars, "file")

    return file_read

"""Where oversized payloads go: the worker's blob directory, content-addressed.

A tool result or model response larger than the payload guard's limit is cut (with a marker the
model can read) before it enters history — never a ``PayloadsTooLarge`` failure — and the full
text is kept here under ``blob:sha256:<hex>``, the reference the journal records. The
directory is 0700 and every blob 0600 (``orga.runtime.files``).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from orga.core.text import cut_bytes
from orga.runtime.files import write_private

__all__ = ["DEFAULT_LIMIT", "BlobStore"]

DEFAULT_LIMIT = 256 * 1024
"""Bytes of one tool result or model text kept in history (Temporal warns at 512 KiB per
payload and refuses 2 MiB)."""


class BlobStore:
    """A directory of full texts by SHA-256."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def put(self, text: str) -> str:
        """Keep ``text``; its reference."""
        data = text.encode("utf-8")
        digest = hashlib.sha256(data).hexdigest()
        path = self.directory / f"{digest}.txt"
        if not path.exists():
            write_private(path, data)
        return f"blob:sha256:{digest}"

    def get(self, reference: str) -> str:
        """The text kept under ``reference``."""
        digest = reference.removeprefix("blob:sha256:")
        if not digest or any(c not in "0123456789abcdef" for c in digest):
            raise ValueError(f"{reference!r} is not a blob reference")
        return (self.directory / f"{digest}.txt").read_text(encoding="utf-8")

    def guard(self, text: str, limit: int, what: str) -> tuple[str, str | None]:
        """``(text, None)`` if it fits, else ``(cut text, reference to the full text)``."""
        size = len(text.encode("utf-8"))
        if size <= limit:
            return text, None
        reference = self.put(text)
        marker = (
            f"\n[… {what} cut to {limit} of {size} bytes; the full text is kept by the worker "
            f"as {reference}]"
        )
        return cut_bytes(text, limit, marker), reference

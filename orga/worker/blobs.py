"""Where the payload guard keeps what it cut: full texts in the worker's store, by content.

A tool result or model answer larger than the loop's ``max_payload_bytes`` is cut (with a
marker the model can read) before the model and history see it, and the full text is kept in
the store (``orga.runtime.store``) under ``blob:sha256:<hex>`` — the reference the journal
records. Any worker or client sharing the store reads it back: ``orga blob get REF``.
"""

from __future__ import annotations

import hashlib

from orga.core.text import cut_bytes
from orga.runtime.store import Store

__all__ = ["DEFAULT_LIMIT", "BlobStore"]

DEFAULT_LIMIT = 256 * 1024
"""Bytes of one tool result or model text the model sees by default."""

_PREFIX = "blob:sha256:"


class BlobStore:
    """Full texts by SHA-256, in the store."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def put(self, text: str) -> str:
        """Keep ``text``; its reference."""
        data = text.encode("utf-8")
        reference = f"{_PREFIX}{hashlib.sha256(data).hexdigest()}"
        self.store.put(reference, data)
        return reference

    def get(self, reference: str) -> str:
        """The text kept under ``reference``.

        Raises:
            ValueError: ``reference`` is not a blob reference.
            LookupError: nothing is kept under it (another store, or pruned), or something
                else than the text it names.
        """
        digest = reference.removeprefix(_PREFIX)
        if (
            not reference.startswith(_PREFIX)
            or len(digest) != 64
            or any(c not in "0123456789abcdef" for c in digest)
        ):
            raise ValueError(f"{reference!r} is not a blob reference (blob:sha256:<64 hex>)")
        data = self.store.get(reference)
        if data is None:
            raise LookupError(f"{reference} is not in the store at {self.store.safe_url}")
        if hashlib.sha256(data).hexdigest() != digest:  # written or changed by someone else
            raise LookupError(
                f"the store at {self.store.safe_url} holds under {reference} something else "
                "than the text that reference names (its SHA-256): not read; restore the "
                "store's entry from a backup"
            )
        return data.decode("utf-8")

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

"""Text helpers shared by the workflow and the activities: cutting and token estimates."""

from __future__ import annotations

__all__ = ["cut", "cut_bytes", "estimate_tokens"]

BYTES_PER_TOKEN = 4
"""orga's deterministic estimate: about four UTF-8 bytes per token."""


def estimate_tokens(text: str) -> int:
    """Tokens in ``text``, estimated from its UTF-8 length (deterministic, no tokenizer)."""
    return (len(text.encode("utf-8")) + BYTES_PER_TOKEN - 1) // BYTES_PER_TOKEN


def cut(text: str, max_chars: int, what: str = "text") -> str:
    """``text`` if it fits in ``max_chars`` characters, else its head and a marker saying so.

    Cuts on a character boundary (never inside a multi-byte character); the marker tells the
    model how much was left out.
    """
    if len(text) <= max_chars:
        return text
    marker = f"\n[… {what} cut: {len(text) - max_chars} of {len(text)} characters left out]"
    return text[: max(0, max_chars - len(marker))] + marker


def cut_bytes(text: str, max_bytes: int, marker: str) -> str:
    """``text`` if its UTF-8 form fits in ``max_bytes``, else its head plus ``marker``, cut on
    a character boundary so the whole stays within ``max_bytes``."""
    data = text.encode("utf-8")
    if len(data) <= max_bytes:
        return text
    room = max(0, max_bytes - len(marker.encode("utf-8")))
    head = data[:room].decode("utf-8", errors="ignore")  # drops a split multi-byte character
    return head + marker

"""What became of a tool call, as its receipt says it (pure).

``receipt_fields`` reads a call's one result: a call that ran and answered (or that a recovery
answered for) is ``delivered``, with the SHA-256 of what the model read; one the gate or a
person refused is ``denied``; one whose attempt was lost after it began, before anyone settled
it, is ``unknown``; anything else did not run to an end (``failed``). The note says why, as the
result does.
"""

from __future__ import annotations

from typing import Any, Final

from orga.contracts.conversation import ToolResult
from orga.contracts.journal import ReceiptOutcome
from orga.core.signatures import sha256_text

__all__ = ["NOTE_CHARS", "receipt_fields"]

NOTE_CHARS: Final = 300
"""Characters of a receipt's note."""


def _note(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= NOTE_CHARS else flat[: NOTE_CHARS - 1] + "…"


def receipt_fields(result: ToolResult, *, lost: bool = False) -> dict[str, Any]:
    """The fields of ``result``'s ``CallReceipt`` (besides the journal stamp); ``lost``: the
    ``unknown`` receipt of a call whose earlier attempt was lost, which the worker settled
    (``result.settled``) before it ran again."""
    if lost:
        return {
            "call_id": result.call_id,
            "tool": result.name,
            "outcome": "unknown",
            "note": "an attempt was lost after it began; the worker settled it "
            f"({result.settled}) before anything ran again",
        }
    outcome: ReceiptOutcome
    if result.settled == "cancelled":
        return {
            "call_id": result.call_id,
            "tool": result.name,
            "outcome": "unknown",
            "note": "the loop was cancelled while the call ran: its effect may have landed "
            "(ask by the call's idempotency key)",
        }
    if result.status in ("ok", "recovered"):
        outcome = "delivered"
    elif result.status == "denied":
        outcome = "denied"
    elif result.status == "unknown":
        outcome = "unknown"
    else:
        outcome = "failed"
    note = ""
    if result.settled is not None:
        note = f"settled after a lost attempt: {result.settled}"
    elif outcome != "delivered" or result.status == "recovered":
        note = _note(result.content)
    return {
        "call_id": result.call_id,
        "tool": result.name,
        "outcome": outcome,
        "digest": sha256_text(result.content) if outcome == "delivered" else None,
        "note": note,
    }

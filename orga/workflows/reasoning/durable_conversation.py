"""The durable conversation a loop keeps: its messages, their rolling digest, and the part of
it the model has not seen yet (the worker caches what it has).

The model's own turn is not sent back to it: the worker that made a call caches the assistant
turn its answer adds (``ConversationCache.expect``), as the loop will record it — so a turn
the loop records as answered (``expect``) counts as sent, and the next call carries what
follows it. A worker that has not got it (another worker, an evicted cache, an answer recorded
from another attempt) finds the digest does not match and reads the conversation back from
the workflow, as for any miss. The model's text and calls thus appear in history once, in the
call's result.

Workflow code.
"""

from __future__ import annotations

from collections.abc import Sequence

from orga.contracts.conversation import Message, chain_digest
from orga.contracts.inference import ConversationSlice

__all__ = ["Conversation"]


class Conversation:
    """The durable conversation, its rolling digest, and how much of it the model has seen."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.digest = ""
        self.sent = 0
        """Messages already sent to the model (the worker caches them)."""
        self._expected: Message | None = None
        """The assistant turn the last model call's worker cached after what it was sent."""

    def expect(self, answer: Message) -> None:
        """The model's answer (the loop's ids) was received: its worker caches ``answer`` after
        the messages sent."""
        self._expected = answer

    def append(self, messages: Sequence[Message]) -> None:
        """Add ``messages``; when the first is the answer the model's worker cached, as it is,
        and nothing unsent comes before it, it counts as sent."""
        cached = (
            self._expected is not None
            and self.sent == len(self.messages)
            and bool(messages)
            and messages[0] == self._expected
        )
        self._expected = None
        if messages:
            self.messages.extend(messages)
            self.digest = chain_digest(self.digest, messages)
        if cached:
            self.sent += 1

    def reset(self, messages: Sequence[Message]) -> None:
        """Start over with ``messages`` (before anything was sent to the model)."""
        self.messages, self.digest, self.sent, self._expected = [], "", 0, None
        self.append(messages)

    def unsent(self, workflow_id: str) -> ConversationSlice:
        """What the next model call carries: the new messages and the digest of the whole."""
        return ConversationSlice(
            workflow_id=workflow_id,
            start=self.sent,
            length=len(self.messages),
            digest=self.digest,
            messages=self.messages[self.sent :],
        )

    def mark_sent(self) -> None:
        self.sent = len(self.messages)

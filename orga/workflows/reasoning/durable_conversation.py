"""The durable conversation a loop keeps: its messages, their rolling digest, and the part of
it the model has not seen yet (the worker caches what it has).

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

    def append(self, messages: Sequence[Message]) -> None:
        if messages:
            self.messages.extend(messages)
            self.digest = chain_digest(self.digest, messages)

    def reset(self, messages: Sequence[Message]) -> None:
        """Start over with ``messages`` (before anything was sent to the model)."""
        self.messages, self.digest, self.sent = [], "", 0
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

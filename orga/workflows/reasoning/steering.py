"""Messages a person sends a running loop: taken at once, seen by the model before its next call.

Workflow code. The ``message`` update (validated: not empty, not too long, not once the loop has
answered or is moving to its next run) or signal puts a message in the loop's inbox; at the next
Observe — never in the middle of a running tool or model call — the inbox joins the conversation
as user messages, each journaled (``MessageReceived``). A message that arrives while the last
answer is on its way is not lost: the loop goes on with the answer and the message instead of
ending.
"""

from __future__ import annotations

from temporalio import workflow

from orga.contracts.conversation import Message, MessageAccepted, UserMessage
from orga.contracts.journal import MessageReceived
from orga.core.text import cut
from orga.workflows.reasoning.loop_books import LoopBooks

__all__ = ["Steering"]

_JOURNALED = 2_000
"""Characters of a message the journal keeps (the conversation keeps it whole)."""


class Steering:
    """One loop's inbox of messages from people."""

    def __init__(self, books: LoopBooks) -> None:
        self._books = books
        self._inbox: list[tuple[int, UserMessage]] = []
        self.received = 0
        """Messages taken so far by this run."""
        self.closed: str | None = None
        """Why no message is taken any more (the loop answered, or moves to its next run)."""
        self.turn: int | None = None
        """In a thread: the turn a message sent now joins (``MessageAccepted.turn``)."""

    @property
    def waiting(self) -> int:
        return len(self._inbox)

    def check(self, message: UserMessage) -> None:
        """Raise ``ValueError`` unless the loop can take ``message``."""
        if not message.text.strip():
            raise ValueError("the message is empty: say something")
        if self.closed is not None:
            raise ValueError(f"the loop takes no message now: {self.closed}")

    def receive(self, message: UserMessage) -> MessageAccepted:
        """Put ``message`` in the inbox (the validator, or the signal handler, checked it)."""
        self.check(message)
        self.received += 1
        self._inbox.append((self.received, message))
        return MessageAccepted(
            seq=self.received, at=workflow.now(), waiting=len(self._inbox), turn=self.turn
        )

    def receive_by_signal(self, message: UserMessage) -> None:
        try:
            self.receive(message)
        except ValueError as error:
            workflow.logger.warning("message signal ignored: %s", error)

    def take(self) -> list[Message]:
        """The inbox as user messages for the conversation, each journaled; emptied."""
        taken, self._inbox = self._inbox, []
        books = self._books
        for seq, message in taken:
            books.record(
                MessageReceived(
                    **books.stamp(),
                    number=seq,
                    sender=message.sender,
                    text=cut(message.text, _JOURNALED),
                    characters=len(message.text),
                    received_at=workflow.now(),
                )
            )
        return [Message(role="user", content=message.text) for _, message in taken]

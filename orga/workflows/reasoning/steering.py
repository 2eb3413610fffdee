"""Messages a person sends a running loop: taken at once, seen by the model before its next call.

Workflow code. The ``message`` update (validated: not empty, not too long, not once the loop has
answered, not beginning with a mark of orga's own notices, not
past ``MAX_WAITING`` messages waiting) or signal puts a message in the loop's inbox; at the next
Observe — never in the middle of a running tool or model call — the inbox joins the conversation
as user messages, each journaled (``MessageReceived``). A message that arrives while the last
answer is on its way is not lost: the loop goes on with the answer and the message instead of
ending. The inbox, and the numbering of messages, cross continue-as-new (``carry``): a message
accepted before a thread's turn ended that continued as new is read by the next run.

A message sent again with the same update id (its sender lost the answer on the way and
resent it: ``orga.desk.sender``) is answered with how the first was accepted, not taken twice:
Temporal itself answers a repeated update id within a run, and the loop remembers the ids of
its newest ``KNOWN_KEPT`` messages across continue-as-new.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from temporalio import workflow

from orga.contracts.carry import InboxCarry, WaitingMessage
from orga.contracts.conversation import Message, MessageAccepted, UserMessage
from orga.contracts.journal import MessageReceived
from orga.core.speakers import imitation_problem, people_texts
from orga.core.text import cut
from orga.workflows.reasoning.loop_books import LoopBooks
from orga.workflows.shared.patches import MESSAGE_LIMITS

__all__ = ["KNOWN_KEPT", "MAX_WAITING", "READ_KEPT", "Steering"]

MAX_WAITING: Final = 100
"""Messages that may wait for the loop's next Observe: a flood of messages is refused past it,
not kept without bound in the loop's state (and carried into every next run)."""

READ_KEPT: Final = 100
"""Messages whose reading turn a thread remembers (the newest)."""

KNOWN_KEPT: Final = 32
"""Update ids of the newest messages a loop remembers across continue-as-new (each id up to
``_KNOWN_ID`` characters; a longer one Temporal still answers within its run)."""

_KNOWN_ID = 200

_JOURNALED = 2_000
"""Characters of a message the journal keeps (the conversation keeps it whole)."""


class Steering:
    """One loop's inbox of messages from people."""

    def __init__(self, books: LoopBooks) -> None:
        self._books = books
        self._inbox: list[tuple[int, UserMessage]] = []
        self.received = 0
        """Messages taken so far (by this run and the runs it continues: numbers go on)."""
        self.read_in: dict[int, int] = {}
        """In a thread: message number → the turn that read it (the newest ``READ_KEPT``), so
        the ``turn`` update can answer a message with the turn that really read it."""
        self.closed: str | None = None
        """Why no message is taken any more (the loop answered, or the thread ended)."""
        self.known: dict[str, MessageAccepted] = {}
        """The ``message`` update id of each of the newest ``KNOWN_KEPT`` messages → how it
        was accepted."""
        self.turn: int | None = None
        """In a thread: the turn a message sent now joins (``MessageAccepted.turn``)."""

    @property
    def waiting(self) -> int:
        return len(self._inbox)

    def check(self, message: UserMessage, *, validating: bool = True) -> None:
        """Raise ``ValueError`` unless the loop can take ``message``. ``validating``: the
        update's validator asks (it never runs on replay); else the handler does, and the
        newer rules refuse only behind their patch (asked only when they would refuse). A
        message sent again (``again``) is not refused: it is answered as it was accepted."""
        if self.again() is not None:
            return
        if not message.text.strip():
            raise ValueError("the message is empty: say something")
        if self.closed is not None:
            raise ValueError(f"the loop takes no message now: {self.closed}")
        problem = imitation_problem([message.text])
        if problem is None and len(self._inbox) >= MAX_WAITING:
            problem = (
                f"{MAX_WAITING} messages already wait for the loop to read them (before its "
                "next model call): send this one once it has"
            )
        if problem is not None and (validating or workflow.patched(MESSAGE_LIMITS)):
            raise ValueError(problem)

    def receive(self, message: UserMessage) -> MessageAccepted:
        """Put ``message`` in the inbox (the validator, or the signal handler, checked it);
        a message sent again is answered as it was accepted the first time, not put in twice."""
        again = self.again()
        if again is not None:
            return again
        self.check(message, validating=False)
        self.received += 1
        self._inbox.append((self.received, message))
        accepted = MessageAccepted(
            seq=self.received, at=workflow.now(), waiting=len(self._inbox), turn=self.turn
        )
        update = workflow.current_update_info()
        if update is not None and len(update.id) <= _KNOWN_ID:
            self.known[update.id] = accepted
            while len(self.known) > KNOWN_KEPT:
                del self.known[next(iter(self.known))]
        return accepted

    def again(self) -> MessageAccepted | None:
        """How the message the running ``message`` update carries was accepted, if its id
        was taken before (by this run, or one it continues); None for a new one, a signal."""
        update = workflow.current_update_info()
        return None if update is None else self.known.get(update.id)

    def refused(self, texts: Sequence[str]) -> str | None:
        """Why a person's ``texts`` that reach the loop outside the inbox (its task, a fork's
        message) are refused (behind the patch, asked only when they would be), or None."""
        problem = imitation_problem(texts)
        return problem if problem is not None and workflow.patched(MESSAGE_LIMITS) else None

    def refused_task(self, messages: Sequence[Message]) -> str | None:
        """Why the loop's task (its input's user messages) is refused, or None."""
        problem = self.refused(people_texts(messages))
        return f"the task is refused: {problem} Nothing was run." if problem else None

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
            if self.turn is not None:
                self.read_in[seq] = self.turn
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
        while len(self.read_in) > READ_KEPT:
            del self.read_in[next(iter(self.read_in))]
        return [Message(role="user", content=message.text) for _, message in taken]

    def is_waiting(self, seq: int) -> bool:
        """Whether message ``seq`` waits in the inbox (accepted, not read yet)."""
        return any(waiting == seq for waiting, _ in self._inbox)

    def read_by(self, seq: int) -> int | None:
        """The turn of a thread that read message ``seq`` (None: not yet, or long ago)."""
        return self.read_in.get(seq)

    def carry(self) -> InboxCarry | None:
        """What the next run's inbox starts from: nothing accepted is lost on the way (None:
        no message was ever sent)."""
        if not self.received:
            return None
        return InboxCarry(
            received=self.received,
            waiting=[WaitingMessage(seq=seq, message=message) for seq, message in self._inbox],
            read_in=dict(self.read_in),
            known=dict(self.known),
        )

    def restore(self, carry: InboxCarry) -> None:
        """Pick up the previous run's inbox."""
        self.received = carry.received
        self._inbox = [(w.seq, w.message) for w in carry.waiting]
        self.read_in = dict(carry.read_in)
        self.known = dict(carry.known)

"""The ``ReasoningLoop`` workflow: Observe → Reason → Gate → Act until the model answers.

The definition only: what Temporal starts, queries and asks. The loop itself — its state, the
run and the cycle — is ``orga.workflows.reasoning.agent_loop.AgentLoop``. Every run shares
both with the others instead of importing them anew (``orga.worker.sandbox``).
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.common import RawValue

from orga.contracts.audit import AuditChain
from orga.contracts.conversation import Message, MessageAccepted, UserMessage
from orga.contracts.delegation import REMOTE_WAITS_SIGNAL, RemoteWaits
from orga.contracts.forks import ForkPoint, ForkPointAsk
from orga.contracts.inference import ConversationRange
from orga.contracts.journal import Journal
from orga.contracts.messages import (
    AUDIT_QUERY,
    CLOSE_UPDATE,
    CONVERSATION_QUERY,
    FORK_QUERY,
    JOURNAL_QUERY,
    LOOP_WORKFLOW,
    MESSAGE_SIGNAL,
    MESSAGE_UPDATE,
    PAUSE_LIFTED_SIGNAL,
    STATE_QUERY,
    TURN_UPDATE,
)
from orga.contracts.state import LoopResult, LoopState
from orga.contracts.threads import CloseThread, ThreadClosed, TurnResult, TurnWait
from orga.core.judging import loop_task
from orga.workflows.reasoning.agent_loop import AgentLoop
from orga.workflows.shared.desk_handlers import DeskHandlers

__all__ = ["ReasoningLoopWorkflow"]


@workflow.defn(name=LOOP_WORKFLOW)
class ReasoningLoopWorkflow(DeskHandlers):
    """One agent loop. Start it with a ``LoopInput``; it returns a ``LoopResult``."""

    @workflow.init
    def __init__(self, input: RawValue) -> None:
        self._loop = AgentLoop(input)
        self._desk = self._loop.books.desk  # the people's handlers answer here

    # ---- queries and people ----------------------------------------------------------------

    @workflow.query(name=STATE_QUERY)
    def state(self) -> LoopState:
        """Phase, iteration, usage, last stop reason, tool calls so far and status."""
        return self._loop.state()

    @workflow.query(name=JOURNAL_QUERY)
    def journal(self) -> Journal:
        """The typed journal (bounded; ``dropped`` counts entries dropped to bound it)."""
        return self._loop.books.journal

    @workflow.query(name=AUDIT_QUERY)
    def audit(self) -> AuditChain:
        """This run's audit chain (after the earlier runs' head): every governance record."""
        return self._loop.books.audit.chain()

    def judged_as(self) -> tuple[str, str]:
        """The agent and the task a judge is shown with a held call: the loop's first user
        message (no query: read after a replay, by ``orga judge what-if``)."""
        return self._loop.books.config.agent_id, loop_task(self._loop.conversation.messages)

    @workflow.query(name=CONVERSATION_QUERY)
    def conversation(self, window: ConversationRange | None = None) -> list[Message]:
        """Messages ``[start, end)`` of the durable conversation (all by default)."""
        window = window or ConversationRange()
        return self._loop.conversation.messages[window.start : window.end]

    @workflow.query(name=FORK_QUERY)
    def fork_point(self, ask: ForkPointAsk) -> ForkPoint:
        """The loop's state after a turn, for a fork (``orga fork``)."""
        return self._loop.fork_point(ask)

    @workflow.update(name=MESSAGE_UPDATE)
    def message(self, message: UserMessage) -> MessageAccepted:
        """A person's message: the model reads it before its next call."""
        return self._loop.steering.receive(message)

    @message.validator
    def _check_message(self, message: UserMessage) -> None:
        self._loop.steering.check(message)

    @workflow.signal(name=MESSAGE_SIGNAL)
    def message_signal(self, message: UserMessage) -> None:
        """The same message, for senders that cannot wait for an answer."""
        self._loop.steering.receive_by_signal(message)

    @workflow.signal(name=PAUSE_LIFTED_SIGNAL)
    def pause_lifted(self) -> None:
        """A pause ended: the calls a pause holds ask again now (spread out)."""
        self._loop.books.pauses_lifted += 1

    @workflow.signal(name=REMOTE_WAITS_SIGNAL)
    def remote_waits(self, waits: RemoteWaits) -> None:
        """A remote delegation's task waits for a person at its endpoint, or no longer."""
        self._loop.books.remote_waits(waits)

    @workflow.update(name=TURN_UPDATE)
    async def turn(self, wait: TurnWait) -> TurnResult:
        """A thread's turn's answer: waits until the turn has one."""
        return await self._loop.a_thread().result_of(wait, self._loop.ended)

    @turn.validator
    def _check_turn(self, wait: TurnWait) -> None:
        self._loop.a_thread().check_wait(wait)

    @workflow.update(name=CLOSE_UPDATE)
    def close(self, close: CloseThread) -> ThreadClosed:
        """Close a thread: it ends now, or once the turn it works on is answered."""
        return self._loop.a_thread().close(close)

    @close.validator
    def _check_close(self, close: CloseThread) -> None:
        self._loop.a_thread().check_close(close)

    def trace_root(self) -> dict[str, str]:
        """The GenAI attributes of the span this loop's trace starts with when its start
        carried no trace context (``orga.runtime.tracing``): only what the client said."""
        return self._loop.trace_root()

    # ---- the loop --------------------------------------------------------------------------

    @workflow.run
    async def run(self, input: RawValue) -> LoopResult:
        return await self._loop.run()

"""One AG-UI run (``orga.web.agui``): a thread's turn started, continued or resumed, and
followed as AG-UI events until it is answered or waits for a person.

What it reads, it reads from the thread itself — its Workflow Stream (the model's text, from
the offset the turn began at) and its ``state`` query (tool calls, waiting approvals) — so
nothing is held in the endpoint's process.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Final, cast

from ag_ui.core import (
    BaseEvent,
    Interrupt,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunStartedEvent,
    StateSnapshotEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    UserMessage,
)
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from temporalio.client import Client, WorkflowQueryFailedError, WorkflowUpdateFailedError
from temporalio.contrib.workflow_streams import WorkflowStreamClient
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError

from orga.client import start_thread
from orga.contracts.approvals import ApprovalDecision, PendingApproval
from orga.contracts.config import LoopConfig
from orga.contracts.inference import STREAM_TOPIC, StreamedText
from orga.contracts.messages import STATE_QUERY
from orga.contracts.principals import PrincipalClaim
from orga.contracts.state import LoopState, ToolCallRecord
from orga.contracts.threads import ThreadConfig, TurnResult
from orga.desk.approvals import approval_decision
from orga.desk.facts import DeskError
from orga.desk.sender import await_turn, send_decision, send_user_message
from orga.runtime.binding import Issuer

__all__ = ["APPROVAL_SCHEMA", "THREAD_PREFIX", "AguiOptions", "AguiRun", "Refused"]


def _snapshot(state: LoopState) -> StateSnapshotEvent:
    """The thread as the app may show it: status, phase, turn, what it spent and has left,
    and what waits for a person."""
    thread = state.thread
    return StateSnapshotEvent(
        snapshot={
            "status": state.status,
            "phase": state.phase,
            "turn": thread.turn if thread is not None else None,
            "usage": {
                "total_tokens": state.usage.total_tokens,
                "cost_usd": state.usage.cost_usd,
            },
            "pending_approvals": [
                {"call_id": p.call_id, "tool": p.tool, "arguments": p.arguments, "reason": p.reason}
                for p in state.pending_approvals
            ],
            "principal": state.principal.describe() if state.principal else None,
        }
    )


THREAD_PREFIX: Final = "agui-"
"""An AG-UI thread's workflow id is this and its ``threadId``."""
_LOOK: Final = 0.25
"""Seconds between looks at the thread's state (tool calls, approvals) while a run streams."""

APPROVAL_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "approved": {"type": "boolean"},
        "reason": {"type": "string", "maxLength": 2000},
        "editedArgs": {
            "type": "object",
            "description": "Approve with edits: the call's arguments as they should run "
            "(they replace the proposed ones, and pass the gate again).",
        },
        "arguments": {"type": "object", "description": "The same as editedArgs."},
    },
    "required": ["approved"],
    "additionalProperties": False,
}
"""What an approval interrupt's answer (a resume entry's payload) holds."""


@dataclass(frozen=True)
class AguiOptions:
    """How the endpoint starts threads and whom it trusts."""

    task_queue: str
    config: LoopConfig = field(default_factory=LoopConfig)
    """The config every thread starts with (streamed, a thread: set here)."""
    issuer: Issuer | None = None
    """Signs each caller as the principal of the threads it starts (else a claim)."""
    approver_keys: Mapping[str, Ed25519PrivateKey] = field(default_factory=dict[str, Any])
    """Each user's own approver key, where the endpoint keeps them (else decisions go
    unsigned: recorded unverified, refused where approvers are enrolled)."""
    hosts: frozenset[str] = frozenset({"127.0.0.1", "localhost"})
    origins: frozenset[str] = frozenset()
    """Browser origins allowed to call (``Origin`` header); a request without one (a server,
    a script) is allowed."""


class Refused(Exception):
    """A request the endpoint refuses: its HTTP status and why."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class AguiRun:
    """One AG-UI run: a thread's turn, started or continued, streamed."""

    client: Client
    options: AguiOptions
    given: RunAgentInput
    user: str
    workflow_id: str
    found: LoopState | None
    """The thread's state when the run was asked for (None: it does not exist yet)."""
    sent_calls: set[str] = field(default_factory=set[str])
    """Tool calls the client knows of: of earlier turns (never sent again), or sent here."""
    started_calls: set[str] = field(default_factory=set[str])
    """Calls an earlier run of this turn announced (its interrupts): only their results are
    still to send."""
    messages: int = 0

    async def events(self) -> AsyncIterator[BaseEvent]:
        given = self.given
        yield RunStartedEvent(thread_id=given.thread_id, run_id=given.run_id)
        try:
            turn, offset = await self._begin()
            async for event in self._follow(turn, offset):
                yield event
        except WorkflowAlreadyStartedError:  # another run started it meanwhile
            yield RunErrorEvent(
                message="the thread was started meanwhile: send the message again",
                code="ThreadStartedMeanwhile",
            )
        except (Refused, DeskError, WorkflowUpdateFailedError, RPCError) as error:
            message = (
                str(error.cause) if isinstance(error, WorkflowUpdateFailedError) else str(error)
            )
            yield RunErrorEvent(message=message, code=type(error).__name__)

    async def _begin(self) -> tuple[int, int]:
        """Start the turn (or answer its approvals); the turn and where its text begins."""
        handle = self.client.get_workflow_handle(self.workflow_id)
        reader = WorkflowStreamClient.create(self.client, self.workflow_id)
        state = self.found
        if state is None:
            await start_thread(
                self.client,
                self.options.config.model_copy(update={"stream": True, "thread": ThreadConfig()}),
                self._text(),
                workflow_id=self.workflow_id,
                task_queue=self.options.task_queue,
                principal=PrincipalClaim(user=self.user),
                issuer=self.options.issuer,
            )
            return 1, 0
        offset = await reader.get_offset()
        self.sent_calls = {record.call_id for record in state.tool_calls}  # earlier turns'
        if self.given.resume:
            await self._decide(state)
            self.started_calls = {entry.interrupt_id for entry in self.given.resume}
            assert state.thread is not None
            return state.thread.turn, offset
        accepted = await send_user_message(handle, self._text(), sender=self.user)
        assert accepted.turn is not None, "a thread names the turn a message joins"
        return accepted.turn, offset

    async def _state(self) -> LoopState:
        """The thread's state, asked of it directly: a worker that has just taken it need not
        show as a poller yet (the desk's presence check would refuse it)."""
        handle = self.client.get_workflow_handle(self.workflow_id)
        try:
            return await handle.query(
                STATE_QUERY, result_type=LoopState, rpc_timeout=timedelta(seconds=10)
            )
        except (RPCError, WorkflowQueryFailedError) as error:
            raise DeskError(f"the thread's state cannot be read: {error}") from error

    def _text(self) -> str:
        said = [m for m in self.given.messages if isinstance(m, UserMessage)]
        if not said or not isinstance(said[-1].content, str) or not said[-1].content.strip():
            raise Refused(422, "the run has no user message to send (messages[-1])")
        return said[-1].content

    async def _decide(self, state: LoopState) -> None:
        waiting = {p.call_id: p for p in state.pending_approvals}
        answered = {entry.interrupt_id for entry in self.given.resume or []}
        if missing := sorted(set(waiting) - answered):  # AG-UI: a resume answers them all
            raise Refused(409, f"the resume does not answer the interrupts {missing!r}")
        # Every answer is checked before any is sent: a malformed one decides nothing (an
        # edit that does not parse must never approve the call as it was proposed).
        decisions: list[ApprovalDecision] = []
        for entry in self.given.resume or []:
            pending = waiting.get(entry.interrupt_id)
            if pending is None:
                raise Refused(409, f"no approval {entry.interrupt_id!r} waits in this thread")
            given: Any = entry.payload
            payload = cast(dict[str, Any], given) if isinstance(given, dict) else {}
            approved = entry.status == "resolved" and payload.get("approved") is True
            reason: Any = payload.get("reason") or (None if approved else "rejected in the app")
            # editedArgs as pydantic-ai's AG-UI apps send it; arguments as orga's docs said.
            edited: Any = payload.get("editedArgs", payload.get("arguments")) if approved else None
            if edited is not None and not isinstance(edited, dict):
                raise Refused(422, "editedArgs must be a JSON object: nothing was decided")
            if reason is not None and not isinstance(reason, str):
                raise Refused(422, "reason must be a string: nothing was decided")
            decisions.append(
                approval_decision(
                    self.workflow_id,
                    pending,
                    call_id=pending.call_id,
                    approved=approved,
                    reason=reason,
                    approver=self.user,
                    arguments=cast(dict[str, Any] | None, edited),
                    key=self.options.approver_keys.get(self.user),
                )
            )
        handle = self.client.get_workflow_handle(self.workflow_id)
        for decision in decisions:
            await send_decision(handle, decision)

    async def _follow(self, turn: int, offset: int) -> AsyncIterator[BaseEvent]:
        """The turn's events until it is answered or waits for a person."""
        queue: asyncio.Queue[BaseEvent] = asyncio.Queue()
        reader = WorkflowStreamClient.create(self.client, self.workflow_id)
        streaming = asyncio.ensure_future(self._stream(reader, offset, queue))
        answer = asyncio.ensure_future(
            await_turn(self.client.get_workflow_handle(self.workflow_id), turn)
        )
        try:
            while True:
                while not queue.empty():
                    yield queue.get_nowait()
                if answer.done():
                    break
                state = await self._state()
                for record in state.tool_calls:
                    for event in self._ran(record):
                        yield event
                if state.pending_approvals:
                    while not queue.empty():
                        yield queue.get_nowait()
                    yield _snapshot(state)
                    for event in self._interrupt(state.pending_approvals):
                        yield event
                    return
                await asyncio.wait({answer}, timeout=_LOOK)
            with contextlib.suppress(TimeoutError):  # what is left of the stream
                await asyncio.wait_for(asyncio.shield(streaming), 2)
            while not queue.empty():
                yield queue.get_nowait()
            state = await self._state()
            for record in state.tool_calls:  # calls since the last look
                for event in self._ran(record):
                    yield event
            yield _snapshot(state)
            for event in self._answered(answer.result()):
                yield event
        finally:
            for task in (streaming, answer):
                task.cancel()
            await asyncio.gather(streaming, answer, return_exceptions=True)

    async def _stream(
        self, reader: WorkflowStreamClient, offset: int, queue: asyncio.Queue[BaseEvent]
    ) -> None:
        """The model's text, as AG-UI text messages (one per model call)."""
        current: str | None = None
        async for item in reader.subscribe([STREAM_TOPIC], offset, result_type=StreamedText):
            piece: StreamedText = item.data
            if (piece.done or piece.restart) and current is not None:
                queue.put_nowait(TextMessageEndEvent(message_id=current))
                current = None
            elif piece.text:
                if current is None:
                    self.messages += 1
                    current = f"{self.given.run_id}-{self.messages}"
                    queue.put_nowait(TextMessageStartEvent(message_id=current, role="assistant"))
                queue.put_nowait(TextMessageContentEvent(message_id=current, delta=piece.text))

    def _ran(self, record: ToolCallRecord) -> list[BaseEvent]:
        if record.call_id in self.sent_calls:
            return []
        self.sent_calls.add(record.call_id)
        call = record.call_id
        announced = call in self.started_calls
        return [
            *(
                []
                if announced
                else [
                    ToolCallStartEvent(tool_call_id=call, tool_call_name=record.tool),
                    ToolCallEndEvent(tool_call_id=call),
                ]
            ),
            ToolCallResultEvent(
                message_id=f"{call}-result",
                tool_call_id=call,
                content=json.dumps({"status": record.status, "is_error": record.is_error}),
                role="tool",
            ),
        ]

    def _interrupt(self, waiting: list[PendingApproval]) -> list[BaseEvent]:
        events: list[BaseEvent] = []
        for pending in waiting:
            if pending.call_id not in self.sent_calls:
                events += [
                    ToolCallStartEvent(tool_call_id=pending.call_id, tool_call_name=pending.tool),
                    ToolCallArgsEvent(tool_call_id=pending.call_id, delta=pending.arguments),
                    ToolCallEndEvent(tool_call_id=pending.call_id),
                ]
        interrupts = [
            Interrupt(
                id=p.call_id,
                reason="tool_approval",
                message=f"{p.tool}: {p.reason}",
                tool_call_id=p.call_id,
                response_schema=APPROVAL_SCHEMA,
            )
            for p in waiting
        ]
        outcome = RunFinishedInterruptOutcome(interrupts=interrupts)
        given = self.given
        return [
            *events,
            RunFinishedEvent(thread_id=given.thread_id, run_id=given.run_id, outcome=outcome),
        ]

    def _answered(self, result: TurnResult) -> list[BaseEvent]:
        events: list[BaseEvent] = []
        if self.messages == 0:  # nothing streamed: the answer as one message
            message = f"{self.given.run_id}-answer"
            events += [
                TextMessageStartEvent(message_id=message, role="assistant"),
                TextMessageContentEvent(message_id=message, delta=result.said or " "),
                TextMessageEndEvent(message_id=message),
            ]
        given = self.given
        outcome = {"output": result.said, "value": result.value, "turn": result.turn}
        return [
            *events,
            RunFinishedEvent(thread_id=given.thread_id, run_id=given.run_id, result=outcome),
        ]

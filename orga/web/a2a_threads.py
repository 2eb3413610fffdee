"""The A2A endpoint's executor (``orga.web.a2a``): each A2A message a turn of its context's
thread, and the task's states as the turn goes.

The first message of a context starts the thread for its caller (``a2a-<contextId>``, its
principal the caller, bound by the endpoint's issuer when it has one); a later one is sent with
its A2A message id as its update id. While the turn runs, the model's text is streamed as it
comes — each piece a ``working`` status update whose message holds it (metadata
``orga.stream``: the model call, and ``restart`` where a retried call begins again) — and the
task is ``input-required`` while a call waits for a person (the thread's state, looked at every
half second at first, every 10 s at most while nothing changes; its message says what waits,
in words and as data: ``APPROVAL_KEY``). A caller the operator names (``AguiOptions.
a2a_deciders``, ``orga api --a2a-decider``) gets its task back there, at rest, and decides by a
message to the task carrying its decision (``DECISION_KEY``: an ``ApprovalDecision`` in its own
name, ``via`` ``a2a``, signed with its enrolled approver key), which the thread verifies and
records like any approver's; one that is not taken leaves the task waiting, saying why. Others
wait for orga's people (desk, CLI, AG-UI). Then ``completed``, with the
answer as the ``answer`` artifact (a typed thread's value as a data part; what the turn spent
in its metadata, ``A2A_USAGE_KEY``), or ``failed`` with the reason. A cancel cancels the
thread (Temporal's cancel reaches a running tool).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from typing import Any, Final, cast

from a2a.helpers import (
    get_data_parts,
    new_data_part,
    new_task_from_user_message,
    new_text_message,
    new_text_part,
)
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types import Task, TaskState
from google.protobuf.json_format import MessageToDict
from pydantic import ValidationError
from temporalio.client import Client, WorkflowQueryFailedError, WorkflowUpdateFailedError
from temporalio.common import RawValue
from temporalio.contrib.workflow_streams import WorkflowStreamClient
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError

from orga.client import ThreadHandle, start_thread
from orga.contracts.approvals import ApprovalDecision
from orga.contracts.delegation import A2A_USAGE_KEY
from orga.contracts.inference import STREAM_TOPIC, StreamedText
from orga.contracts.principals import PrincipalClaim
from orga.contracts.state import LoopState
from orga.contracts.threads import ThreadConfig, TurnResult
from orga.desk.facts import DeskError
from orga.desk.sender import send_decision
from orga.web.a2a_store import ENDED
from orga.web.agui import owned
from orga.web.agui_run import AguiOptions, Refused

__all__ = ["A2A_PREFIX", "APPROVAL_KEY", "DECISION_KEY", "STREAM_KEY", "TURN_KEY", "Threads"]

A2A_PREFIX: Final = "a2a-"
"""An A2A context's thread: the workflow id is this and the ``contextId``."""
APPROVAL_KEY: Final = "orga.approval"
"""The data part of an input-required message: the thread and its waiting calls."""
DECISION_KEY: Final = "orga.decision"
"""The data part of a caller's message that decides a waiting call (an ``ApprovalDecision``)."""
TURN_KEY: Final = "orga.turn"
"""The metadata of an input-required message: the turn it holds up (``turn``, ``seq``)."""
STREAM_KEY: Final = "orga.stream"
"""The metadata key of a streamed piece's status update: ``{"call": n, "restart": bool}``."""
_ASKED: Final = TaskState.TASK_STATE_INPUT_REQUIRED
_CONTEXT_ID: Final = re.compile(r"[A-Za-z0-9._-]{1,120}")
_WATCH: Final = (0.5, 10.0)
"""Seconds between looks at a turn's state (does a call wait for a person?): the first, and
the most they grow to (doubling while nothing changes), so a wait of days asks rarely."""
_DRAIN_SECONDS: Final = 5.0
"""At most this long, once a turn is answered, for its last streamed pieces to be read."""
_log = logging.getLogger("orga.web.a2a")


class Threads(AgentExecutor):
    """Each A2A message, a turn of the context's thread (see the module)."""

    def __init__(self, client: Client, options: AguiOptions, prefix: str = A2A_PREFIX) -> None:
        self._client = client
        self._options = options
        self._prefix = prefix
        """A context's thread is this and the ``contextId`` (one agent's endpoint of several:
        ``a2a-<agent>/``, so that one caller's contexts of two agents are two threads)."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        current = context.current_task
        if current is None:
            assert context.message is not None, "a task begins with a message"
            await event_queue.enqueue_event(new_task_from_user_message(context.message))
        updater = TaskUpdater(event_queue, context.task_id or "", context.context_id or "")
        decides = _caller(context) in self._options.a2a_deciders
        if current is not None and current.status.state in ENDED:  # picked up as it ended
            return
        try:
            resting = current is not None and current.status.state == _ASKED
            if current is not None and (resting or context.message is None):
                begun = await self._resume(context, current, updater)  # or picked up again
                if begun is None:  # its decision was not taken: it still waits
                    return
            else:
                begun = await self._send(context)
            chat, turn, seq, offset = begun
            await _working(updater, turn, seq)
            read = _Read(offset)
            streaming = asyncio.create_task(
                self._stream(chat.handle.id, read, updater, _turn(turn, seq))
            )
            try:
                answered = await self._answer(chat, turn, seq, updater, rest=decides)
                if answered is None:  # it rests at input-required: the caller decides
                    return
                await read.through(await self._offset(chat.handle.id))  # the turn's last pieces
            finally:
                streaming.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await streaming
        except (Refused, DeskError) as refused:
            await updater.failed(self._says(context, str(refused)))
            return
        except WorkflowUpdateFailedError as error:
            await updater.failed(self._says(context, str(error.cause or error)))
            return
        except WorkflowAlreadyStartedError:  # another request started the context meanwhile
            said = "the context's thread was started meanwhile: send the message again"
            await updater.failed(self._says(context, said))
            return
        except RPCError as error:
            await updater.failed(self._says(context, f"Temporal: {error.message}"))
            return
        parts = [new_text_part(answered.output)]
        if answered.value is not None:
            parts.append(new_data_part(answered.value))
        spent = {**answered.usage.model_dump(), "model_calls": answered.iterations}
        await updater.add_artifact(parts, name="answer", metadata={A2A_USAGE_KEY: spent})
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        handle = self._client.get_workflow_handle(f"{self._prefix}{context.context_id}")
        try:
            await handle.cancel()
        except RPCError as error:
            _log.warning("cancel of %s: %s", handle.id, error.message)
        updater = TaskUpdater(event_queue, context.task_id or "", context.context_id or "")
        await updater.cancel()

    async def _send(self, context: RequestContext) -> tuple[ThreadHandle, int, int | None, int]:
        """The message sent to the context's thread (started for the caller if new): the
        thread, the turn that reads it, its number (None: the thread's first) and the offset
        of its stream from which the turn's text comes."""
        user = _caller(context)
        context_id = context.context_id or ""
        if not _CONTEXT_ID.fullmatch(context_id):
            raise Refused(400, "a contextId is letters, digits and ._- (at most 120)")
        text = context.get_user_input()
        if not text.strip():
            raise Refused(422, "the message holds no text")
        workflow_id = f"{self._prefix}{context_id}"
        issuer = self._options.issuer
        found = await owned(self._client, workflow_id, user, issuer.name if issuer else None)
        if found is None:
            config = self._options.config.model_copy(
                update={"thread": ThreadConfig(), "stream": True}
            )
            chat = await start_thread(
                self._client,
                config,
                text,
                workflow_id=workflow_id,
                task_queue=self._options.task_queue,
                principal=PrincipalClaim(user=user),
                issuer=issuer,
            )
            return chat, 1, None, 0
        chat = ThreadHandle(self._client.get_workflow_handle(workflow_id))
        offset = await self._offset(workflow_id)
        message = context.message
        message_id = f"a2a-{message.message_id}" if message and message.message_id else None
        accepted = await chat.say(text, sender=user, message_id=message_id)
        return chat, accepted.turn or 1, accepted.seq, offset

    async def _offset(self, workflow_id: str) -> int:
        """Where the thread's stream will write next."""
        return await WorkflowStreamClient.create(self._client, workflow_id).get_offset()

    async def _stream(
        self, workflow_id: str, read: _Read, updater: TaskUpdater, held: dict[str, Any]
    ) -> None:
        """The model's text from the thread's stream, from ``read.next``: each piece a working
        status update (until cancelled, once the turn's last pieces were read); ``held``: the
        turn it belongs to, in each one's metadata."""
        reader = WorkflowStreamClient.create(self._client, workflow_id)
        converter = self._client.data_converter.payload_converter
        try:
            # Every topic (the loop's progress too), to know how far the stream was read.
            async for item in reader.subscribe(None, read.next, result_type=RawValue):
                piece = None
                if item.topic == STREAM_TOPIC:
                    piece = converter.from_payload(item.data.payload, StreamedText)
                if piece is not None and (piece.text or piece.restart):
                    said = {"call": piece.iteration, "restart": piece.restart}
                    message = updater.new_agent_message(
                        [new_text_part(piece.text)], metadata={STREAM_KEY: said, **held}
                    )
                    await updater.update_status(TaskState.TASK_STATE_WORKING, message)
                read.reached(item.offset + 1)
        except (RPCError, ValueError, TypeError) as error:  # the answer still comes
            _log.warning("streaming %s: %s", workflow_id, error)
        read.reached(1 << 62)  # nothing more will be read

    async def _resume(
        self, context: RequestContext, current: Task, updater: TaskUpdater
    ) -> tuple[ThreadHandle, int, int | None, int] | None:
        """A caller's message to its task that rests at input-required: the decision it
        holds sent to the thread (None where it was not taken: the task waits again, saying
        why); then the turn is followed as it goes on."""
        user = _caller(context)
        workflow_id = f"{self._prefix}{context.context_id}"
        issuer = self._options.issuer
        if await owned(self._client, workflow_id, user, issuer.name if issuer else None) is None:
            raise Refused(404, "no such thread")
        held = MessageToDict(current.status.message.metadata).get(TURN_KEY)
        where = cast(dict[str, Any], held) if isinstance(held, dict) else {}
        turn, seq = where.get("turn"), where.get("seq")
        if not isinstance(turn, int | float) or turn < 1:
            raise Refused(409, "this task holds no turn to follow or decide")
        chat = ThreadHandle(self._client.get_workflow_handle(workflow_id))
        number, message = int(turn), (int(seq) if isinstance(seq, int | float) else None)
        decision = _decision_in(context)
        if decision is not None and (problem := await self._decide(chat, decision, user)):
            state = await chat.state()
            said = f"Your decision was not taken: {problem}. {_waiting(state)}"
            asking = _asking(workflow_id, state, number, message, updater, said)
            await updater.requires_input(asking)
            return None
        return chat, number, message, await self._offset(workflow_id)

    async def _decide(self, chat: ThreadHandle, decision: ApprovalDecision, user: str) -> str:
        """Send a remote caller's decision to the thread: "" once taken, else why not."""
        if user not in self._options.a2a_deciders:
            return "this endpoint's operator does not let you decide; orga's people do"
        if decision.approver != user or decision.via != "a2a":
            return f'a decision sent here is yours: approver {user!r}, via "a2a", signed by you'
        try:
            await send_decision(chat.handle, decision)
        except WorkflowUpdateFailedError as error:
            return str(error.cause or error)
        return ""

    async def _answer(
        self, chat: ThreadHandle, turn: int, seq: int | None, updater: TaskUpdater, *, rest: bool
    ) -> TurnResult | None:
        """The turn's answer; meanwhile the task is input-required while a call waits — and
        with ``rest`` (the caller decides), it ends there (None)."""
        answer = asyncio.ensure_future(chat.turn(turn, message=seq))
        asking = False
        pause, most = _WATCH
        try:
            while not answer.done():
                await asyncio.wait({answer}, timeout=pause)
                if answer.done():
                    break
                try:
                    state = await chat.state()
                except (RPCError, WorkflowQueryFailedError):  # a worker lost meanwhile: later
                    continue
                waits = _waiting(state)
                if waits and not asking:
                    said = _asking(chat.handle.id, state, turn, seq, updater, waits)
                    await updater.requires_input(said)
                    if rest:
                        return None
                elif not waits and asking:
                    await _working(updater, turn, seq)
                pause = _WATCH[0] if asking != bool(waits) else min(pause * 2, most)
                asking = bool(waits)
            return answer.result()
        finally:
            answer.cancel()

    @staticmethod
    def _says(context: RequestContext, text: str) -> Any:
        return new_text_message(text, context_id=context.context_id, task_id=context.task_id)


class _Read:
    """How far a turn's stream has been read (the offset of the next item)."""

    def __init__(self, offset: int) -> None:
        self.next = offset
        self._moved = asyncio.Event()

    def reached(self, offset: int) -> None:
        self.next = max(self.next, offset)
        self._moved.set()

    async def through(self, end: int, seconds: float = _DRAIN_SECONDS) -> None:
        """Until the items before ``end`` were read (``seconds`` at most: the answer is sent
        regardless)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                while self.next < end:
                    self._moved.clear()
                    await self._moved.wait()


def _caller(context: RequestContext) -> str:
    """Who sent the request (the middleware lets no request without a caller through)."""
    user = context.call_context.user
    if not user.is_authenticated:
        raise Refused(401, "no caller: send Authorization: Bearer <your token>")
    return user.user_name


def _asking(
    workflow_id: str,
    state: LoopState,
    turn: int,
    seq: int | None,
    updater: TaskUpdater,
    said: str,
) -> Any:
    """The input-required message: what waits, in words and as data (``APPROVAL_KEY``: the
    thread and each waiting call, what a signed decision names), and the turn it holds up
    (metadata ``TURN_KEY``, read back when the caller decides)."""
    waiting = [p.model_dump(mode="json") for p in state.pending_approvals]
    data = {APPROVAL_KEY: {"workflow_id": workflow_id, "pending": waiting}}
    return updater.new_agent_message(
        [new_text_part(said), new_data_part(data)],
        metadata=_turn(turn, seq),
    )


def _turn(turn: int, seq: int | None) -> dict[str, Any]:
    """The metadata of every status message of a turn: which one it is (``TURN_KEY``), read
    back when the caller decides, or when an endpoint picks the task up again."""
    return {TURN_KEY: {"turn": turn, "seq": seq}}


async def _working(updater: TaskUpdater, turn: int, seq: int | None) -> None:
    said = updater.new_agent_message([new_text_part("working")], metadata=_turn(turn, seq))
    await updater.start_work(said)


def _decision_in(context: RequestContext) -> ApprovalDecision | None:
    """The signed decision a message carries (a data part ``DECISION_KEY``), if any."""
    message = context.message
    for value in get_data_parts(message.parts) if message is not None else []:
        if isinstance(value, dict) and DECISION_KEY in value:
            try:
                return ApprovalDecision.model_validate(cast(Any, value)[DECISION_KEY])
            except ValidationError as error:
                raise Refused(422, f"the decision is malformed: {error}") from error
    return None


def _waiting(state: LoopState) -> str:
    """What waits for a person in ``state`` ("" for nothing)."""
    calls = [f"{p.tool} ({p.call_id})" for p in state.pending_approvals]
    return f"waiting for a person to decide: {', '.join(calls)}" if calls else ""

"""The A2A endpoint's executor (``orga.web.a2a``): each A2A message a turn of its context's
thread, and the task's states as the turn goes.

The first message of a context starts the thread for its caller (``a2a-<contextId>``, its
principal the caller, bound by the endpoint's issuer when it has one); a later one is sent with
its A2A message id as its update id. While the turn runs, the model's text is streamed as it
comes — each piece a ``working`` status update whose message holds it (metadata
``orga.stream``: the model call, and ``restart`` where a retried call begins again) — and the
task is ``input-required`` while a call waits for a person (the thread's state, looked at every
half second at first, every 10 s at most while nothing changes). Then ``completed``, with the
answer as the ``answer`` artifact (a typed thread's value as a data part; what the turn spent
in its metadata, ``A2A_USAGE_KEY``), or ``failed`` with the reason. A cancel cancels the
thread (Temporal's cancel reaches a running tool).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from typing import Any, Final

from a2a.helpers import new_data_part, new_task_from_user_message, new_text_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types import TaskState
from temporalio.client import Client, WorkflowQueryFailedError, WorkflowUpdateFailedError
from temporalio.common import RawValue
from temporalio.contrib.workflow_streams import WorkflowStreamClient
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError

from orga.client import ThreadHandle, start_thread
from orga.contracts.delegation import A2A_USAGE_KEY
from orga.contracts.inference import STREAM_TOPIC, StreamedText
from orga.contracts.principals import PrincipalClaim
from orga.contracts.state import LoopState
from orga.contracts.threads import ThreadConfig, TurnResult
from orga.desk.facts import DeskError
from orga.web.agui import owned
from orga.web.agui_run import AguiOptions, Refused

__all__ = ["A2A_PREFIX", "STREAM_KEY", "Threads"]

A2A_PREFIX: Final = "a2a-"
"""An A2A context's thread: the workflow id is this and the ``contextId``."""
STREAM_KEY: Final = "orga.stream"
"""The metadata key of a streamed piece's status update: ``{"call": n, "restart": bool}``."""
_CONTEXT_ID: Final = re.compile(r"[A-Za-z0-9._-]{1,120}")
_WATCH: Final = (0.5, 10.0)
"""Seconds between looks at a turn's state (does a call wait for a person?): the first, and
the most they grow to (doubling while nothing changes), so a wait of days asks rarely."""
_DRAIN_SECONDS: Final = 5.0
"""At most this long, once a turn is answered, for its last streamed pieces to be read."""
_log = logging.getLogger("orga.web.a2a")


class Threads(AgentExecutor):
    """Each A2A message, a turn of the context's thread (see the module)."""

    def __init__(self, client: Client, options: AguiOptions) -> None:
        self._client = client
        self._options = options

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        if context.current_task is None:
            assert context.message is not None, "a task begins with a message"
            await event_queue.enqueue_event(new_task_from_user_message(context.message))
        updater = TaskUpdater(event_queue, context.task_id or "", context.context_id or "")
        try:
            chat, turn, seq, offset = await self._send(context)
            await updater.start_work()
            read = _Read(offset)
            streaming = asyncio.create_task(self._stream(chat.handle.id, read, updater))
            try:
                answered = await self._answer(chat, turn, seq, updater)
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
        handle = self._client.get_workflow_handle(f"{A2A_PREFIX}{context.context_id}")
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
        call = context.call_context
        if not call.user.is_authenticated:  # the middleware lets no such request through
            raise Refused(401, "no caller: send Authorization: Bearer <your token>")
        user = call.user.user_name
        context_id = context.context_id or ""
        if not _CONTEXT_ID.fullmatch(context_id):
            raise Refused(400, "a contextId is letters, digits and ._- (at most 120)")
        text = context.get_user_input()
        if not text.strip():
            raise Refused(422, "the message holds no text")
        workflow_id = f"{A2A_PREFIX}{context_id}"
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

    async def _stream(self, workflow_id: str, read: _Read, updater: TaskUpdater) -> None:
        """The model's text from the thread's stream, from ``read.next``: each piece a working
        status update (until cancelled, once the turn's last pieces were read)."""
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
                        [new_text_part(piece.text)], metadata={STREAM_KEY: said}
                    )
                    await updater.update_status(TaskState.TASK_STATE_WORKING, message)
                read.reached(item.offset + 1)
        except (RPCError, ValueError, TypeError) as error:  # the answer still comes
            _log.warning("streaming %s: %s", workflow_id, error)
        read.reached(1 << 62)  # nothing more will be read

    async def _answer(
        self, chat: ThreadHandle, turn: int, seq: int | None, updater: TaskUpdater
    ) -> TurnResult:
        """The turn's answer; meanwhile the task is input-required while a call waits."""
        answer = asyncio.ensure_future(chat.turn(turn, message=seq))
        asking = False
        pause, most = _WATCH
        try:
            while not answer.done():
                await asyncio.wait({answer}, timeout=pause)
                if answer.done():
                    break
                try:
                    waits = _waiting(await chat.state())
                except (RPCError, WorkflowQueryFailedError):  # a worker lost meanwhile: later
                    continue
                if waits and not asking:
                    await updater.requires_input(updater.new_agent_message([new_text_part(waits)]))
                elif not waits and asking:
                    await updater.start_work()
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


def _waiting(state: LoopState) -> str:
    """What waits for a person in ``state`` ("" for nothing)."""
    calls = [f"{p.tool} ({p.call_id})" for p in state.pending_approvals]
    return f"waiting for a person to decide: {', '.join(calls)}" if calls else ""

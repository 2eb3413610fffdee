"""One AG-UI request (``orga.web.agui``): a thread's turn started, continued, resumed or
reconnected to, and its events sent until the run ends.

Every event comes from the thread's own Workflow Stream (``agui_events``): what it keeps now
(the stream's poll query), then what comes (its long poll). Nothing is held in the endpoint's
process, so a client that reconnects may reach any endpoint, at any time.
"""

from __future__ import annotations

import base64
import contextlib
import logging
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Final, cast

from ag_ui.core import (
    BaseEvent,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
    UserMessage,
)
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from temporalio.api.common.v1 import Payload
from temporalio.client import Client, WorkflowQueryFailedError, WorkflowUpdateFailedError
from temporalio.common import RawValue
from temporalio.contrib.workflow_streams import PollInput, PollResult, WorkflowStreamClient
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError

from orga.client import start_thread
from orga.contracts.approvals import ApprovalDecision
from orga.contracts.config import LoopConfig
from orga.contracts.conversation import USER_MESSAGE_LIMIT
from orga.contracts.inference import STREAM_TOPIC, StreamedText
from orga.contracts.principals import PrincipalClaim
from orga.contracts.progress import PROGRESS_TOPIC, ProgressItem
from orga.contracts.state import LoopState
from orga.contracts.threads import ThreadConfig
from orga.desk.approvals import approval_decision
from orga.desk.facts import DeskError
from orga.desk.sender import send_decision, send_user_message
from orga.runtime.binding import Issuer
from orga.web.agui_events import (
    APPROVAL_SCHEMA,
    REASON_LIMIT,
    EventId,
    Marked,
    ThreadEvents,
    Window,
)

__all__ = [
    "APPROVAL_SCHEMA",
    "QUERY_TIMEOUT",
    "THREAD_PREFIX",
    "AguiLimits",
    "AguiOptions",
    "AguiRun",
    "Refused",
]

_log = logging.getLogger(__name__)

THREAD_PREFIX: Final = "agui-"
"""An AG-UI thread's workflow id is this and its ``threadId``."""
_POLL_QUERY: Final = "__temporal_workflow_stream_poll"
"""The Workflow Stream's query of what it keeps (``temporalio.contrib.workflow_streams``)."""
QUERY_TIMEOUT: Final = timedelta(seconds=30)
"""How long a request waits for a worker to answer a thread's query: a worker that died
holding the thread in its cache keeps its queries for ``ORGA_STICKY_TIMEOUT`` (10 s) before
another worker may answer them."""


@dataclass(frozen=True)
class AguiLimits:
    """What one request may take: past each bound it is refused, with a reason the client
    reads (``docs/guides/web-apps.md``, Limits). A message longer than ``USER_MESSAGE_LIMIT``
    (the thread's own bound) ends its run ``RUN_ERROR`` before anything is sent."""

    body_bytes: int = 2 * 1024 * 1024
    """Bytes a request's body may hold (default 2 MiB): a message at its limit (100 000
    characters, a few bytes each in JSON) and the copy of the conversation a client sends along.
    A declared length over it is refused unread; else reading stops at the chunk past it: 413."""
    json_depth: int = 64
    """Levels of arrays and objects a body's JSON may nest (default 64), checked before it is
    parsed: 400. (Past about 250, pydantic's parser refuses on its own: 422.)"""
    streams_per_caller: int = 8
    """Requests one caller may have open at once at this endpoint's process (default 8, more
    than the 6 connections a browser opens to one host): each stream counts until its run
    ends or the client leaves. One more: 429."""
    request_timeout: float = 10.0
    """Seconds a client has to send a request (default 10): under ``uvicorn_limits``, its
    headers and body from its first byte (a connection that sends nothing counts from its
    start); in any server, its body from its headers. Then 408 and the connection closed."""
    header_bytes: int = 16 * 1024
    """Bytes a request's headers may hold (default 16 KiB, h11's own default). Beyond: 400
    from uvicorn while they arrive (h11's bound on an incomplete head, under
    ``uvicorn_limits``), or 431 from the app for a head that arrived whole."""


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
    limits: AguiLimits = field(default_factory=AguiLimits)
    """What one request may take (sizes, time, streams per caller)."""
    a2a_deciders: frozenset[str] = frozenset()
    """Callers of the A2A endpoint who may decide their own tasks' ``input-required``, each
    with a decision signed as an enrolled approver (``orga.web.a2a_threads``); others wait
    for orga's people."""


class Refused(Exception):
    """A request the endpoint refuses: its HTTP status and why."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class _Dropped(Exception):
    """Events the request needs are no longer kept by the thread."""


@dataclass
class AguiRun:
    """One request: what it does to the thread, then the events it sends."""

    client: Client
    options: AguiOptions
    given: RunAgentInput
    user: str
    workflow_id: str
    found: LoopState | None
    """The thread's state when the request came (None: it does not exist yet)."""
    after: EventId | None = None
    """A reconnect: the last event id the client has (else a run it begins)."""
    connect: bool = False
    """A reconnect without an id: the thread's last run, from its start."""

    async def events(self) -> AsyncIterator[Marked | BaseEvent]:
        """The request's events: each with its id (``Marked``), but for a failure's own."""
        sent = False
        try:
            window = await self._begin()
            async for marked in self._follow(window):
                sent = True
                yield marked
            if not sent:  # nothing was and nothing will be: an empty run
                yield self._started()
                yield RunFinishedEvent(thread_id=self.given.thread_id, run_id=self.given.run_id)
            return
        except WorkflowAlreadyStartedError:  # another request started it meanwhile
            failure = RunErrorEvent(
                message="the thread was started meanwhile: send the message again",
                code="ThreadStartedMeanwhile",
            )
        except _Dropped as dropped:
            failure = RunErrorEvent(message=str(dropped), code="EventsDropped")
        except (Refused, DeskError, WorkflowUpdateFailedError, WorkflowQueryFailedError) as error:
            message = (
                str(error.cause) if isinstance(error, WorkflowUpdateFailedError) else str(error)
            )
            failure = RunErrorEvent(message=message, code=type(error).__name__)
        except RPCError as error:
            failure = RunErrorEvent(message=f"Temporal: {error.message}", code="RPCError")
        except Exception as error:  # a fault of ours: the client still hears its run ended
            _log.exception("the AG-UI run of %s failed", self.workflow_id)
            failure = RunErrorEvent(
                message=f"the endpoint failed ({type(error).__name__}): try again",
                code="EndpointError",
            )
        if not sent:
            yield self._started()
        yield failure

    def _started(self) -> RunStartedEvent:
        return RunStartedEvent(thread_id=self.given.thread_id, run_id=self.given.run_id)

    # ---- what the request does ---------------------------------------------------------------

    async def _begin(self) -> Window:
        """Start the thread, send its next message or decide its approvals (or, a reconnect:
        nothing); which of the thread's events this request sends."""
        state = self.found
        if self.after is not None or self.connect:
            if state is None:
                raise Refused(404, "no such thread")
            return Window(after=self.after)
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
            return Window(start=0)
        offset = await WorkflowStreamClient.create(self.client, self.workflow_id).get_offset()
        if self.given.resume:
            await self._decide(state)
            return Window(start=offset)
        if state.pending_approvals:
            raise Refused(409, "the thread waits for its interrupts: answer them (resume)")
        thread = state.thread
        if thread is None or not thread.waiting_for_message:
            raise Refused(
                409,
                "the thread is still answering its last message: wait for its RUN_FINISHED "
                "(or reconnect to follow it)",
            )
        handle = self.client.get_workflow_handle(self.workflow_id)
        await send_user_message(handle, self._text(), sender=self.user)
        return Window(start=offset)

    def _text(self) -> str:
        """The message the run sends: the first and every later one held to the same bound."""
        said = [m for m in self.given.messages if isinstance(m, UserMessage)]
        if not said or not isinstance(said[-1].content, str) or not said[-1].content.strip():
            raise Refused(422, "the run has no user message to send (messages[-1])")
        text = said[-1].content
        if len(text) > USER_MESSAGE_LIMIT:
            raise Refused(
                413,
                f"the message holds {len(text)} characters, more than the {USER_MESSAGE_LIMIT} "
                "a message may: nothing was sent (send it shorter, or in parts)",
            )
        return text

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
            if reason is not None and len(reason) > REASON_LIMIT:
                raise Refused(
                    413, f"reason holds more than {REASON_LIMIT} characters: nothing was decided"
                )
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

    # ---- the events ----------------------------------------------------------------------------

    async def _follow(self, window: Window) -> AsyncIterator[Marked]:
        """The thread's events the window takes: from what the stream keeps, then live."""
        machine = ThreadEvents(self.given.thread_id, self.given.run_id)
        kept, next_offset = await self._kept(machine)
        if window.after is None and window.start is None:  # the last run, from its start
            starts = [m.id for m in kept if m.event.type == "RUN_STARTED"]
            if not starts:
                return
            offset, k = starts[-1]
            window.after = (offset, k - 1) if k > 0 else (offset - 1, 1 << 30)
        if window.after is not None and kept and window.after[0] + 1 < kept[0].id[0]:
            raise _Dropped(
                f"the thread no longer keeps the events after {window.after[0]}.{window.after[1]}"
                " (it keeps its current and previous turns): start a new run"
            )
        for marked in kept:
            for out in window.take(marked):
                yield out
            if window.done:
                return
        if window.after is not None and not window.sending and _settled(machine):
            for out in window.nothing_new():
                yield out
            return
        if machine.ended is not None and not machine.in_run:
            raise DeskError(f"the thread has ended: {machine.ended}")
        reader = WorkflowStreamClient.create(self.client, self.workflow_id)
        last = next_offset - 1
        async for item in reader.subscribe(None, next_offset, result_type=RawValue):
            if item.offset <= last:  # a poll that began again from the start of what is kept
                continue
            if item.offset != last + 1:
                raise _Dropped(
                    f"the thread dropped events {last + 1} to {item.offset - 1} before they "
                    "were read: reconnect to go on"
                )
            last = item.offset
            for marked in self._events(machine, item.offset, item.topic, item.data.payload):
                for out in window.take(marked):
                    yield out
            if window.done:
                return
        if not window.done:  # the workflow closed without ending the run
            raise DeskError(f"the thread has ended: {machine.ended or 'it closed'}")

    async def _kept(self, machine: ThreadEvents) -> tuple[list[Marked], int]:
        """The events of what the stream keeps now, and the offset after it."""
        handle = self.client.get_workflow_handle(self.workflow_id)
        found: list[Marked] = []
        offset = 0
        while True:
            result = await handle.query(
                _POLL_QUERY,
                PollInput(topics=[], from_offset=offset),
                result_type=PollResult,
                rpc_timeout=QUERY_TIMEOUT,
            )
            for wire in result.items:
                payload = Payload.FromString(base64.b64decode(wire.data))
                found += self._events(machine, wire.offset, wire.topic, payload)
            offset = result.next_offset
            if not result.more_ready:
                return found, offset

    def _events(
        self, machine: ThreadEvents, offset: int, topic: str, payload: Payload
    ) -> list[Marked]:
        converter = self.client.data_converter.payload_converter
        with contextlib.suppress(ValueError, TypeError):
            if topic == STREAM_TOPIC:
                return machine.text(offset, converter.from_payload(payload, StreamedText))
            if topic == PROGRESS_TOPIC:
                return machine.progress(offset, converter.from_payload(payload, ProgressItem))
        return []  # a topic (or an item) orga does not publish: not the app's


def _settled(machine: ThreadEvents) -> bool:
    """Whether nothing is under way: no run open, and the last step ended one (an answer,
    a wait for people, the loop's end)."""
    last = machine.last
    return not machine.in_run and (last is None or last.kind in ("waiting", "answered", "ended"))

"""A thread's AG-UI events, derived from its Workflow Stream, each with an id that never changes.

``ThreadEvents`` turns the stream's items — the model's text (``StreamedText``) and the loop's
steps (``ProgressItem``) — into AG-UI events, in order. Each event's id is ``"<offset>.<k>"``:
the offset of the item it comes from and its place among that item's events. The same items
give the same events with the same ids to any endpoint at any time, so a client that
reconnects with its last event id gets every later event once (``Window``), from this process
or another, across restarts and continue-as-new (the stream keeps its offsets).

A run (``RUN_STARTED`` … ``RUN_FINISHED``) is a turn: it begins where the thread's turn began
(``turn``) or where it went on after its approvals were decided (``resumed``), and ends with the
turn's answer (``answered``: the result ``{"output", "value", "turn"}``), with the calls that
wait for a person (``waiting``: the interrupt outcome), or with the loop's end (``ended``:
``RUN_ERROR``). Results of calls that ran while the turn waited come with the next run.

A model call asked again (its worker was lost mid-answer) streams its answer from the start:
the text the lost attempt streamed ends, and a ``CUSTOM`` event ``orga.message_withdrawn``
(``{"messageId", "reason"}``) says it is not part of the thread, so a page removes it rather
than show the partial answer beside the whole one.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Final, cast

from ag_ui.core import (
    BaseEvent,
    CustomEvent,
    EventType,
    Interrupt,
    RunErrorEvent,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunStartedEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)

from orga.contracts.inference import StreamedText
from orga.contracts.progress import CallResult, ProgressItem, ProgressView
from orga.core.judging import opinion_text

__all__ = [
    "APPROVAL_SCHEMA",
    "REASON_LIMIT",
    "EventId",
    "Marked",
    "ThreadEvents",
    "Window",
    "event_id",
    "parse_id",
]

EventId = tuple[int, int]
"""Where an event comes from: the stream item's offset, and its place among its events."""

REASON_LIMIT: Final = 2_000
WITHDRAWN: Final = "orga.message_withdrawn"
"""The ``CUSTOM`` event that takes back the text a lost model call streamed."""
"""Characters the reason of an approval's answer may hold."""

APPROVAL_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "approved": {"type": "boolean"},
        "reason": {"type": "string", "maxLength": REASON_LIMIT},
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


def event_id(at: EventId) -> str:
    return f"{at[0]}.{at[1]}"


_ID: Final = re.compile(r"([0-9]{1,18})\.([0-9]{1,9})")
"""An event id: ASCII digits only (``str.isdigit`` also takes ``"²"``, which ``int`` does not)."""


def parse_id(text: str) -> EventId | None:
    """The id an event carried (``"<offset>.<k>"``); None if it is not one."""
    found = _ID.fullmatch(text.strip())
    return (int(found[1]), int(found[2])) if found else None


@dataclass(frozen=True)
class Marked:
    """An event as the endpoint sends it: its id, and whether it is sent again (``again``: it
    re-opens, for a client that reconnects, the run, message or call it was in)."""

    id: EventId
    event: BaseEvent
    again: bool = False

    def stamped(self) -> BaseEvent:
        """The event with its id in its ``metadata`` (``{"orga": {"id", "again"}}``): clients
        pass metadata through, and the SSE ``id:`` field only reaches ``EventSource``."""
        orga: dict[str, Any] = {"id": event_id(self.id)}
        if self.again:
            orga["again"] = True
        return self.event.model_copy(update={"metadata": {"orga": orga}})


@dataclass
class ThreadEvents:
    """The state machine from stream items to events (see the module docstring)."""

    thread_id: str
    run_id: str
    """The ``runId`` the events carry: the request's (a client names its runs)."""
    in_run: bool = False
    ended: str | None = None
    """How the loop ended, once its ``ended`` item came."""
    last: ProgressItem | None = None
    """The last step seen."""
    _message: str | None = None
    _streamed: bool = False
    _state: dict[str, Any] | None = None
    _held: list[CallResult] = field(default_factory=list[CallResult])

    def text(self, offset: int, piece: StreamedText) -> list[Marked]:
        out = _Out(offset)
        if not self.in_run:
            return []
        if piece.restart and self._message is not None:
            withdrawn = self._message
            self._close(out)
            why = "the model call was asked again (its worker was lost): it answers anew"
            out.add(CustomEvent(name=WITHDRAWN, value={"messageId": withdrawn, "reason": why}))
        elif piece.done or piece.restart:
            self._close(out)
        elif piece.text:
            if self._message is None:
                self._message = f"{self.thread_id}-{offset}"
                out.add(TextMessageStartEvent(message_id=self._message, role="assistant"))
            self._streamed = True
            out.add(TextMessageContentEvent(message_id=self._message, delta=piece.text))
        return out.events

    def progress(self, offset: int, item: ProgressItem) -> list[Marked]:
        out = _Out(offset)
        self.last = item
        kind = item.kind
        if kind in ("turn", "resumed"):
            if self.in_run:  # a run that never said it ended: it did, here
                self._close(out)
                out.add(RunFinishedEvent(thread_id=self.thread_id, run_id=self.run_id))
            self.in_run, self._streamed, self._state = True, False, None
            out.add(RunStartedEvent(thread_id=self.thread_id, run_id=self.run_id))
            self._view(out, item.view)  # the state first, then what happened
            held, self._held = self._held, []
            self._results(out, held)
        elif kind == "results":
            if self.in_run:
                self._results(out, item.results)
            else:  # calls that ran while the turn waited: with the next run
                self._held += item.results
        elif kind == "ended":
            self.ended = item.message or "the loop ended"
        if not self.in_run:
            return out.events
        if kind == "calls":
            for call in item.calls:
                out.add(ToolCallStartEvent(tool_call_id=call.call_id, tool_call_name=call.tool))
                out.add(ToolCallArgsEvent(tool_call_id=call.call_id, delta=call.arguments))
                out.add(ToolCallEndEvent(tool_call_id=call.call_id))
        elif kind in ("waiting", "answered", "ended"):
            self._close(out)
        if kind == "answered" and not self._streamed and item.answer is not None:
            message = f"{self.thread_id}-{offset}"  # nothing streamed: the answer in one piece
            out.add(TextMessageStartEvent(message_id=message, role="assistant"))
            out.add(TextMessageContentEvent(message_id=message, delta=item.answer.said or " "))
            out.add(TextMessageEndEvent(message_id=message))
        self._view(out, item.view)
        if kind == "waiting":
            self.in_run = False
            out.add(
                RunFinishedEvent(
                    thread_id=self.thread_id,
                    run_id=self.run_id,
                    outcome=RunFinishedInterruptOutcome(interrupts=_interrupts(item.view)),
                )
            )
        elif kind == "answered" and item.answer is not None:
            self.in_run = False
            answer = item.answer
            result = {"output": answer.said, "value": answer.value, "turn": answer.turn}
            out.add(RunFinishedEvent(thread_id=self.thread_id, run_id=self.run_id, result=result))
        elif kind == "ended":
            self.in_run = False
            out.add(RunErrorEvent(message=self.ended or "the loop ended", code="LoopEnded"))
        return out.events

    def _results(self, out: _Out, results: list[CallResult]) -> None:
        for result in results:
            out.add(
                ToolCallResultEvent(
                    message_id=f"{result.call_id}-result",
                    tool_call_id=result.call_id,
                    content=result.content,
                    role="tool",
                )
            )

    def _close(self, out: _Out) -> None:
        if self._message is not None:
            out.add(TextMessageEndEvent(message_id=self._message))
            self._message = None

    def _view(self, out: _Out, view: ProgressView) -> None:
        shown = _shown(view)
        if self._state is None:
            out.add(StateSnapshotEvent(snapshot=shown))
        elif shown != self._state:
            out.add(StateDeltaEvent(delta=cast(Any, _patch(self._state, shown))))  # validated
        self._state = shown


@dataclass
class _Out:
    offset: int
    events: list[Marked] = field(default_factory=list[Marked])

    def add(self, event: BaseEvent) -> None:
        self.events.append(Marked((self.offset, len(self.events)), event))


def _shown(view: ProgressView) -> dict[str, Any]:
    """The thread's state as the app sees it (``STATE_SNAPSHOT``, ``STATE_DELTA``)."""
    return view.model_dump(mode="json")


def _patch(before: dict[str, Any], after: dict[str, Any]) -> list[dict[str, Any]]:
    """A JSON Patch (RFC 6902) from ``before`` to ``after``, key by key at the top."""
    ops: list[dict[str, Any]] = [
        {"op": "replace" if key in before else "add", "path": f"/{key}", "value": value}
        for key, value in after.items()
        if before.get(key, _MISSING) != value
    ]
    ops += [{"op": "remove", "path": f"/{key}"} for key in before if key not in after]
    return ops


_MISSING: Final = object()


def _interrupts(view: ProgressView) -> list[Interrupt]:
    return [
        Interrupt(
            id=p.call_id,
            reason="tool_approval",
            message=f"{p.tool}: {p.reason}" + (f"; {opinion_text(p.judge)}" if p.judge else ""),
            tool_call_id=p.call_id,
            response_schema=APPROVAL_SCHEMA,
            metadata={
                "orga": {"tool": p.tool, "arguments": _json(p.arguments)}
                | ({"judge": p.judge.model_dump(mode="json")} if p.judge else {})
            },
        )
        for p in view.pending_approvals
    ]


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


_OPENS: Final = {
    EventType.TEXT_MESSAGE_START: EventType.TEXT_MESSAGE_END,
    EventType.TOOL_CALL_START: EventType.TOOL_CALL_END,
}


@dataclass
class Window:
    """Which of a thread's events a request sends, and when it is done.

    ``after`` an event id (a client that reconnects): every event after it, once, preceded by
    what re-opens the run, message or tool call it was in (``again``); else ``start`` (a run a
    request began): from the first ``RUN_STARTED`` at or after that offset. Either way it ends
    with the run's end.
    """

    after: EventId | None = None
    start: int | None = None
    done: bool = False
    sending: bool = False
    _run: list[Marked] = field(default_factory=list[Marked])
    """The open run's events up to now that re-open it: its start, state, open messages."""
    _last_run: list[Marked] = field(default_factory=list[Marked])
    """The start and end of the last run that ended (a reconnect after it, with nothing new,
    gets them again)."""

    def take(self, marked: Marked) -> list[Marked]:
        if self.done:
            return []
        event = marked.event
        out: list[Marked] = []
        if not self.sending:
            if self.after is not None and marked.id > self.after:
                self.sending = True
                if event.type != EventType.RUN_STARTED:
                    out += [Marked(m.id, m.event, again=True) for m in self._run]
            elif self.start is not None and event.type == EventType.RUN_STARTED:
                self.sending = marked.id[0] >= self.start
        self._track(marked)
        if self.sending:
            out.append(marked)
            self.done = event.type in (EventType.RUN_FINISHED, EventType.RUN_ERROR)
        return out

    def nothing_new(self) -> list[Marked]:
        """A reconnect after a run's end, with nothing since and nothing under way: that
        run's start and end again (what the client has, so it knows where it is)."""
        self.done = True
        return [Marked(m.id, m.event, again=True) for m in self._last_run]

    def _track(self, marked: Marked) -> None:
        kind = marked.event.type
        if kind == EventType.RUN_STARTED:
            self._run = [marked]
        elif kind in (EventType.RUN_FINISHED, EventType.RUN_ERROR):
            self._last_run = [self._run[0], marked] if self._run else [marked]
            self._run = []
        elif kind in (EventType.STATE_SNAPSHOT, EventType.STATE_DELTA):
            if kind == EventType.STATE_SNAPSHOT:
                self._run = [m for m in self._run if m.event.type == EventType.RUN_STARTED]
            self._run.append(marked)
        elif kind in _OPENS:
            self._run.append(marked)
        elif kind in _OPENS.values():
            key = _opened(marked.event)
            self._run = [
                m for m in self._run if _opened(m.event) != key or m.event.type not in _OPENS
            ]


def _opened(event: BaseEvent) -> str | None:
    """The message or tool call an event opens or closes."""
    found = getattr(event, "message_id", None) or getattr(event, "tool_call_id", None)
    return found if isinstance(found, str) else None

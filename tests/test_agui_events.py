"""The AG-UI events a thread's stream gives (``orga.web.agui_events``), without a server: the
same items always give the same events with the same ids, and a reconnect after any of them
gets the rest once, with what re-opens where it was."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from ag_ui.core import CustomEvent, TextMessageContentEvent, TextMessageEndEvent

from orga.contracts.inference import StreamedText, Usage
from orga.contracts.progress import (
    CallResult,
    ProgressItem,
    ProgressKind,
    ProgressView,
    ProposedCall,
    WaitingCall,
)
from orga.contracts.threads import TurnResult
from orga.web.agui_events import Marked, ThreadEvents, Window, parse_id

Item = StreamedText | ProgressItem


def _view(**more: Any) -> ProgressView:
    return ProgressView.model_validate(
        {"status": "running", "phase": "reasoning", "turn": 1, **more}
    )


def _step(kind: ProgressKind, **more: Any) -> ProgressItem:
    view = more.pop("view", _view())
    return ProgressItem(kind=kind, view=view, **more)


def _answer(text: str, turn: int = 1) -> TurnResult:
    return TurnResult(
        turn=turn,
        output=text,
        reason="end_turn",
        iterations=1,
        usage=Usage(),
        thread_usage=Usage(),
        ended_at=datetime(2026, 1, 1, tzinfo=UTC),
    )


def _piece(text: str = "", **more: Any) -> StreamedText:
    return StreamedText(iteration=1, text=text, **more)


def _events(items: list[Item]) -> list[Marked]:
    machine = ThreadEvents("t", "r")
    found: list[Marked] = []
    for offset, item in enumerate(items):
        if isinstance(item, StreamedText):
            found += machine.text(offset, item)
        else:
            found += machine.progress(offset, item)
    return found


def _through(window: Window, events: list[Marked]) -> list[Marked]:
    sent: list[Marked] = []
    for marked in events:
        sent += window.take(marked)
    return sent


def _types(events: list[Marked]) -> list[str]:
    return [m.event.type for m in events]


WAITING = [
    WaitingCall(call_id="c1", tool="refund", arguments='{"amount": 5}', reason="needs a person"),
    WaitingCall(call_id="c2", tool="refund", arguments='{"amount": 6}', reason="needs a person"),
]
STORY: list[Item] = [
    _step("turn", turn=1),
    _piece("Let me "),
    _piece("look."),
    _piece(done=True),
    _step(
        "calls",
        calls=[
            ProposedCall(call_id="c1", tool="refund", arguments='{"amount": 5}'),
            ProposedCall(call_id="c2", tool="refund", arguments='{"amount": 6}'),
            ProposedCall(call_id="c3", tool="lookup", arguments="{}"),
        ],
    ),
    _step("waiting", view=_view(status="awaiting_approval", pending_approvals=WAITING)),
    _step(
        "results",
        results=[
            CallResult(call_id="c3", tool="lookup", status="ok", is_error=False, content="found")
        ],
    ),
    _step("resumed"),
    _step(
        "results",
        results=[
            CallResult(
                call_id="c1", tool="refund", status="ok", is_error=False, content="refunded 5"
            )
        ],
    ),
    _piece("Done."),
    _piece(done=True),
    _step("answered", answer=_answer("Done.")),
]


def test_a_turn_with_approvals_is_two_runs_and_what_ran_meanwhile_comes_with_the_second() -> None:
    events = _events(STORY)
    assert _types(events) == [
        "RUN_STARTED", "STATE_SNAPSHOT",
        "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END",
        *["TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END"] * 3,
        "STATE_DELTA", "RUN_FINISHED",  # both waiting calls in one interrupt
        "RUN_STARTED", "STATE_SNAPSHOT", "TOOL_CALL_RESULT",  # c3 ran while the turn waited
        "TOOL_CALL_RESULT",
        "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END",
        "RUN_FINISHED",
    ]  # fmt: skip
    ids = [m.id for m in events]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    interrupted = events[16].event
    assert [i.id for i in interrupted.outcome.interrupts] == ["c1", "c2"]  # type: ignore[attr-defined]
    assert events[-1].event.result == {"output": "Done.", "value": None, "turn": 1}  # type: ignore[attr-defined]
    assert _events(STORY) == events  # the same items, the same events, the same ids


def test_a_reconnect_mid_message_gets_the_rest_once_and_what_reopens_it() -> None:
    events = _events(STORY)
    cut = events[3].id  # after the first piece of text
    sent = _through(Window(after=cut), events)
    again = [m for m in sent if m.again]
    assert _types(again) == ["RUN_STARTED", "STATE_SNAPSHOT", "TEXT_MESSAGE_START"]
    assert all(m.id <= cut for m in again)
    assert [m.id for m in sent if not m.again] == [m.id for m in events[4:17]]  # to the interrupt
    for cut_at in range(len(events) - 1):  # after any event, the rest of its run, once
        rest = [m for m in _through(Window(after=events[cut_at].id), events) if not m.again]
        assert rest and rest[0].id == events[cut_at + 1].id


def test_a_reconnect_after_a_runs_end_with_nothing_new_gets_that_end_again() -> None:
    events = _events(STORY[:6])  # the turn waits for its approvals
    window = Window(after=events[-1].id)
    assert _through(window, events) == []
    again = window.nothing_new()
    assert _types(again) == ["RUN_STARTED", "RUN_FINISHED"] and all(m.again for m in again)
    assert again[1].event.outcome.type == "interrupt"  # type: ignore[attr-defined]


def test_a_run_a_request_began_starts_at_its_own_turn() -> None:
    items: list[Item] = [
        _step("turn", turn=1),
        _step("answered", answer=_answer("one")),
        _step("turn", turn=2, view=_view(turn=2)),
        _step("answered", answer=_answer("two", 2), view=_view(turn=2)),
    ]
    sent = _through(Window(start=2), _events(items))
    assert _types(sent)[0] == "RUN_STARTED" and sent[0].id == (2, 0)
    assert _types(sent)[-4:] == [  # nothing streamed: the answer in one piece
        "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END", "RUN_FINISHED"
    ]  # fmt: skip
    assert sent[-3].event.delta == "two"  # type: ignore[attr-defined]


def test_a_loop_that_ends_mid_run_ends_the_run_with_an_error() -> None:
    items: list[Item] = [
        _step("turn", turn=1),
        _piece("Hm"),
        _step(
            "ended", message="BudgetExceeded: the thread's max_cost", view=_view(status="failed")
        ),
    ]
    events = _events(items)
    assert _types(events)[-3:] == ["TEXT_MESSAGE_END", "STATE_DELTA", "RUN_ERROR"]
    assert "max_cost" in events[-1].event.message  # type: ignore[attr-defined]


def test_an_event_id_is_two_numbers_or_nothing() -> None:
    assert parse_id("12.3") == (12, 3)
    for bad in ("", "12", "a.b", "-1.0", "1.0.0", "1" * 50 + ".0", "1e3.0"):
        assert parse_id(bad) is None, bad


def test_a_model_call_asked_again_takes_back_what_its_lost_attempt_streamed() -> None:
    """A worker lost mid-answer: the call is asked again and streams from the start (a
    ``restart`` piece). The partial text ends and a ``CUSTOM`` ``orga.message_withdrawn``
    names it, so a page shows only the whole answer (the example page showed both); a
    restart before any text takes back nothing."""
    events = _events(
        [
            _step("turn", turn=1),
            _piece("Once upon"),
            _piece(restart=True),
            _piece(restart=True),  # lost again, before it said anything
            _piece("Once upon a time."),
            _piece(done=True),
            _step("answered", answer=_answer("Once upon a time.")),
        ]
    )
    custom = [m.event for m in events if isinstance(m.event, CustomEvent)]
    texts = [m.event for m in events if isinstance(m.event, TextMessageContentEvent)]
    ends = [m.event.message_id for m in events if isinstance(m.event, TextMessageEndEvent)]
    lost, whole = texts[0].message_id, texts[1].message_id
    assert lost != whole and ends == [lost, whole]
    assert [(e.name, e.value["messageId"]) for e in custom] == [("orga.message_withdrawn", lost)]

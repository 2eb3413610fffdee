"""What a pause names, read both ways: ``Pause.target_in`` reads back exactly what
``Pause.describe`` wrote (so the two cannot drift), refuses any other text — a loop's state is
the workflow's data, not orga's word — and the inbox offers the command that ends the pause
that holds each call, or only ``orga pause`` (the list) when its reason names none."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import event

from orga.contracts.inference import Usage
from orga.contracts.messages import LOOP_WORKFLOW
from orga.contracts.state import LoopState
from orga.desk.inbox import _items_of  # pyright: ignore[reportPrivateUsage] -- the rule itself
from orga.runtime.pauses import PAUSE_KINDS, PAUSE_NAME, Pause, PauseBook, split_target
from orga.runtime.store import Store

SINCE = datetime(2025, 5, 1, 9, 14, 2, tzinfo=UTC)

names = st.from_regex(PAUSE_NAME, fullmatch=True)


@given(
    kind=st.sampled_from(PAUSE_KINDS),
    name=names,
    by=st.text(min_size=1, max_size=40),
    reason=st.text(max_size=200),
    since=st.datetimes(timezones=st.just(UTC)),
)
def test_target_in_reads_back_what_describe_wrote(
    kind: str, name: str, by: str, reason: str, since: datetime
) -> None:
    target = f"{kind}:{name}"
    described = Pause(target, by, reason, since).describe()
    assert Pause.target_in(described) == target
    assert split_target(target) == (kind, name)
    # Since when, to the second (``orga pending --json`` gave a paused item's ``since`` null).
    assert Pause.since_in(described) == since.replace(microsecond=0)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "tool paused",
        "boom: tool 'refund' is paused by olu since 2025-05-01T09:14:02+00:00: x",  # not first
        "widget 'refund' is paused by olu since 2025-05-01T09:14:02+00:00: x",  # no such kind
        "tool 'a b' is paused by olu since 2025-05-01T09:14:02+00:00: x",  # not a plain name
        "tool '-rf' is paused by olu since 2025-05-01T09:14:02+00:00: x",  # would be an option
        "tool '' is paused by olu since 2025-05-01T09:14:02+00:00: x",
        "tool 'refund' is paused by olu",  # cut short
        Pause("tool:it's", "olu", "x", SINCE).describe(),  # quoted "…": not a name a pause has
        Pause("tool:refund\n", "olu", "x", SINCE).describe(),
    ],
)
def test_any_other_text_names_no_pause(text: str) -> None:
    assert Pause.target_in(text) is None


@pytest.mark.parametrize(
    "target",
    ["tool", "tool:", "widget:x", "tool:refund\n", "tool:a b", "loop:'; rm -rf /", ":x"],
)
def test_a_target_is_a_kind_and_a_plain_name(target: str) -> None:
    assert split_target(target) is None


def held(*reasons: str) -> LoopState:
    return LoopState(
        workflow_id="loop-1",
        agent_id="default",
        status="paused",
        phase="dispatching",
        iteration=1,
        usage=Usage(),
        started_at=SINCE,
        paused_calls={f"call_{i}": why for i, why in enumerate(reasons)},
    )


@pytest.mark.parametrize(
    ("target", "tool", "command"),
    [
        ("tool:issue_refund", "issue_refund", "orga resume --tool issue_refund"),
        ("agent:payments", None, "orga resume --agent payments"),
        ("loop:loop-3f2a9c1b7d4e", None, "orga resume loop-3f2a9c1b7d4e"),
        ("loop:nightly@acme/2025", None, "orga resume nightly@acme/2025"),
    ],
)
def test_a_paused_item_offers_the_command_that_ends_its_pause(
    target: str, tool: str | None, command: str
) -> None:
    why = Pause(target, "olu", "refunds double-paid <b>", SINCE).describe()
    [item] = _items_of("loop-1", LOOP_WORKFLOW, held(why))
    assert (item.kind, item.item_id, item.reason) == ("paused", "call_0", why)
    assert (item.pause, item.tool, item.commands) == (target, tool, [command])


def test_a_reason_that_names_no_pause_offers_only_the_list() -> None:
    [item] = _items_of("loop-1", LOOP_WORKFLOW, held("tool 'x; rm -rf ~' is paused"))
    assert (item.pause, item.tool, item.commands) == (None, None, ["orga pause"])


def test_a_worker_reads_every_pause_at_once_and_keeps_nothing_per_loop(tmp_path: Path) -> None:
    """Each new loop asks for its own ``loop:ID``: one query a second answers them all (it was
    one query per loop, and a cache entry per loop kept for the worker's life). A pause this
    book makes or ends is seen at once."""
    store = Store(f"sqlite:///{tmp_path / 'store.db'}")
    book = PauseBook(store)
    book.pause("tool:refund", "olu", "double-paid")
    queries: list[str] = []
    event.listen(store.engine, "before_cursor_execute", lambda *a: queries.append(a[2]))
    for loop in range(50):
        assert book.held(f"loop:l{loop}", "agent:support") is None
    assert [q for q in queries if "orga_pauses" in q] == queries[-1:]  # and its BEGIN
    held = book.held("tool:refund")
    assert held is not None and held.reason == "double-paid"
    book.pause("agent:support", "ann", "runaway")
    found = book.held("loop:l1", "agent:support")
    assert found is not None and found.by == "ann"
    book.resume("agent:support")
    assert book.held("agent:support") is None


def test_a_pause_another_process_ended_holds_no_call_from_an_earlier_read(
    tmp_path: Path,
) -> None:
    """The worker read the pause a moment ago; ``orga resume`` (another process) ended it and
    told the loop, which asks again at once: the worker's read of a second ago held the call
    again, and the loop waited an hour for a resume already spent. A pause found in an earlier
    read is read again before it holds a call."""
    store = Store(f"sqlite:///{tmp_path / 'store.db'}")
    worker, operator = PauseBook(store), PauseBook(store)
    operator.pause("tool:refund", "olu", "double-paid")
    assert worker.held("loop:l1", "tool:refund") is not None
    operator.resume("tool:refund")
    assert worker.held("loop:l1", "tool:refund") is None

"""Time-dependent paths on the time-skipping test server: hours pass in milliseconds."""

from __future__ import annotations

import time

from orga.contracts.journal import ApprovalDecided, Journal
from orga.scripted.server import Turn
from tests.harness import Harness
from tests.helpers import conversation
from tests.sample_tools import transfer


async def test_approval_times_out_after_an_hour(skipping: Harness) -> None:
    model = skipping.new_model(
        [Turn(tool_calls=[("transfer", {"amount": 9, "to": "zed"})]), Turn(text="gave up")]
    )
    async with skipping.worker(tools=[transfer]):
        started = time.monotonic()
        handle = await skipping.start("pay zed", model=model, tools=["transfer"])
        result = await handle.result()
        elapsed = time.monotonic() - started
        messages = await conversation(handle)
        journal = await handle.query("journal", result_type=Journal)
    assert result.output == "gave up"
    [denied] = [r for m in messages if m.role == "tool" for r in m.tool_results]
    assert denied.status == "denied" and "approval timed out" in denied.content
    [decided] = [e for e in journal.entries if isinstance(e, ApprovalDecided)]
    assert decided.source == "timeout" and not decided.approved
    assert 3600 <= decided.waited_seconds < 3601
    assert elapsed < 30  # an hour of workflow time, seconds of real time


async def test_the_loop_timeout_does_not_count_time_waiting_for_people(skipping: Harness) -> None:
    model = skipping.new_model(
        [Turn(tool_calls=[("transfer", {"amount": 1, "to": "amy"})]), Turn(text="fine")]
    )
    async with skipping.worker(tools=[transfer]):
        handle = await skipping.start(
            "pay amy", model=model, tools=["transfer"], timeout=60, approval_timeout=7200
        )
        result = await handle.result()
    assert result.output == "fine"  # two hours waiting, yet the 60 s budget was not exceeded

"""Tool profiles and the context budget inside running loops."""

from __future__ import annotations

from orga.scripted.server import Turn
from tests.harness import Harness
from tests.helpers import conversation
from tests.sample_tools import dump


async def test_a_tool_hidden_by_the_profile_is_invisible_and_denied(harness: Harness) -> None:
    model = harness.new_model([Turn(tool_calls=[("add", {"a": 1, "b": 2})]), Turn(text="no add")])
    async with harness.worker(tools=[dump]):
        handle = await harness.start(
            "1+2", model=model, tools=["add", "dump"], tool_profile={"exclude": ["a*"]}
        )
        await handle.result()
        messages = await conversation(handle)
    first = harness.model.requests_for(model)[0].body
    assert [t["function"]["name"] for t in first["tools"]] == ["dump"]
    [result] = messages[2].tool_results
    assert result.status == "denied" and "'add' is not available" in result.content


async def test_the_context_budget_fits_what_is_sent_not_what_is_kept(harness: Harness) -> None:
    model = harness.new_model(
        [Turn(tool_calls=[("dump", {"kib": 4})]) for _ in range(4)] + [Turn(text="done")]
    )
    async with harness.worker(tools=[dump]):
        # The scripted model reports 10 input tokens per call, so after the first call the
        # estimates are calibrated down to a quarter (the lower bound): a 600-token budget
        # holds about two of the four 4 KiB results.
        handle = await harness.start(
            "dump", model=model, tools=["dump"], context_token_budget=600, max_iterations=6
        )
        await handle.result()
        messages = await conversation(handle)
    # The durable conversation keeps every result whole.
    kept = [r.content for m in messages if m.role == "tool" for r in m.tool_results]
    assert len(kept) == 4 and all(len(c) > 4000 for c in kept)
    # The last model call saw the older results masked, the newest one whole.
    last = harness.model.requests_for(model)[-1].body["messages"]
    sent = [m["content"] for m in last if m["role"] == "tool"]
    assert sent[0] == "[result of dump omitted to fit the context budget]"
    assert len(sent[-1]) > 4000

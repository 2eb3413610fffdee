"""Act: every call id gets exactly one result, in the model's order, whatever happened to it."""

from __future__ import annotations

import json

from temporalio.api.enums.v1 import EventType

from orga.contracts.state import LoopState
from orga.scripted.server import Turn
from tests.harness import Harness
from tests.helpers import conversation, tool_results
from tests.sample_tools import Probe, explode, probe_tools, sleepy, whoami


async def test_three_calls_in_one_turn_run_in_parallel(harness: Harness) -> None:
    probe = Probe()
    model = harness.new_model(
        [
            Turn(
                text="Checking three things at once.",
                tool_calls=[("wait", {"label": x, "seconds": 0.4}) for x in ("a", "b", "c")],
            ),
            Turn(text="all three done"),
        ]
    )
    async with harness.worker(tools=probe_tools(probe)):
        handle = await harness.start("go", model=model, tools=["wait"])
        result = await handle.result()
        messages = await conversation(handle)

    assert result.output == "all three done"
    assert probe.overlapping("a", "b") and probe.overlapping("b", "c")
    assert probe.peak == 3
    results = tool_results(messages)
    assert [r.content for r in results] == ["a done", "b done", "c done"]
    assert len({r.call_id for r in results}) == 3
    # The text that came with the calls is kept in the conversation.
    assistant = next(m for m in messages if m.role == "assistant")
    assert assistant.content == "Checking three things at once."
    # One user turn carries all three results, in the model's order, under the provider's ids.
    second = harness.model.requests_for(model)[1].body["messages"]
    assert [m["role"] for m in second][-3:] == ["tool", "tool", "tool"]
    wire = [c.wire_id for c in assistant.tool_calls]
    assert [m["tool_call_id"] for m in second[-3:]] == wire
    assert wire == [c["id"] for c in second[-4]["tool_calls"]] and None not in wire


async def test_max_concurrent_tools_caps_parallelism(harness: Harness) -> None:
    probe = Probe()
    model = harness.new_model(
        [
            Turn(tool_calls=[("wait", {"label": f"w{i}", "seconds": 0.3}) for i in range(4)]),
            Turn(text="done"),
        ]
    )
    async with harness.worker(tools=probe_tools(probe)):
        await harness.run("go", model=model, tools=["wait"], max_concurrent_tools=2)
    assert probe.peak == 2


async def test_serial_tools_run_one_at_a_time_in_call_order(harness: Harness) -> None:
    probe = Probe()
    labels = ["first", "second", "third"]
    model = harness.new_model(
        [
            Turn(
                tool_calls=[("write", {"label": x, "seconds": 0.15}) for x in labels]
                + [("wait", {"label": "reader", "seconds": 0.3})]
            ),
            Turn(text="written"),
        ]
    )
    async with harness.worker(tools=probe_tools(probe)):
        await harness.run("go", model=model, tools=["write", "wait"])
    writes = [x for x in probe.order if x in labels]
    assert writes == labels
    assert not probe.overlapping("first", "second")
    assert not probe.overlapping("second", "third")
    assert probe.spans["first"][1] <= probe.spans["second"][0]
    # The read-only call did not wait for the serial chain.
    assert probe.overlapping("reader", "first")


async def test_calls_on_a_failed_resource_are_skipped(harness: Harness) -> None:
    probe = Probe()
    model = harness.new_model(
        [
            Turn(
                tool_calls=[
                    ("touch", {"path": "a.txt", "label": "t1", "fail": True}),
                    ("touch", {"path": "a.txt", "label": "t2"}),
                    ("touch", {"path": "b.txt", "label": "t3"}),
                ]
            ),
            Turn(text="ok"),
        ]
    )
    async with harness.worker(tools=probe_tools(probe)):
        handle = await harness.start("go", model=model, tools=["touch"])
        await handle.result()
        results = tool_results(await conversation(handle))
    assert [r.status for r in results] == ["failed", "skipped", "ok"]
    assert "OSError: cannot touch a.txt" in results[0].content
    assert "t2" not in probe.order
    assert results[1].is_error and results[0].call_id in results[1].content


async def test_bad_arguments_unknown_tool_and_exception_become_error_results(
    harness: Harness,
) -> None:
    model = harness.new_model(
        [
            Turn(
                tool_calls=[
                    ("add", '{"a": 1, "b": '),  # not JSON
                    ("add", "[1, 2]"),  # not an object
                    ("add", {"a": "one", "b": 2}),  # not valid for the schema
                    ("delete_everything", {}),  # not advertised
                    ("explode", {"reason": "kaboom"}),  # raises
                    ("add", {"a": 1, "b": 2}),  # fine
                ]
            ),
            Turn(text="recovered"),
        ]
    )
    async with harness.worker(tools=[explode]):
        handle = await harness.start("go", model=model, tools=["add", "explode"])
        result = await handle.result()
        results = tool_results(await conversation(handle))
        state = await handle.query("state", result_type=LoopState)
    assert result.output == "recovered"
    assert [r.status for r in results] == [
        "denied",
        "denied",
        "denied",
        "denied",
        "failed",
        "ok",
    ]
    assert "not valid JSON" in results[0].content
    assert "must be a JSON object" in results[1].content
    assert "a: Input should be a valid number" in results[2].content
    assert "'delete_everything' is not available" in results[3].content
    assert "ValueError: kaboom" in results[4].content
    assert results[5].content == "3" and not results[5].is_error
    assert all(r.is_error for r in results[:5])
    assert state.tool_call_count == 6
    # The model saw every error, flagged as an error.
    sent = harness.model.requests_for(model)[1].body["messages"]
    assert [m["content"].startswith("ERROR: ") for m in sent if m["role"] == "tool"] == [
        True,
        True,
        True,
        True,
        True,
        False,
    ]


async def test_permissive_gate_still_checks_arguments_in_the_tool(harness: Harness) -> None:
    model = harness.new_model(
        [
            Turn(tool_calls=[("add", "{oops"), ("add", {"a": "x", "b": 1}), ("nope", {})]),
            Turn(text="fine"),
        ]
    )
    async with harness.worker():
        handle = await harness.start("go", model=model, tools=["add"], policy="permissive")
        await handle.result()
        results = tool_results(await conversation(handle))
    assert [r.status for r in results] == ["invalid_arguments", "invalid_arguments", "unknown_tool"]
    assert "not valid JSON" in results[0].content


async def test_tool_context_and_timeouts(harness: Harness) -> None:
    model = harness.new_model(
        [Turn(tool_calls=[("whoami", {}), ("sleepy", {"seconds": 3})]), Turn(text="done")]
    )
    async with harness.worker(tools=[whoami, sleepy]):
        handle = await harness.start("go", model=model, tools=["whoami", "sleepy"])
        await handle.result()
        results = tool_results(await conversation(handle))
    workflow_id, call_id, key, attempt = results[0].content.split("|")
    assert workflow_id == handle.id
    assert call_id.startswith("i1_")  # the loop's own id for the provider's call
    assert key == f"{handle.id}/{handle.result_run_id}/{call_id}"  # the chain's first run
    assert attempt == "1"
    assert results[1].status == "timed_out"
    assert "0.5 s" in results[1].content


async def test_the_setup_names_each_tool_schema_by_digest_and_the_model_sees_it_whole(
    harness: Harness,
) -> None:
    """The workflow never reads a tool's schema nor its description: its history names the
    schema by digest, once, and leaves the description out; the worker shows the model its
    registry's schema and description."""
    model = harness.new_model([Turn(tool_calls=[("add", {"a": 1, "b": 2})]), Turn(text="3")])
    async with harness.worker():
        handle = await harness.start("1+2?", model=model, tools=["add"])
        assert (await handle.result()).output == "3"
        history = await handle.fetch_history()
    [setup] = [
        e.marker_recorded_event_attributes.details["result"].payloads[0].data
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED
        and "data" in e.marker_recorded_event_attributes.details  # a patch's marker has none
        and b'"resolve_loop"' in e.marker_recorded_event_attributes.details["data"].payloads[0].data
    ]
    [tool] = json.loads(setup)["tools"]
    assert tool["name"] == "add" and tool["parameters"] == {} and tool["description"] == ""
    assert tool["schema_digest"].startswith("sha256:")
    inputs = [
        payload.data
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        for payload in e.activity_task_scheduled_event_attributes.input.payloads
    ]
    assert inputs and not any(b'"properties"' in data for data in [setup, *inputs])
    [shown] = harness.model.requests_for(model)[0].body["tools"]
    assert set(shown["function"]["parameters"]["properties"]) == {"a", "b"}
    assert shown["function"]["description"].startswith("Add two numbers")
    assert b"Add two numbers" not in setup

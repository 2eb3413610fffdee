"""Streamed model calls: server-sent events in both wire formats (recorded bodies and the
scripted model's streams), text published to the loop's Workflow Stream while it arrives, one
result in history, and a broken stream falling back to the retried call."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowExecutionStatus
from temporalio.contrib.workflow_streams import WorkflowStreamClient
from temporalio.testing import WorkflowEnvironment

import orga as orga_api
from orga.contracts.config import LoopConfig, LoopInput
from orga.contracts.errors import ProviderError, ProviderRejected, ProviderUnavailable
from orga.contracts.inference import STREAM_TOPIC, StreamedText
from orga.contracts.threads import ThreadConfig
from orga.providers.anthropic import parse_message
from orga.providers.openai import parse_chat_completion
from orga.providers.streaming import (
    ChatStream,
    MessageStream,
    ServerSentEvent,
    server_sent_events,
)
from orga.scripted.server import Turn, Wire, stream_events
from tests.fixtures import body, raw_text
from tests.harness import TEST_STORE, Harness
from tests.helpers import conversation, eventually, on, orga, runs, tool_results
from tests.sample_tools import get_weather


async def _lines(text: str) -> AsyncIterator[str]:
    for line in text.split("\n"):
        yield line


async def events_of(text: str) -> list[ServerSentEvent]:
    return [event async for event in server_sent_events(_lines(text))]


async def assembled(wire: Wire, stream: Iterable[str]) -> tuple[dict[str, Any], list[str]]:
    pieces: list[str] = []
    assembler: ChatStream | MessageStream = (
        MessageStream(pieces.append) if wire == "anthropic" else ChatStream("openai", pieces.append)
    )
    for event in await events_of("".join(stream)):
        assembler.feed(event)
        if assembler.done:
            break
    return assembler.body(), pieces


def recorded(name: str) -> dict[str, Any]:
    return body(name)


# ---- pure: the streams add up to the answer ------------------------------------------------


@pytest.mark.parametrize(
    ("wire", "fixture"),
    [
        ("openai", "openai_09b_stop_LIVE_2024.json"),
        ("openai", "openai_10_parallel_tool_calls.json"),
        ("openai", "openrouter_14_chat_completion_native_STOP_LIVE.json"),
        ("anthropic", "anthropic_01_end_turn_text.json"),
        ("anthropic", "anthropic_02_tool_use_text_then_tool_use.json"),
        ("anthropic", "anthropic_03_parallel_tool_use.json"),
    ],
)
async def test_a_recorded_answer_streamed_normalises_to_the_same(wire: Wire, fixture: str) -> None:
    body = recorded(fixture)
    stream = [event for event, _ in stream_events(wire, body)]
    rebuilt, pieces = await assembled(wire, stream)
    if wire == "anthropic":
        expected, got = parse_message(body), parse_message(rebuilt)
    else:
        expected, got = (
            parse_chat_completion(body, "openai"),
            parse_chat_completion(rebuilt, "openai"),
        )
    assert got == expected
    assert "".join(pieces) == expected.text  # every piece of text was handed on as it came


async def test_keep_alive_comments_and_multi_line_data() -> None:
    events = await events_of(": OPENROUTER PROCESSING\n\nevent: x\ndata: a\ndata: b\n\n")
    assert events == [ServerSentEvent("x", "a\nb")]


async def test_recorded_mid_stream_errors() -> None:
    # OpenRouter's error chunk (recorded body, sent as an SSE data line): retryable.
    chunk = raw_text("openrouter_15f_midstream_error_chunk_SSE_DOCS.json").strip()
    with pytest.raises(ProviderUnavailable, match="Rate limit exceeded"):
        await assembled("openai", [f"data: {chunk}\n\n"])
    # Anthropic's error event (recorded data payload): overloaded is retryable.
    error = raw_text("anthropic_08c_error_overloaded_SSE_event_DOCS.json").strip()
    start = 'event: message_start\ndata: {"type": "message_start", "message": {"id": "m"}}\n\n'
    with pytest.raises(ProviderUnavailable, match="overloaded_error"):
        await assembled("anthropic", [start, f"event: error\ndata: {error}\n\n"])
    invalid = '{"type": "error", "error": {"type": "invalid_request_error", "message": "no"}}'
    with pytest.raises(ProviderRejected):
        await assembled("anthropic", [f"event: error\ndata: {invalid}\n\n"])


async def test_a_stream_cut_short_is_retryable() -> None:
    body = recorded("openai_09b_stop_LIVE_2024.json")
    stream = [event for event, _ in stream_events("openai", body)]
    with pytest.raises(ProviderError, match="ended before"):
        await assembled("openai", stream[:3])
    message = recorded("anthropic_01_end_turn_text.json")
    cut = [event for event, _ in stream_events("anthropic", message)][:-1]
    with pytest.raises(ProviderUnavailable, match="before message_stop"):
        await assembled("anthropic", cut)


# ---- a loop that streams ---------------------------------------------------------------------


ANSWER = (
    "The answer, worked out step by step from the two numbers the tool added for us, is in "
    "the end forty two."
)


async def follow(harness: Harness, workflow_id: str) -> list[tuple[StreamedText, bool]]:
    """The loop's stream as a reader sees it, each item with whether the loop still ran."""
    reader = WorkflowStreamClient.create(harness.client, workflow_id)
    handle = harness.client.get_workflow_handle(workflow_id)
    seen: list[tuple[StreamedText, bool]] = []
    async for item in reader.subscribe([STREAM_TOPIC], result_type=StreamedText):
        running = (await handle.describe()).status == WorkflowExecutionStatus.RUNNING
        seen.append((item.data, running))
    return seen


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_text_arrives_in_pieces_and_history_holds_one_result(
    harness: Harness, provider: str
) -> None:
    model = harness.new_model(
        [
            Turn(tool_calls=[("add", {"a": 40, "b": 2})]),
            Turn(text=ANSWER, piece_delay=0.08),
        ]
    )
    async with harness.worker():
        handle = await harness.start(
            "6 times 7?", model=model, provider=provider, tools=["add"], stream=True
        )
        seen = await follow(harness, handle.id)
        result = await handle.result()
        results = tool_results(await conversation(handle))
    assert result.output == ANSWER and results[0].content == "42"
    texts = [(item.text, running) for item, running in seen if item.text]
    assert "".join(text for text, _ in texts) == ANSWER
    assert len(texts) == len(ANSWER.split(" "))  # in pieces, a word each …
    assert texts[0][1]  # … the first of them read while the loop was still running
    assert [item.iteration for item, _ in seen if item.done] == [1, 2]
    history = await handle.fetch_history()
    completed = [
        e for e in history.events if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED
    ]
    scheduled = {
        e.event_id: e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    }
    model_results = [
        e
        for e in completed
        if scheduled[e.activity_task_completed_event_attributes.scheduled_event_id] == "call_model"
    ]
    assert len(model_results) == 2  # one result per model call, however many pieces
    signals = [
        e
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED
    ]
    assert 0 < len(signals) < len(texts)  # the pieces went in batches


async def test_a_broken_stream_falls_back_to_the_retried_call(harness: Harness) -> None:
    model = harness.new_model(
        [Turn(text=ANSWER, break_after=3, piece_delay=0.05), Turn(text=ANSWER)]
    )
    async with harness.worker():
        handle = await harness.start("6 times 7?", model=model, stream=True)
        seen = await follow(harness, handle.id)
        result = await handle.result()
    assert result.output == ANSWER
    items = [item for item, _ in seen]
    restarted = next(i for i, item in enumerate(items) if item.restart)
    shown_before = "".join(item.text for item in items[:restarted])
    assert shown_before and ANSWER.startswith(shown_before) and shown_before != ANSWER
    assert "".join(item.text for item in items[restarted:]) == ANSWER
    assert len(harness.model.requests_for(model)) == 2


async def test_orga_run_stream_prints_the_text(env: WorkflowEnvironment, harness: Harness) -> None:
    model = harness.new_model([Turn(text=ANSWER, piece_delay=0.05)])
    variables = {**on(env, harness), "ORGA_STORE_URL": TEST_STORE.url}
    async with harness.worker():
        code, out, err = await orga(
            "run", "6 times 7?", "--provider", "openai", "--model", model, "--stream", env=variables
        )
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == ANSWER  # printed while it came, once
    assert out.count(ANSWER) == 1 and "end_turn after 1 iteration" in out


async def test_orga_journal_follow_prints_the_text_too(
    env: WorkflowEnvironment, harness: Harness
) -> None:
    model = harness.new_model(
        [Turn(tool_calls=[("add", {"a": 40, "b": 2})]), Turn(text=ANSWER, piece_delay=0.1)]
    )
    variables = {**on(env, harness), "ORGA_STORE_URL": TEST_STORE.url}
    async with harness.worker():
        handle = await harness.start("6 times 7?", model=model, tools=["add"], stream=True)
        code, out, err = await orga("journal", handle.id, "--follow", env=variables)
        await handle.result()
    assert code == 0, err
    assert f"      … {ANSWER}" in out.splitlines()
    assert "Terminated" in out and "ToolsDispatched" in out


async def test_a_reader_that_went_away_mid_poll_does_not_keep_the_loop_from_ending(
    harness: Harness,
) -> None:
    """``orga chat`` stops following a turn's stream once the answer is in, and a reader may be
    killed: either leaves its long poll (an update) waiting in the workflow for text that never
    comes. The thread closes and ends all the same (it used to wait for that poll forever)."""
    model = harness.new_model([Turn(text="hello there")])
    config = LoopConfig(model=model, stream=True, thread=ThreadConfig())
    async with harness.worker():
        chat = await orga_api.start_thread(
            harness.client, config, "hi", task_queue=harness.task_queue
        )
        harness.handles.append(chat.handle)
        await chat.turn(1)
        reader = WorkflowStreamClient.create(harness.client, chat.id)
        offset = await reader.get_offset()

        async def follow() -> None:
            async for _ in reader.subscribe([STREAM_TOPIC], offset, result_type=StreamedText):
                pass

        following = asyncio.ensure_future(follow())

        async def poll_waits() -> bool:
            async for event in chat.handle.fetch_history_events():
                accepted = event.workflow_execution_update_accepted_event_attributes
                if (
                    event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED
                    and "stream_poll" in accepted.accepted_request.input.name
                ):
                    return True
            return False

        await eventually(poll_waits, "the reader's poll waits in the workflow")
        following.cancel()  # the reader goes away; its poll stays
        await asyncio.gather(following, return_exceptions=True)
        await chat.close("done")
        result = await asyncio.wait_for(chat.handle.result(), 30)
    assert result.output == "hello there"
    status = (await chat.handle.describe()).status
    assert status == WorkflowExecutionStatus.COMPLETED


async def test_a_streamed_loop_carries_only_its_last_run_s_items_into_the_next(
    harness: Harness,
) -> None:
    """A streamed loop that is not a thread (no turn to truncate at) carried its whole stream
    through every continue-as-new, each run's input larger than the last (issue 63). Each run
    now hands on only its own items: what the next run starts from stays the same size."""
    steps = 30
    model = harness.new_model(
        [Turn(tool_calls=[("get_weather", {"location": f"city {n}"})]) for n in range(steps)]
        + [Turn(text="done")]
    )
    async with harness.worker(tools=[get_weather]):
        handle = await harness.start(
            "go",
            model=model,
            tools=["get_weather"],
            stream=True,
            max_history_events=200,
            max_iterations=steps + 1,
        )
        await handle.result()
        carried: list[int] = []
        async for history in runs(harness, handle):
            first = history.events[0].workflow_execution_started_event_attributes
            [given] = await harness.client.data_converter.decode(first.input.payloads, [LoopInput])
            if given.carry is not None and given.carry.stream is not None:
                carried.append(len(given.carry.stream.state.log))
    assert len(carried) >= 2, carried  # it continued as new at least twice
    assert max(carried) <= 2 * min(carried), carried  # flat, not growing with every run

"""A long conversation has a bound (issue 56), in test size: a thread whose conversation grows
past 40 000 tokens of tool results over several turns and continues as new, then one turn of
30 tool calls. What each call writes to history stays flat — it does not grow with the
conversation, because a model call's input carries only what was added since the previous call
(the worker keeps the rest) — and the turn completes. ``bench/long_conversation.py`` runs the
full size (200 000 tokens, 100 calls) against the minimal loop and the OpenAI Agents plugin."""

from __future__ import annotations

import statistics

from orga.client import start_thread
from orga.contracts.config import LoopConfig
from orga.contracts.threads import ThreadConfig
from orga.scripted.server import Turn
from tests.harness import Harness
from tests.helpers import requests_per_run, runs, turns_written
from tests.sample_tools import dump

PAGES_PER_TURN = 5
PAGE_KIB = 8
GROWING_TURNS = 4
LAST_CALLS = 30


def script() -> list[Turn]:
    """Four turns that each read five 8 KiB pages, then one turn of 30 small calls."""
    steps: list[Turn] = []
    for turn in range(GROWING_TURNS):
        steps += [Turn(tool_calls=[("dump", {"kib": PAGE_KIB})])] * PAGES_PER_TURN
        steps.append(Turn(text=f"read turn {turn + 1}"))
    steps += [Turn(tool_calls=[("add", {"a": n, "b": 1})]) for n in range(LAST_CALLS)]
    steps.append(Turn(text=f"added {LAST_CALLS} times"))
    return steps


async def test_what_a_call_writes_to_history_does_not_grow_with_the_conversation(
    harness: Harness,
) -> None:
    model = harness.new_model(script())
    config = LoopConfig(
        model=model,
        tools=["dump", "add"],
        thread=ThreadConfig(),
        max_history_events=200,
        max_iterations=LAST_CALLS + 5,
        max_total_tokens=10_000_000,
    )
    async with harness.worker(tools=[dump]):
        chat = await start_thread(harness.client, config, task_queue=harness.task_queue)
        harness.handles.append(chat.handle)
        for turn in range(GROWING_TURNS):
            answered = await chat.send(f"read five pages, turn {turn + 1}")
            assert answered.output == f"read turn {turn + 1}"
        last = await chat.send(f"add one, {LAST_CALLS} times")
        request = harness.model.requests_for(model)[-1]
        sent = [*request.user_texts(), *request.tool_result_texts()]
        conversation = sum(len(text.encode()) for text in sent)
        first = (await chat.handle.describe()).raw_description.workflow_execution_info.first_run_id
        handle = harness.client.get_workflow_handle(chat.id, first_execution_run_id=first)
        written = await turns_written(harness, handle)
        requests = [r for run in await requests_per_run(harness, handle) for r in run]
        count = len([history async for history in runs(harness, handle)])
        await chat.close()
    assert last.output == f"added {LAST_CALLS} times"
    assert count >= 3  # it continued as new along the way, mid-turn too
    context = PAGE_KIB * 1024 * PAGES_PER_TURN * GROWING_TURNS  # ~160 KiB ≈ 40 000 tokens
    assert conversation >= context  # the model was sent all of it
    per_call = [size for _, size in written[-LAST_CALLS + 2 :]]  # the last turn's calls
    early, late = statistics.median(per_call[:10]), statistics.median(per_call[-10:])
    print(f"\nbytes per call: first 10 {early:.0f}, last 10 {late:.0f}; context {context}")
    assert late <= 1.2 * early, (early, late)  # flat across the turn
    assert late < context / 20, (late, context)  # not the conversation again on each call
    # Why: each call of the last turn carried only what was added since the call before (the
    # call's assistant message and its result), never the conversation (a new run's first call
    # aside: its worker may not hold it, and reads it back from the workflow).
    last_turn = requests[-(LAST_CALLS + 1) :]
    assert max(len(r.conversation.messages) for r in last_turn[1:]) <= 3
    assert min(r.conversation.length for r in last_turn) > 2 * GROWING_TURNS * PAGES_PER_TURN

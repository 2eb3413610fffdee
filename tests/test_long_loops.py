"""Long loops continue as new at iteration boundaries and look the same from outside."""

from __future__ import annotations

import itertools
import statistics
import sys
from types import FrameType
from typing import Any

from temporalio.bridge.proto.workflow_activation import WorkflowActivation
from temporalio.bridge.proto.workflow_completion import WorkflowActivationCompletion
from temporalio.client import WorkflowHandle
from temporalio.converter import SerializationContext, StorageDriverStoreContext
from temporalio.worker import (
    Replayer,
    UnsandboxedWorkflowRunner,
    WorkflowInstance,
    WorkflowInstanceDetails,
)
from temporalio.workflow import Info

from orga.contracts.journal import Journal
from orga.contracts.state import LoopState
from orga.plugin import WORKFLOWS
from orga.scripted.server import RecordedRequest, Turn
from tests.harness import Harness, replay
from tests.helpers import requests_per_run, runs, turns_written

ITERATIONS = 120
"""Enough for three continues at ``max_history_events=400``, and a journal past its limit."""


def counter(request: RecordedRequest) -> Turn:
    done = request.tool_results()
    if done < ITERATIONS - 1:
        return Turn(tool_calls=[("add", {"a": done, "b": 1})], input_tokens=3, output_tokens=2)
    return Turn(text=f"counted {done}", input_tokens=3, output_tokens=2)


async def test_a_long_loop_continues_as_new_and_looks_the_same(harness: Harness) -> None:
    model = harness.new_model([])
    harness.model.script(model, [counter] * ITERATIONS)
    async with harness.worker():
        handle = await harness.start(
            "count",
            model=model,
            tools=["add"],
            max_iterations=400,
            max_total_tokens=10_000,
            max_history_events=400,
            journal_limit=100,
            timeout=600,
        )
        result = await handle.result()
        state = await handle.query("state", result_type=LoopState)
        journal = await handle.query("journal", result_type=Journal)
        runs = await replay(handle, harness.client)
    assert result.output == f"counted {ITERATIONS - 1}"
    assert result.iterations == ITERATIONS
    assert result.tool_call_count == ITERATIONS - 1
    assert result.usage.total_tokens == 5 * ITERATIONS
    assert result.messages == 1 + 2 * (ITERATIONS - 1) + 1
    assert runs >= 4, runs  # at least three continues
    assert state.iteration == ITERATIONS and state.status == "completed"
    seqs = [e.seq for e in journal.entries]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))  # one journal, no gaps
    assert journal.entries[-1].kind == "Terminated"
    assert journal.dropped > 0  # the oldest entries made room, and are counted
    assert journal.dropped + len(journal.entries) == journal.next_seq - 1
    assert [e.kind for e in journal.entries].count("Started") <= 1
    # Every model call after the first carried only what was new — not even the model's own
    # turn, which the worker kept when it answered — and the model saw the whole conversation,
    # read back from the workflow not once.
    sizes = [len(r.body["messages"]) for r in harness.model.requests_for(model)]
    assert sizes[-1] == result.messages - 1
    requests = await requests_per_run(harness, handle)
    carried = [tuple(m.role for m in r.conversation.messages) for run in requests for r in run]
    assert carried[0] == ("user",) and set(carried[1:]) == {("tool",)}, carried
    assert harness.plugin is not None
    assert harness.plugin.parts(harness.client).inference.cache.misses == 0
    # The token calibration learnt from the provider's counts crossed every continue: each
    # run's first model call uses what the run before it had learnt.
    calibrations = [[r.token_calibration for r in run] for run in requests]
    assert len(calibrations) == runs and calibrations[0][0] == 1.0
    for before, after in itertools.pairwise(calibrations):
        assert after[0] == before[-1] != 1.0
    # Flat in length (issue 38): a turn at the end writes what a turn at the start wrote —
    # the same events, and bytes within 10 % (ids and counters grow a digit) — through three
    # continues: nothing a turn records grows with the loop's age.
    turns = await turns_written(harness, handle)
    assert len(turns) >= ITERATIONS - 2 * runs, len(turns)
    early, late = turns[:10], turns[-10:]
    assert {events for events, _ in late} == {events for events, _ in early}, (early, late)
    early_bytes = statistics.median(size for _, size in early)
    late_bytes = statistics.median(size for _, size in late)
    assert late_bytes <= 1.1 * early_bytes, (early_bytes, late_bytes)
    # And the workflow code does the same work for a turn at the end as at the start: the calls
    # its workflow tasks make (Python's and C's, counted as they run) do not grow with the
    # conversation, the journal or the run count — overhead that grows with a run's length
    # would show here first, deterministically, where a timing would not.
    calls = await calls_per_activation(harness, handle)
    early_calls = statistics.median(calls[0][3:23])
    late_calls = statistics.median(calls[-1][-22:-2])
    assert late_calls <= 1.1 * early_calls, (early_calls, late_calls)


async def calls_per_activation(
    harness: Harness, handle: WorkflowHandle[Any, Any]
) -> list[list[int]]:
    """The calls each workflow task of the loop makes when replayed, run by run."""
    found: list[list[int]] = []
    async for history in runs(harness, handle):
        runner = CountingRunner()
        replayer = Replayer(
            workflows=WORKFLOWS,
            workflow_runner=runner,
            data_converter=harness.client.data_converter,
        )
        await replayer.replay_workflow(history)
        found.append(runner.calls)
    return found


class CountingRunner(UnsandboxedWorkflowRunner):
    """Runs orga's workflow code as a worker does, outside the sandbox (whose own machinery
    would be counted too), counting the calls — Python functions and C functions alike —
    that each activation makes in its thread."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[int] = []

    def create_instance(self, det: WorkflowInstanceDetails) -> WorkflowInstance:
        return _Counted(super().create_instance(det), self.calls)


class _Counted(WorkflowInstance):
    def __init__(self, inner: WorkflowInstance, calls: list[int]) -> None:
        self._inner = inner
        self._calls = calls

    def activate(self, act: WorkflowActivation) -> WorkflowActivationCompletion:
        made = 0

        def count(frame: FrameType, event: str, arg: object) -> None:
            nonlocal made
            if event in ("call", "c_call"):
                made += 1

        sys.setprofile(count)
        try:
            return self._inner.activate(act)
        finally:
            sys.setprofile(None)
            self._calls.append(made)

    def get_serialization_context(self, command_info: Any) -> SerializationContext | None:
        return self._inner.get_serialization_context(command_info)

    def get_external_store_context(self, command_info: Any) -> StorageDriverStoreContext:
        return self._inner.get_external_store_context(command_info)

    def get_info(self) -> Info:
        return self._inner.get_info()


BIG = 40
"""Tool results of 400 KB each: together twenty times Temporal's 2 MiB payload limit."""


def big_results() -> list[Turn]:
    """The model asks for one dump per turn (the context budget hides most earlier ones)."""
    return [Turn(tool_calls=[("dump", {"kib": 400})]) for _ in range(BIG)] + [
        Turn(text=f"read {BIG} dumps")
    ]


async def test_forty_results_of_400_kb_through_several_continues(harness: Harness) -> None:
    """The loop never stops on a payload limit: large results, answers and continue-as-new
    inputs travel by reference through the store, and every run's history stays small."""
    from temporalio.api.enums.v1 import EventType

    from tests.sample_tools import dump

    model = harness.new_model([])
    harness.model.script(model, big_results())
    async with harness.worker(tools=[dump]):
        handle = await harness.start(
            "read the dumps",
            model=model,
            tools=["dump"],
            max_iterations=BIG + 5,
            max_total_tokens=10_000_000,
            max_history_events=200,
            context_token_budget=16_000,
            timeout=900,
        )
        result = await handle.result()
        runs = await replay(handle, harness.client)
        sizes: list[int] = []
        run_id = handle.first_execution_run_id or handle.result_run_id
        while run_id:
            history = await harness.client.get_workflow_handle(
                handle.id, run_id=run_id
            ).fetch_history()
            sizes.append(len(history.to_json().encode()))
            last = history.events[-1]
            run_id = (
                last.workflow_execution_continued_as_new_event_attributes.new_execution_run_id
                if last.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW
                else None
            )
    print(f"\n{BIG} results of 400 KB in {runs} runs; history bytes per run: {sizes}")
    assert result.output == f"read {BIG} dumps" and result.tool_call_count == BIG
    assert runs >= 3  # at least two continues, each carrying ~10 MB of conversation
    assert max(sizes) < 1024 * 1024  # the payloads are in the store, not in history

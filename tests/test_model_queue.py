"""Provider limits held across workers: model calls on a task queue of their own, whose rate
the Temporal server holds for every worker together (ORGA_MODEL_TASK_QUEUE, ORGA_MODEL_RPS)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from orga.scripted.server import Turn
from tests.harness import Harness, scripted_settings
from tests.helpers import critic_agents, verdict

RPS = 2.0
LOOPS = 5


async def test_two_workers_stay_under_the_model_rate(harness: Harness) -> None:
    queue = f"{harness.task_queue}-model"
    settings = scripted_settings(harness.model, model_task_queue=queue, model_rps=RPS)
    models = [
        harness.new_model([Turn(tool_calls=[("add", {"a": i, "b": 1})]), Turn(text=str(i + 1))])
        for i in range(LOOPS)
    ]
    other = Harness(  # a second worker process, in effect: its own connection
        client=await Client.connect(
            harness.client.service_client.config.target_host,
            namespace=harness.client.namespace,
            data_converter=harness.client.data_converter,
        ),
        model=harness.model,
        task_queue=harness.task_queue,
    )
    async with harness.worker(settings=settings), other.worker(settings=settings):
        handles = [await harness.start("count", model=model, tools=["add"]) for model in models]
        results = await asyncio.gather(*(handle.result() for handle in handles))
    assert [r.output for r in results] == [str(i + 1) for i in range(LOOPS)]
    times = sorted(r.at for model in models for r in harness.model.requests_for(model))
    assert len(times) == 2 * LOOPS
    # The server dispatches the model calls at a limited rate over both workers. It lets a
    # short burst through first (measured: 4 at RPS=2 — the task queue's partitions each pass
    # one at once), then holds the rate: the other six take at least 1.5 s even if all four
    # partitions serve at once, where unlimited these ten instant calls take well under one.
    span = times[-1] - times[0]
    assert span >= (len(times) - 2 * RPS) / (2 * RPS), [round(t - times[0], 2) for t in times]
    history = await handles[0].fetch_history()
    queues = {
        e.activity_task_scheduled_event_attributes.task_queue.name
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and e.activity_task_scheduled_event_attributes.activity_type.name == "call_model"
    }
    assert queues == {queue}


async def test_the_critics_model_calls_use_the_model_queue_too(
    harness: Harness, tmp_path: Path
) -> None:

    queue = f"{harness.task_queue}-model"
    writer = harness.new_model([Turn(text="Paris has 2.1M people.")])
    critic = harness.new_model([verdict("approve")])
    settings = scripted_settings(
        harness.model, model_task_queue=queue, agents_file=critic_agents(tmp_path, writer, critic)
    )
    async with harness.worker(settings=settings):
        handle = await harness.start(
            "How large is Paris?", agent_id="writer", critic={"kind": "model", "agent": "critic"}
        )
        result = await handle.result()
    assert result.output == "Paris has 2.1M people."
    history = await handle.fetch_history()
    queues = {
        e.activity_task_scheduled_event_attributes.activity_type.name: (
            e.activity_task_scheduled_event_attributes.task_queue.name
        )
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    }
    assert queues["call_model"] == queue and queues["critique"] == queue

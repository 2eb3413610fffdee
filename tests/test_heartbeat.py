"""``heartbeating``: beats while an activity's body waits, and not once it has ended."""

from __future__ import annotations

import asyncio
import dataclasses

from temporalio.testing import ActivityEnvironment

from orga.worker.heartbeat import heartbeating


async def test_it_beats_while_the_body_waits_and_stops_when_it_ends() -> None:
    env = ActivityEnvironment()
    beats: list[object] = []
    twice = asyncio.Event()

    def on_heartbeat(*details: object) -> None:
        beats.append(details)
        if len(beats) >= 2:
            twice.set()

    env.on_heartbeat = on_heartbeat

    async def slow_call() -> int:
        async with heartbeating(every=0.01):
            await asyncio.wait_for(twice.wait(), 10)
        return len(beats)

    seen = await env.run(slow_call)
    assert seen >= 2
    await asyncio.sleep(0.1)  # ten beats' time: none may come after the body ended
    assert len(beats) == seen


async def test_a_local_activity_does_not_beat() -> None:
    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, is_local=True)
    beats: list[object] = []
    env.on_heartbeat = lambda *details: beats.append(details)

    async def quick_local_call() -> None:
        async with heartbeating(every=0.01):
            await asyncio.sleep(0.1)

    await env.run(quick_local_call)
    assert beats == []

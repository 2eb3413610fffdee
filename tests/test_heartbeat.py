"""``heartbeating``: beats while an activity's body waits, and not once it has ended; the tool
activity marks a begun effect only where one is settled."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import cast

from temporalio.client import Client
from temporalio.testing import ActivityEnvironment

from orga.activities.tools import ToolActivities
from orga.contracts.conversation import ToolCall
from orga.contracts.tools import ToolInvocation
from orga.runtime.store import Store
from orga.tools._outcomes import BEGAN
from orga.tools.ledger import Ledger
from orga.tools.sdk import ToolRegistry, tool
from orga.worker.blobs import BlobStore
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


class _Server:
    """What the tool activity tells the server of a call's begun effect (the stored heartbeat
    it waits for before the tool runs), recorded: a stand-in for the client's activity handle
    in a unit test (the dev-server tests kill a worker right after an effect)."""

    def __init__(self) -> None:
        self.stored: list[tuple[object, ...]] = []

    def get_async_activity_handle(self, *, task_token: bytes) -> _Server:
        return self

    async def heartbeat(self, *details: object) -> None:
        self.stored.append(details)


async def test_only_a_tool_with_effects_marks_its_effect_begun(tmp_path: Path) -> None:
    """The tool activity tells the server a call's effect begins (a heartbeat it waits for the
    server to store, before the tool runs) only for a tool that would be settled after a lost
    attempt: one with effects, or one that says it is idempotent. A pure tool's call runs again
    after a lost attempt as ever, so marking it would cost a call to the server on every call
    for nothing."""

    @tool
    async def double(x: int) -> int:
        """Double a number.

        Args:
            x: the number.
        """
        return 2 * x

    @tool(serial=True)
    async def send(to: str) -> str:
        """Send a letter.

        Args:
            to: who gets it.
        """
        return f"sent to {to}"

    @tool(idempotent=True)
    async def upsert(to: str) -> str:
        """Write a record (again, harmlessly).

        Args:
            to: whose.
        """
        return f"written for {to}"

    store = Store(f"sqlite:///{tmp_path / 'store.db'}")
    activities = ToolActivities(
        registry=ToolRegistry([double, send, upsert]),
        blobs=BlobStore(store),
        ledger=Ledger(store),
    )
    stored: dict[str, list[tuple[object, ...]]] = {}
    for name, arguments in (
        ("double", '{"x": 2}'),
        ("send", '{"to": "ann"}'),
        ("upsert", '{"to": "bo"}'),
    ):
        server = _Server()
        # A duck-typed client: the activity asks it only for the call's handle.
        env = ActivityEnvironment(client=cast(Client, server))
        call = ToolCall(id="c1", name=name, arguments=arguments)
        result = await env.run(activities.run_tool, ToolInvocation(call=call, workflow_id="w"))
        assert not result.is_error
        if server.stored:
            stored[name] = server.stored
    assert stored == {"send": [(BEGAN,)], "upsert": [(BEGAN,)]}

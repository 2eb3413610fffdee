"""A2A tasks outlive the endpoint's process (issue 68): ``orga api --a2a`` keeps them in orga's
store. Its process is SIGKILLed while a task works (a tool of the turn holds it); the turn ends
meanwhile; a second process on the same store serves the task, and a client that subscribes
to it again is taken to its end — the answer, as if nothing had happened."""

from __future__ import annotations

import asyncio
import signal
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.auth.user import User
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.helpers import get_artifact_text, new_text_part
from a2a.server.context import ServerCallContext
from a2a.types import (
    GetTaskRequest,
    Message,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    TaskState,
    TaskStatus,
)
from temporalio.testing import WorkflowEnvironment

import orga
from orga.scripted.server import Turn
from orga.tools.sdk import tool
from orga.web.a2a import A2A_PREFIX
from orga.web.a2a_store import StoredTasks, async_engine
from orga.web.callers import new_token
from tests.harness import Harness
from tests.helpers import on, reusable_port, server_process

pytestmark = pytest.mark.timeout(120)


def _api(env: WorkflowEnvironment, harness: Harness, tokens: Path, model: str, port: int) -> Any:
    args = ("api", "--a2a", "--tokens", str(tokens), "--model", model, "--tool", "stock")
    return server_process(*args, "--port", str(port), env=on(env, harness), announce="orga api on")


async def _client(http: httpx.AsyncClient, base: str, *, streaming: bool) -> Any:
    card = await A2ACardResolver(http, base).get_agent_card()
    return ClientFactory(ClientConfig(httpx_client=http, streaming=streaming)).create(card)


async def test_a_task_outlives_the_endpoint_s_process_and_a_subscriber_sees_its_end(
    env: WorkflowEnvironment, harness: Harness, tmp_path: Path
) -> None:
    counted, release = asyncio.Event(), asyncio.Event()

    @tool(name="stock")
    async def stock(item: str) -> str:
        """How many of an item are in stock.

        Args:
            item: the item.
        """
        counted.set()
        await release.wait()
        return f"{item}: 12"

    model = harness.new_model(
        [Turn(tool_calls=[("stock", {"item": "apples"})]), Turn(text="12 apples in stock")]
    )
    token, digest = new_token()
    tokens = tmp_path / "tokens.toml"
    tokens.write_text(f'[users.ann]\ntoken_sha256 = "{digest}"\n')
    port = reusable_port()
    base = f"http://127.0.0.1:{port}/a2a"
    headers = {"Authorization": f"Bearer {token}"}
    ask = Message(
        role=Role.ROLE_USER,
        message_id=uuid.uuid4().hex,
        context_id=f"stock-{uuid.uuid4().hex[:8]}",
        parts=[new_text_part("how many apples?")],
    )
    async with (
        harness.worker(tools=[stock]),
        httpx.AsyncClient(headers=headers, timeout=60) as http,
    ):
        async with _api(env, harness, tokens, model, port) as (api, _):
            client = await _client(http, base, streaming=False)
            sent = SendMessageRequest(
                message=ask, configuration=SendMessageConfiguration(return_immediately=True)
            )
            [first] = [answer.task async for answer in client.send_message(sent)]
            await asyncio.wait_for(counted.wait(), 60)  # the turn's tool runs
            api.send_signal(signal.SIGKILL)
            await api.wait()
        release.set()  # the turn ends while no endpoint runs
        thread = orga.loop(harness.client, f"{A2A_PREFIX}{ask.context_id}")
        harness.handles.append(thread.handle)
        async with _api(env, harness, tokens, model, port):
            client = await _client(http, base, streaming=True)
            before = await client.get_task(GetTaskRequest(id=first.id))
            events = [e async for e in client.subscribe(SubscribeToTaskRequest(id=first.id))]
            after = await client.get_task(GetTaskRequest(id=first.id))
        await thread.handle.cancel()
    assert TaskState.Name(before.status.state) == "TASK_STATE_WORKING", before
    assert events and events[0].WhichOneof("payload") == "task"  # the task, then its events
    last = events[-1]
    assert last.WhichOneof("payload") in ("status_update", "task"), last
    assert TaskState.Name(after.status.state) == "TASK_STATE_COMPLETED", after
    assert [get_artifact_text(a) for a in after.artifacts] == ["12 apples in stock"]


class _Caller(User):
    def __init__(self, name: str) -> None:
        self._name = name

    @property
    def is_authenticated(self) -> bool:
        return True

    @property
    def user_name(self) -> str:
        return self._name


async def test_the_store_keeps_each_caller_s_newest_ended_tasks(tmp_path: Path) -> None:
    """With 2 kept: ann's third ended task deletes her oldest; a task still working, and
    bob's, stay; a caller reads only its own."""
    tasks = StoredTasks(async_engine(f"sqlite:///{tmp_path / 'store.db'}"), 2)
    ann, bob = (ServerCallContext(user=_Caller(n)) for n in ("ann", "bob"))

    def task(name: str, state: TaskState, second: int) -> Task:
        made = Task(id=name, context_id="orga-" + "0" * 31, status=TaskStatus(state=state))
        made.status.timestamp.FromDatetime(datetime(2026, 12, 7, 0, 0, second))
        return made

    done, working = TaskState.TASK_STATE_COMPLETED, TaskState.TASK_STATE_WORKING
    await tasks.save(task("bob-1", done, 0), bob)
    await tasks.save(task("ann-busy", working, 1), ann)
    for second in (2, 3, 4):
        await tasks.save(task(f"ann-{second}", done, second), ann)
    kept = {name: await tasks.get(name, ann) is not None for name in ("ann-2", "ann-3", "ann-4")}
    assert kept == {"ann-2": False, "ann-3": True, "ann-4": True}
    assert await tasks.get("ann-busy", ann) is not None
    assert await tasks.get("bob-1", bob) is not None
    assert await tasks.get("bob-1", ann) is None  # not hers
    await tasks.engine.dispose()

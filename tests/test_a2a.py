"""The A2A endpoint, first part (issue 68), with real parts: ``a2a-sdk``'s own client over HTTP
on 127.0.0.1 against ``orga api --a2a``'s app, threads on the dev server. A caller reads the
agent card, has a turn answered and a second one with everything before it; a gated call
makes the task input-required until a person approves on orga's side; a caller without a token
is refused, and another caller's context is not theirs. The same, streamed, with
``@a2a-js/sdk`` run by Node."""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import A2ACardResolver, A2AClientError, ClientConfig, ClientFactory
from a2a.helpers import get_artifact_text, get_data_parts, new_text_part
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Role,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    TaskState,
)
from a2a.utils.errors import TaskNotFoundError
from google.protobuf.json_format import MessageToDict

import orga
from orga.contracts.config import LoopConfig
from orga.contracts.journal import MessageReceived
from orga.scripted.server import Turn
from orga.tools.sdk import Tool
from orga.web import a2a as a2a_endpoint
from orga.web.a2a import A2A_PREFIX
from orga.web.a2a_threads import STREAM_KEY
from orga.web.agui import AguiLimits, AguiOptions, agui_app
from tests.harness import Harness
from tests.helpers import (
    A2A_CLIENT,
    a2a_client,
    agents_endpoint,
    asgi_server,
    callers_for,
    eventually,
)
from tests.sample_tools import running, transfer

pytestmark = pytest.mark.timeout(120)


@asynccontextmanager
async def _endpoint(
    harness: Harness,
    model: str,
    tool: Tool = transfer,
    limits: AguiLimits | None = None,
    **config: Any,
) -> AsyncIterator[tuple[str, dict[str, str]]]:
    """``orga api --a2a``'s app for ann and bob, its threads on ``model`` with ``tool``,
    served on 127.0.0.1: its A2A base URL and each caller's token."""
    tokens, callers = callers_for("ann", "bob")
    options = AguiOptions(
        task_queue=harness.task_queue,
        config=LoopConfig(model=model, tools=[tool.name], **config),
        limits=limits or AguiLimits(),
    )
    app = agui_app(harness.client, callers, options, a2a="shop")
    async with harness.worker(tools=[tool]), asgi_server(app) as base:
        yield f"{base}/a2a", tokens


@asynccontextmanager
async def _caller(base: str, token: str | None, *, streaming: bool) -> AsyncIterator[Any]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx.AsyncClient(headers=headers, timeout=60) as http:
        card = await A2ACardResolver(http, base).get_agent_card()
        yield ClientFactory(ClientConfig(httpx_client=http, streaming=streaming)).create(card)


def _message(text: str, context_id: str | None = None) -> SendMessageRequest:
    message = Message(role=Role.ROLE_USER, message_id=uuid.uuid4().hex, parts=[new_text_part(text)])
    if context_id is not None:
        message.context_id = context_id
    return SendMessageRequest(message=message)


async def _task(client: Any, request: SendMessageRequest) -> Task:
    """The task a blocking ``SendMessage`` returns."""
    tasks = [answer.task async for answer in client.send_message(request)]
    assert len(tasks) == 1, tasks
    return tasks[0]


def _state(task: Task) -> str:
    return TaskState.Name(task.status.state)


async def test_a_caller_reads_the_card_and_each_message_is_a_turn_of_its_thread(
    harness: Harness,
) -> None:
    model = harness.new_model([Turn(text="4"), Turn(text="8")])
    async with _endpoint(harness, model) as (base, tokens):
        async with httpx.AsyncClient() as http:
            card = await A2ACardResolver(http, base).get_agent_card()
        assert card.name == "shop"
        assert card.supported_interfaces[0].url == f"{base}/"
        assert "bearer" in card.security_schemes and [s.id for s in card.skills] == ["transfer"]
        async with _caller(base, tokens["ann"], streaming=False) as client:
            first = await _task(client, _message("2+2?"))
            second = await _task(client, _message("times 2?", first.context_id))
        thread = orga.loop(harness.client, f"{A2A_PREFIX}{first.context_id}")
        harness.handles.append(thread.handle)
        state = await thread.state()
        journal = await thread.journal()
        await thread.handle.cancel()
    assert (_state(first), [get_artifact_text(a) for a in first.artifacts]) == (
        "TASK_STATE_COMPLETED",
        ["4"],
    )
    assert (_state(second), [get_artifact_text(a) for a in second.artifacts]) == (
        "TASK_STATE_COMPLETED",
        ["8"],
    )
    assert second.context_id == first.context_id
    assert state.principal is not None and state.principal.user == "ann"
    said = [e.text for e in journal.entries if isinstance(e, MessageReceived)]
    assert said == ["times 2?"]  # the first was the thread's task
    sent = harness.model.requests_for(model)[-1]
    assert "2+2?" in str(sent.body) and "times 2?" in str(sent.body)  # everything before it


async def test_a_gated_call_makes_the_task_input_required_until_a_person_decides(
    harness: Harness,
) -> None:
    model = harness.new_model(
        [Turn(tool_calls=[("transfer", {"amount": 12, "to": "eve"})]), Turn(text="sent")]
    )
    async with _endpoint(harness, model) as (base, tokens):
        seen: list[str] = []
        answer = ""
        async with _caller(base, tokens["ann"], streaming=True) as client:
            context = ""
            async for event in client.send_message(_message("pay eve 12")):
                kind = event.WhichOneof("payload")
                if kind == "task":
                    context = event.task.context_id
                if kind == "artifact_update":
                    answer += get_artifact_text(event.artifact_update.artifact)
                if kind != "status_update":
                    continue
                state = TaskState.Name(event.status_update.status.state)
                seen.append(state)
                if state == "TASK_STATE_INPUT_REQUIRED":  # a person decides, on orga's side
                    loop = orga.loop(harness.client, f"{A2A_PREFIX}{context}")
                    harness.handles.append(loop.handle)
                    waiting = (await loop.state()).pending_approvals
                    await loop.approve(waiting[0].call_id, approver="kim", reason="ok")
        await orga.loop(harness.client, f"{A2A_PREFIX}{context}").handle.cancel()
    assert "TASK_STATE_INPUT_REQUIRED" in seen and seen[-1] == "TASK_STATE_COMPLETED", seen
    assert seen.index("TASK_STATE_INPUT_REQUIRED") < len(seen) - 1
    assert answer == "sent"  # the turn's answer, after the person approved


async def test_a_streaming_caller_reads_the_model_s_text_as_it_comes_on_each_turn(
    harness: Harness,
) -> None:
    """Each piece of the model's text is a working status update (``orga.stream``), before
    the answer: on the first turn of a context, and on the next (from the stream's offset,
    not the first turn's text again)."""
    model = harness.new_model(
        [Turn(text="Four, as two and two.", piece_delay=0.05), Turn(text="Eight, twice four.")]
    )
    async with _endpoint(harness, model) as (base, tokens):
        turns: list[tuple[list[str], str]] = []
        context: str | None = None
        async with _caller(base, tokens["ann"], streaming=True) as client:
            for asked in ("2+2?", "times 2?"):
                pieces: list[str] = []
                answer = ""
                async for event in client.send_message(_message(asked, context)):
                    kind = event.WhichOneof("payload")
                    if kind == "task":
                        context = event.task.context_id
                    if kind == "artifact_update":
                        answer += get_artifact_text(event.artifact_update.artifact)
                    if kind == "status_update" and answer == "":
                        said = event.status_update.status.message
                        if STREAM_KEY in MessageToDict(said.metadata):
                            pieces.append("".join(p.text for p in said.parts))
                turns.append((pieces, answer))
        await orga.loop(harness.client, f"{A2A_PREFIX}{context}").handle.cancel()
        harness.handles.append(orga.loop(harness.client, f"{A2A_PREFIX}{context}").handle)
    (first, first_answer), (second, second_answer) = turns
    assert first_answer == "Four, as two and two." and len(first) > 1, first
    assert "".join(first) == first_answer
    assert "".join(second) == second_answer == "Eight, twice four."


async def test_no_token_no_task_and_another_caller_s_context_is_none_of_theirs(
    harness: Harness,
) -> None:
    """Without a token: 401. Bob's message into ann's context fails as if it did not exist,
    and her task is not found for him; a body over ``AguiLimits.body_bytes``: 413; a Host
    the endpoint does not serve (DNS rebinding, a card pointing elsewhere): 403."""
    model = harness.new_model([Turn(text="hello ann"), Turn(text="must not be asked")])
    async with _endpoint(harness, model) as (base, tokens):
        with pytest.raises(A2AClientError, match="401"):
            async with _caller(base, None, streaming=False) as anonymous:
                await _task(anonymous, _message("hi"))
        async with _caller(base, tokens["ann"], streaming=False) as ann:
            hers = await _task(ann, _message("hi"))
        async with _caller(base, tokens["bob"], streaming=False) as bob:
            refused = await _task(bob, _message("what did she say?", hers.context_id))
            with pytest.raises(TaskNotFoundError):  # her task is none of his
                await bob.get_task(GetTaskRequest(id=hers.id))
        async with httpx.AsyncClient(timeout=60) as http:
            elsewhere = await http.get(
                f"{base}/.well-known/agent-card.json", headers={"Host": "evil.example"}
            )
            flood = await http.post(
                f"{base}/", content=b"x" * (3 * 1024 * 1024),
                headers={"Authorization": f"Bearer {tokens['ann']}", "A2A-Version": "1.0"},
            )  # fmt: skip

        async def one_request() -> bool:
            return len(harness.model.requests_for(model)) == 1

        await eventually(one_request, "ann's one turn")
        thread = orga.loop(harness.client, f"{A2A_PREFIX}{hers.context_id}")
        harness.handles.append(thread.handle)
        journal = await thread.journal()
        await thread.handle.cancel()
    assert _state(hers) == "TASK_STATE_COMPLETED"
    assert _state(refused) == "TASK_STATE_FAILED", refused
    assert "no such thread" in str(refused.status.message), refused
    assert not [e for e in journal.entries if isinstance(e, MessageReceived)]
    assert flood.status_code == 413, flood.text
    assert elsewhere.status_code == 403, elsewhere.text  # a card naming another Host's URL


async def test_a2a_js_streams_a_turn_that_waits_for_a_person_and_is_refused_without_a_token(
    harness: Harness,
) -> None:
    """``@a2a-js/sdk`` (Node, as another agent uses it) streams a turn: working, then
    input-required while the transfer waits, then completed with the answer once a person
    approved on orga's side; without a token its request is refused."""
    node = await a2a_client()
    model = harness.new_model(
        [Turn(tool_calls=[("transfer", {"amount": 12, "to": "eve"})]), Turn(text="sent 12")]
    )
    context = uuid.uuid4().hex
    async with _endpoint(harness, model) as (base, tokens):
        url = f"{base}/"  # the JS resolver reads the card relative to it
        streaming = await asyncio.create_subprocess_exec(
            node, "drive.mjs", url, "--stream", "--context", context, "pay eve 12",
            cwd=A2A_CLIENT, env={**os.environ, "A2A_TOKEN": tokens["ann"]},
            stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        assert streaming.stdout is not None
        while True:  # each state as the client sees it; a person decides on orga's side
            line = json.loads(await asyncio.wait_for(streaming.stdout.readline(), 90))
            if line.get("state") != "TASK_STATE_INPUT_REQUIRED":
                if "state" in line and "states" not in line:
                    continue
                break
            loop = orga.loop(harness.client, f"{A2A_PREFIX}{context}")
            harness.handles.append(loop.handle)
            [waiting] = (await loop.state()).pending_approvals
            await loop.approve(waiting.call_id, approver="kim", reason="ok")
        said = line
        code = await asyncio.wait_for(streaming.wait(), 30)
        anonymous = await asyncio.create_subprocess_exec(
            node, "drive.mjs", url, "hi", cwd=A2A_CLIENT, env={**os.environ, "A2A_TOKEN": ""},
            stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, _ = await asyncio.wait_for(anonymous.communicate(), 60)
        refused_code, refused = anonymous.returncode, json.loads(out.decode().splitlines()[-1])
        await orga.loop(harness.client, f"{A2A_PREFIX}{context}").handle.cancel()
    assert code == 0, said
    states = said["states"]
    assert "TASK_STATE_INPUT_REQUIRED" in states and states[-1] == "TASK_STATE_COMPLETED", said
    assert states.index("TASK_STATE_WORKING") < states.index("TASK_STATE_INPUT_REQUIRED")
    assert (said["text"], said["contextId"]) == ("sent 12", context)
    assert refused_code == 1 and "401" in refused["error"], refused


async def test_cancel_task_stops_the_running_tool(harness: Harness) -> None:
    """``CancelTask`` while the turn's tool works: the task is canceled, the thread is
    cancelled, and the tool is told to stop (Temporal's cancel reaches it through its
    heartbeats)."""
    work = running("reindex")
    model = harness.new_model([Turn(tool_calls=[("reindex", {"table": "orders"})])])
    async with _endpoint(harness, model, work.tool) as (base, tokens):
        async with _caller(base, tokens["ann"], streaming=True) as client:
            events = client.send_message(_message("reindex the orders"))
            first = await anext(events)
            task = first.task
            await asyncio.wait_for(work.started.wait(), 60)
            async with _caller(base, tokens["ann"], streaming=False) as other:
                canceled = await other.cancel_task(CancelTaskRequest(id=task.id))
            await events.aclose()
        thread = orga.loop(harness.client, f"{A2A_PREFIX}{task.context_id}")
        harness.handles.append(thread.handle)

        async def closed() -> bool:
            found = await thread.handle.describe()
            return found.status is not None and found.status.name == "CANCELED"

        await eventually(closed, "the thread is cancelled")
        await asyncio.wait_for(work.stopped.wait(), 10)  # its own timeout is 30 s
    assert _state(canceled) == "TASK_STATE_CANCELED", canceled
    assert len(work.calls) == 1


async def test_a_caller_holds_at_most_its_streams_open(harness: Harness) -> None:
    """With ``streams_per_caller=1``: while ann's stream is open (its transfer waits for a
    person), her next request is refused 429 — bob's is not; once it ended, hers goes."""
    model = harness.new_model(
        [
            Turn(tool_calls=[("transfer", {"amount": 12, "to": "eve"})]),
            Turn(text="sent"),
            Turn(text="hi bob"),
            Turn(text="hi again"),
        ]
    )
    limits = AguiLimits(streams_per_caller=1)
    async with _endpoint(harness, model, limits=limits) as (base, tokens):
        async with _caller(base, tokens["ann"], streaming=True) as ann:
            events = ann.send_message(_message("pay eve 12"))
            context = ""
            async for event in events:
                status = event.status_update.status.state if event.HasField("status_update") else 0
                if status == TaskState.TASK_STATE_INPUT_REQUIRED:
                    context = event.status_update.context_id
                    break
            with pytest.raises(A2AClientError, match="429"):
                async with _caller(base, tokens["ann"], streaming=False) as again:
                    await _task(again, _message("and another"))
            async with _caller(base, tokens["bob"], streaming=False) as bob:
                other = await _task(bob, _message("hello"))
            loop = orga.loop(harness.client, f"{A2A_PREFIX}{context}")
            harness.handles.append(loop.handle)
            [waiting] = (await loop.state()).pending_approvals
            await loop.approve(waiting.call_id, approver="kim", reason="ok")
            async for _ in events:  # to its end
                pass
        async with _caller(base, tokens["ann"], streaming=False) as later:
            after = await _task(later, _message("hello again", context))
        bobs = orga.loop(harness.client, f"{A2A_PREFIX}{other.context_id}")
        harness.handles.append(bobs.handle)
        await bobs.handle.cancel()
        await loop.handle.cancel()
    assert _state(other) == "TASK_STATE_COMPLETED"
    assert _state(after) == "TASK_STATE_COMPLETED"


async def test_a_typed_answer_comes_as_text_and_as_data(harness: Harness) -> None:
    """A thread with an ``output_schema``: the task's artifact holds the answer as written and
    its value as a data part, for an agent that reads data."""
    schema = {"type": "object", "properties": {"sum": {"type": "integer"}}, "required": ["sum"]}
    model = harness.new_model([Turn(text='{"sum": 5}')])
    async with _endpoint(harness, model, output_schema=schema) as (base, tokens):
        async with _caller(base, tokens["ann"], streaming=False) as client:
            task = await _task(client, _message("2+3 as JSON"))
        thread = orga.loop(harness.client, f"{A2A_PREFIX}{task.context_id}")
        harness.handles.append(thread.handle)
        await thread.handle.cancel()
    [artifact] = task.artifacts
    assert get_artifact_text(artifact) == '{"sum": 5}'
    assert get_data_parts(artifact.parts) == [{"sum": 5}]


async def test_a_client_that_left_resubscribes_and_sees_the_task_end(harness: Harness) -> None:
    """A streaming client leaves while the transfer waits for a person; it subscribes to the
    task again (``SubscribeToTask``), the person approves, and it sees the task complete with
    the answer."""
    model = harness.new_model(
        [Turn(tool_calls=[("transfer", {"amount": 12, "to": "eve"})]), Turn(text="sent")]
    )
    async with _endpoint(harness, model) as (base, tokens):
        async with _caller(base, tokens["ann"], streaming=True) as client:
            events = client.send_message(_message("pay eve 12"))
            async for event in events:
                if event.HasField("status_update") and (
                    event.status_update.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
                ):
                    task_id, context = event.status_update.task_id, event.status_update.context_id
                    break
            else:
                raise AssertionError("the stream ended before the task asked for input")
            await events.aclose()  # the client leaves
        async with _caller(base, tokens["ann"], streaming=True) as again:
            states: list[str] = []
            text = ""
            subscribed = again.subscribe(SubscribeToTaskRequest(id=task_id))
            first = await anext(subscribed)
            loop = orga.loop(harness.client, f"{A2A_PREFIX}{context}")
            harness.handles.append(loop.handle)
            [waiting] = (await loop.state()).pending_approvals
            await loop.approve(waiting.call_id, approver="kim", reason="ok")
            async for event in subscribed:
                if event.HasField("status_update"):
                    states.append(TaskState.Name(event.status_update.status.state))
                if event.HasField("artifact_update"):
                    text += get_artifact_text(event.artifact_update.artifact)
        await loop.handle.cancel()
    assert first.HasField("task") and _state(first.task) == "TASK_STATE_INPUT_REQUIRED", first
    assert states[-1] == "TASK_STATE_COMPLETED" and text == "sent", (states, text)


async def test_the_endpoint_keeps_a_bounded_number_of_ended_tasks_per_caller(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ``ENDED_KEPT`` 2: after three answered tasks of ann's, the oldest is no longer
    found (its thread still holds the turn), the newest are; bob's are his own count."""
    monkeypatch.setattr(a2a_endpoint, "ENDED_KEPT", 2)
    model = harness.new_model([Turn(text=f"answer {n}") for n in range(4)])
    async with _endpoint(harness, model) as (base, tokens):
        async with _caller(base, tokens["ann"], streaming=False) as ann:
            first = await _task(ann, _message("one"))
            for text in ("two", "three"):
                last = await _task(ann, _message(text, first.context_id))
            with pytest.raises(TaskNotFoundError):
                await ann.get_task(GetTaskRequest(id=first.id))
            kept = await ann.get_task(GetTaskRequest(id=last.id))
        async with _caller(base, tokens["bob"], streaming=False) as bob:
            his = await _task(bob, _message("hello"))
            found = await bob.get_task(GetTaskRequest(id=his.id))
        for context in (first.context_id, his.context_id):
            thread = orga.loop(harness.client, f"{A2A_PREFIX}{context}")
            harness.handles.append(thread.handle)
            await thread.handle.cancel()
    assert _state(kept) == "TASK_STATE_COMPLETED" and _state(found) == "TASK_STATE_COMPLETED"


async def test_each_agent_of_the_agents_file_has_a_card_and_threads_of_its_own(
    harness: Harness, tmp_path: Path
) -> None:
    """With an agents file, ``/a2a/<agent>`` serves each local agent: its card (its
    description, a skill per tool glob), its threads run as it — one caller's context of the
    same id at two agents is two threads. An agent that runs elsewhere is not served."""
    model = harness.new_model([Turn(text="from shop"), Turn(text="from helper")])
    agents = tmp_path / "agents.toml"
    agents.write_text(
        f"""
[agents.shop]
description = "Sells and refunds"
tools = ["transfer"]
model = "{model}"

[agents.helper]
description = "Answers questions"
model = "{model}"

[agents.pricing]
a2a = "https://pricing.example/a2a/"
"""
    )
    context = f"c-{uuid.uuid4().hex[:8]}"
    async with agents_endpoint(harness, agents, transfer) as (base, token):
        async with httpx.AsyncClient() as http:
            cards = {
                name: await A2ACardResolver(http, f"{base}/a2a/{name}").get_agent_card()
                for name in ("shop", "helper")
            }
            elsewhere = await http.get(f"{base}/a2a/pricing/.well-known/agent-card.json")
        answers = {}
        for name in ("shop", "helper"):
            async with _caller(f"{base}/a2a/{name}", token, streaming=False) as client:
                answers[name] = await _task(client, _message("who are you?", context))
        states = {}
        for name in ("shop", "helper"):
            thread = orga.loop(harness.client, f"{A2A_PREFIX}{name}/{context}")
            harness.handles.append(thread.handle)
            states[name] = await thread.state()
            await thread.handle.cancel()
    assert cards["shop"].name == "shop" and cards["shop"].description.startswith("Sells")
    assert [s.id for s in cards["shop"].skills] == ["transfer"]
    assert cards["shop"].supported_interfaces[0].url == f"{base}/a2a/shop/"
    assert [s.id for s in cards["helper"].skills] == ["answer"]
    assert elsewhere.status_code == 404
    assert {n: [get_artifact_text(a) for a in t.artifacts] for n, t in answers.items()} == {
        "shop": ["from shop"],
        "helper": ["from helper"],
    }
    assert {n: s.agent_id for n, s in states.items()} == {"shop": "shop", "helper": "helper"}

"""A remote A2A agent as a delegate (issue 68), with real parts: a second orga deployment —
its own worker and task queue on the same dev server, its ``orga api --a2a`` app served over
HTTP on 127.0.0.1 — is an agent of the first's agents file (``a2a = "http://…"``). A loop of
the first delegates to it: its answer is the call's result, the cost it reports is on the
parent's books and its principal's ledger, and the call's egress is the worker's rules. A
remote failure is a typed error the model reads."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import signal
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import WorkflowFailureError, WorkflowHandle
from temporalio.exceptions import CancelledError
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment

import orga
from orga.activities.principals import SpendGuard
from orga.activities.remote_agents import ANSWER_BYTES, RemoteAgents
from orga.cli.views import render_state
from orga.contracts.config import LoopConfig, LoopInput
from orga.contracts.conversation import Message
from orga.contracts.errors import InvalidConfig
from orga.contracts.journal import (
    CallReceipt,
    DelegationFinished,
    DelegationStarted,
    Journal,
    MessageReceived,
)
from orga.contracts.principals import PrincipalClaim
from orga.contracts.state import LoopResult, LoopState
from orga.desk.inbox import inbox
from orga.runtime.settings import Settings
from orga.runtime.spend import SpendLedger
from orga.scripted.server import RecordedRequest, Turn
from orga.tools.sdk import Tool, tool
from orga.web.a2a import A2A_PREFIX
from orga.web.agui import AguiOptions, agui_app
from orga.web.callers import Callers, new_token
from orga.worker.agent_registry import AgentRegistry
from orga.worker.principals import PrincipalRegistry
from tests.harness import TEST_STORE, Harness, scripted_settings
from tests.helpers import asgi_server, eventually, host_env, worker_process
from tests.sample_tools import transfer

pytestmark = pytest.mark.timeout(120)

TOKEN_VARIABLE = "PRICING_A2A_TOKEN"


@dataclasses.dataclass
class Remote:
    """The second deployment: its A2A base URL, the token the first presents, its harness."""

    url: str
    token: str
    harness: Harness
    prices: list[str]
    """The items its ``price`` tool was asked for, each time it ran."""
    release: asyncio.Event
    """Set: ``price`` answers (else it waits)."""
    stopped: list[str]
    """The items whose ``price`` call was cancelled while it waited."""


def _price_tool(asked: list[str], release: asyncio.Event, stopped: list[str]) -> Tool:
    @tool(name="price")
    async def price(item: str) -> str:
        """The price of an item.

        Args:
            item: what to price.
        """
        asked.append(item)
        try:
            await release.wait()
        except asyncio.CancelledError:
            stopped.append(item)
            raise
        return f"{item}: 2 USD each"

    return price


@asynccontextmanager
async def remote_deployment(
    harness: Harness,
    model: str,
    *,
    held: bool = False,
    wrap: Callable[[Any], Any] = lambda app: app,
    gated: bool = False,
) -> AsyncIterator[Remote]:
    """The second deployment, its threads on ``model`` with ``price`` (``gated``: and
    ``transfer``, which waits for a person), served on 127.0.0.1."""
    other = dataclasses.replace(harness, task_queue=f"remote-{uuid.uuid4().hex[:10]}", handles=[])
    token, digest = new_token()
    asked: list[str] = []
    release = asyncio.Event()
    if not held:
        release.set()
    stopped: list[str] = []
    price = _price_tool(asked, release, stopped)
    tools = [price, transfer] if gated else [price]
    config = LoopConfig(model=model, tools=[t.name for t in tools])
    options = AguiOptions(task_queue=other.task_queue, config=config)
    app = agui_app(harness.client, Callers({digest: "first-deployment"}), options, a2a="pricing")
    async with other.worker(tools=tools), asgi_server(wrap(app)) as base:
        try:
            yield Remote(f"{base}/a2a/", token, other, asked, release, stopped)
        finally:  # its threads end with the test: none waits on in the shared namespace
            running = f"TaskQueue = '{other.task_queue}' AND ExecutionStatus = 'Running'"
            async for found in harness.client.list_workflows(running):
                with contextlib.suppress(RPCError):  # it ended meanwhile
                    await harness.client.get_workflow_handle(found.id).terminate("test ended")
    harness.handles.extend(other.handles)


def first_agents(tmp_path: Path, remote_url: str, lead_model: str) -> Path:
    path = tmp_path / "agents.toml"
    path.write_text(
        f"""
[agents.lead]
description = "Plans the shopping"
delegates = ["pricing"]
model = "{lead_model}"

[agents.pricing]
description = "Prices a basket of goods"
a2a = "{remote_url}"
a2a_token_env = "{TOKEN_VARIABLE}"
timeout = "PT1M"
"""
    )
    return path


def first_settings(
    harness: Harness, remote: Remote, agents: Path, monkeypatch: pytest.MonkeyPatch
) -> Settings:
    """The first deployment's worker: its agents file, the second's address allowed by its
    egress rules, the token to present in its environment."""
    monkeypatch.setenv(TOKEN_VARIABLE, remote.token)
    return scripted_settings(harness.model, agents_file=agents, egress_allow=["127.0.0.1"])


async def start_lead(
    harness: Harness, user: str, asked: str = "What do 3 apples cost?"
) -> WorkflowHandle[Any, LoopResult]:
    handle = await harness.client.start_workflow(
        "ReasoningLoop",
        LoopInput(
            messages=[Message(role="user", content=asked)],
            config=LoopConfig(agent_id="lead"),
            principal=PrincipalClaim(user=user),
        ),
        id=f"lead-{uuid.uuid4().hex[:12]}",
        task_queue=harness.task_queue,
        result_type=LoopResult,
    )
    harness.handles.append(handle)
    return handle


def _lead_model(harness: Harness) -> str:
    return harness.new_model(
        [
            Turn(
                tool_calls=[("delegate", {"agent": "pricing", "task": "Price 3 apples."})],
                input_tokens=100,
                output_tokens=20,
            ),
            Turn(text="3 apples cost 6 USD", input_tokens=300, output_tokens=30),
        ]
    )


def _remote_model(harness: Harness) -> str:
    return harness.new_model(
        [
            Turn(tool_calls=[("price", {"item": "apple"})], input_tokens=500, output_tokens=40),
            Turn(text="apple: 2 USD each, so 6 USD", input_tokens=600, output_tokens=60),
        ]
    )


async def test_a_loop_delegates_to_another_deployments_a2a_agent_and_pays_what_it_reports(
    harness: Harness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lead = _lead_model(harness)
    user = f"ann-{uuid.uuid4().hex[:8]}"
    async with remote_deployment(harness, _remote_model(harness)) as remote:
        settings = first_settings(
            harness, remote, first_agents(tmp_path, remote.url, lead), monkeypatch
        )
        async with harness.worker(settings=settings):
            handle = await start_lead(harness, user)
            result = await handle.result()
            state = await handle.query("state", result_type=LoopState)
            journal = await handle.query("journal", result_type=Journal)
            [delegation] = state.delegations
            context = delegation.workflow_id.removeprefix("a2a:")
            thread = remote.harness.client.get_workflow_handle(f"{A2A_PREFIX}{context}")
            remote.harness.handles.append(thread)
            remote_state = await thread.query("state", result_type=LoopState)
            await thread.cancel()
    assert result.output == "3 apples cost 6 USD"
    # The model read the remote's answer as the call's result.
    second = harness.model.requests_for(lead)[1]
    assert second.tool_result_texts() == ["apple: 2 USD each, so 6 USD"]
    assert remote.prices == ["apple"]  # its own tool, there, once
    # What the remote reported is on the parent's books: its own 450 tokens and the remote's.
    assert remote_state.usage.total_tokens == 540 + 660
    assert delegation.status == "completed"
    assert delegation.usage.total_tokens == 540 + 660
    assert result.usage.total_tokens == 120 + 330 + 540 + 660
    [finished] = [e for e in journal.entries if isinstance(e, DelegationFinished)]
    assert (finished.status, finished.error) == ("completed", None)
    # ... and on its principal's ledger, beside the parent's own calls.
    [line] = SpendLedger(TEST_STORE).lines("day", scope="user", name=user)
    assert line.spent_tokens == 120 + 330 + 540 + 660
    assert line.reserved_tokens == 0
    receipts = [(e.tool, e.outcome) for e in journal.entries if isinstance(e, CallReceipt)]
    assert receipts == [("delegate", "delivered")]


def _pricing_model(harness: Harness) -> str:
    """The second deployment's model, for any number of threads: it prices the item the task
    names with its tool, then answers with what the tool said."""

    def answer(request: RecordedRequest) -> Turn:
        if request.tool_results():
            return Turn(text=f"{request.tool_result_texts()[0]}, so 3 cost 6 USD")
        item = "pear" if "pears" in request.first_user_text() else "apple"
        return Turn(tool_calls=[("price", {"item": item})])

    return harness.new_model([answer] * 8)


class _HeldReplies:
    """An ASGI wrapper that holds the reply to a ``SendMessage`` whose body holds ``marker``
    until ``release`` is set: the endpoint has the task, its caller does not know it yet."""

    def __init__(self, app: Any, marker: bytes, release: asyncio.Event) -> None:
        self._app, self._marker, self._release = app, marker, release

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            return await self._app(scope, receive, send)
        body = b""
        more = True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        held = b"SendMessage" in body and self._marker in body
        replayed = False

        async def again() -> dict[str, Any]:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        async def reply(message: Any) -> None:
            if held and message["type"] == "http.response.start":
                await self._release.wait()
            await send(message)

        await self._app(scope, again, reply)


async def _recorded(harness: Harness, handle: WorkflowHandle[Any, Any], key: str) -> dict[str, str]:
    """What the loop's pending remote delegation has recorded (its heartbeat details), once
    it recorded ``key``."""

    async def probe() -> dict[str, str] | None:
        pending = (await handle.describe()).raw_description.pending_activities
        for activity in pending:
            if activity.activity_type.name == "delegate_remote" and activity.HasField(
                "heartbeat_details"
            ):
                decoded = await harness.client.data_converter.decode(
                    activity.heartbeat_details.payloads
                )
                said = decoded[-1] if decoded else {}
                return said if key in said else None
        return None

    return await eventually(probe, f"{handle.id} recorded its {key}")


async def _messages_taken(remote: Remote, journal: Journal) -> int:
    """How many messages the remote thread of the journal's delegation took."""
    [started] = [e for e in journal.entries if isinstance(e, DelegationStarted)]
    thread_id = f"{A2A_PREFIX}{started.workflow_id.removeprefix('a2a:')}"
    thread = remote.harness.client.get_workflow_handle(thread_id)
    remote.harness.handles.append(thread)
    entries = (await thread.query("journal", result_type=Journal)).entries
    await thread.cancel()
    return 1 + sum(isinstance(e, MessageReceived) for e in entries)


async def test_a_worker_killed_during_remote_calls_settles_each_once_by_asking_the_remote(
    env: WorkflowEnvironment, harness: Harness, tmp_path: Path
) -> None:
    """Two loops delegate and their worker is SIGKILLed: one call had the remote task's id
    (the next attempt asks for that task), the other had sent the task but not heard back
    (the next asks for the tasks of its context). Each is followed, none sent twice."""

    def lead(request: RecordedRequest) -> Turn:
        if request.tool_results():
            return Turn(text=f"answer: {' '.join(request.tool_result_texts())}")
        fruit = "pears" if "pears" in request.first_user_text() else "apples"
        return Turn(tool_calls=[("delegate", {"agent": "pricing", "task": f"Price 3 {fruit}."})])

    lead_model = harness.new_model([lead] * 4)
    replies = asyncio.Event()
    wrap = functools.partial(_HeldReplies, marker=b"pears", release=replies)
    async with remote_deployment(harness, _pricing_model(harness), held=True, wrap=wrap) as remote:
        worker = host_env(
            env, harness, "worker", tmp_path, TEST_STORE.url,
            ORGA_AGENTS=str(first_agents(tmp_path, remote.url, lead_model)),
            ORGA_EGRESS_ALLOW="127.0.0.1", **{TOKEN_VARIABLE: remote.token},
        )  # fmt: skip
        async with worker_process(worker) as first:
            apples = await start_lead(harness, "ann", "What do 3 apples cost?")
            pears = await start_lead(harness, "ann", "What do 3 pears cost?")
            await eventually(lambda: sorted(remote.prices) == ["apple", "pear"], "both priced")
            apples_said = await _recorded(harness, apples, "task")
            pears_said = await _recorded(harness, pears, "context")
            first.send_signal(signal.SIGKILL)
            await first.wait()
        replies.set()  # to a caller that is gone
        remote.release.set()  # both remote tasks complete, their caller away
        async with worker_process(worker):
            apples_result = await apples.result()
            pears_result = await pears.result()
            journals = [await h.query("journal", result_type=Journal) for h in (apples, pears)]
        messages = [await _messages_taken(remote, journal) for journal in journals]
    assert "task" in apples_said and "context" in apples_said
    assert "task" not in pears_said and "context" in pears_said
    assert sorted(remote.prices) == ["apple", "pear"]  # each remote task ran once
    for result, item in ((apples_result, "apple"), (pears_result, "pear")):
        assert result.output.startswith("answer: [an earlier attempt of this delegation was lost")
        assert f"{item}: 2 USD each, so 3 cost 6 USD" in result.output
    for journal in journals:
        receipts = [(e.tool, e.outcome) for e in journal.entries if isinstance(e, CallReceipt)]
        assert receipts == [("delegate", "unknown"), ("delegate", "delivered")]
    assert messages == [1, 1]  # each remote thread was sent its task once


async def test_a_remote_that_fails_refuses_or_is_out_of_bounds_is_an_error_the_model_reads(
    harness: Harness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One turn delegates four ways: a task the remote completes, one its model fails, one
    with a token the endpoint refuses, one to an address the egress rules do not allow."""
    calls = [
        ("pricing", "Price 3 apples."),
        ("pricing", "Price 3 pears, please fail."),
        ("forged", "Price 3 apples."),
        ("blocked", "Price 3 apples."),
    ]
    lead = harness.new_model(
        [
            Turn(tool_calls=[("delegate", {"agent": a, "task": t}) for a, t in calls]),
            Turn(text="done"),
        ]
    )

    def remote_model(request: RecordedRequest) -> Turn:
        if "fail" in request.first_user_text():
            return Turn(text="?", stop="content_filter")  # no stop reason orga routes on
        return Turn(text="apple: 2 USD each")

    async with remote_deployment(harness, harness.new_model([remote_model] * 4)) as remote:
        port = remote.url.split(":")[2].split("/")[0]
        agents = first_agents(tmp_path, remote.url, lead)
        agents.write_text(
            agents.read_text().replace(
                'delegates = ["pricing"]', 'delegates = ["pricing", "forged", "blocked"]'
            )
            + f"""
[agents.forged]
a2a = "{remote.url}"
a2a_token_env = "FORGED_A2A_TOKEN"

[agents.blocked]
a2a = "http://127.0.0.2:{port}/a2a/"
"""
        )
        monkeypatch.setenv("FORGED_A2A_TOKEN", "not-a-token-it-issued")
        settings = first_settings(harness, remote, agents, monkeypatch)
        async with harness.worker(settings=settings):
            handle = await start_lead(harness, f"ann-{uuid.uuid4().hex[:8]}")
            result = await handle.result()
            state = await handle.query("state", result_type=LoopState)
            as_remote = await harness.start("Price 3 apples.", agent_id="pricing")
            with pytest.raises(WorkflowFailureError) as refused:
                await as_remote.result()
    said = _messages(refused.value)  # no loop runs as a remote agent
    assert "runs at the A2A endpoint" in said and "none runs as it here" in said, said
    assert result.output == "done"
    read = harness.model.requests_for(lead)[1].tool_result_texts()
    assert read[0] == "apple: 2 USD each"
    assert "RemoteAgentFailed" in read[1] and "the remote agent failed" in read[1], read[1]
    assert "RemoteAgentFailed" in read[2] and "HTTP 401" in read[2], read[2]
    assert "ToolPermissionError" in read[3] and "127.0.0.2" in read[3], read[3]
    assert sorted(d.status for d in state.delegations) == [
        "completed",
        "failed",
        "failed",
        "failed",
    ]
    assert remote.prices == []  # the remote model never called its tool
    assert "not-a-token-it-issued" not in str(state.model_dump())


async def test_a_cancelled_loop_and_a_remote_past_its_time_cancel_the_remote_task(
    harness: Harness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def lead(request: RecordedRequest) -> Turn:
        if request.tool_results():
            return Turn(text=f"answer: {' '.join(request.tool_result_texts())}")
        agent = "slow" if "pears" in request.first_user_text() else "pricing"
        fruit = "pears" if agent == "slow" else "apples"
        return Turn(tool_calls=[("delegate", {"agent": agent, "task": f"Price 3 {fruit}."})])

    lead_model = harness.new_model([lead] * 4)
    async with remote_deployment(harness, _pricing_model(harness), held=True) as remote:
        agents = first_agents(tmp_path, remote.url, lead_model)
        agents.write_text(
            agents.read_text().replace('delegates = ["pricing"]', 'delegates = ["pricing", "slow"]')
            + f"""
[agents.slow]
a2a = "{remote.url}"
a2a_token_env = "{TOKEN_VARIABLE}"
timeout = "PT3S"
"""
        )
        settings = first_settings(harness, remote, agents, monkeypatch)
        async with harness.worker(settings=settings):
            apples = await start_lead(harness, "ann", "What do 3 apples cost?")
            pears = await start_lead(harness, "ann", "What do 3 pears cost?")
            await eventually(lambda: sorted(remote.prices) == ["apple", "pear"], "both priced")
            await apples.cancel()
            with pytest.raises(WorkflowFailureError) as failure:
                await apples.result()
            timed_out = await pears.result()
            # Well within the remote tool's own 30 s timeout, which would stop it too.
            await eventually(
                lambda: sorted(remote.stopped) == ["apple", "pear"], "both stopped", timeout=10
            )
            journal = await apples.query("journal", result_type=Journal)
    assert isinstance(failure.value.cause, CancelledError)
    assert "RemoteAgentFailed" in timed_out.output and "within its time" in timed_out.output
    [finished] = [e for e in journal.entries if isinstance(e, DelegationFinished)]
    assert (finished.status, finished.error) == ("failed", "cancelled")


def _messages(error: BaseException | None) -> str:
    said: list[str] = []
    while error is not None:
        said.append(str(error))
        error = error.__cause__
    return " / ".join(said)


def test_an_agents_file_names_what_a_remote_agent_cannot_have_and_its_missing_token(
    tmp_path: Path,
) -> None:
    path = tmp_path / "agents.toml"
    path.write_text('[agents.pricing]\na2a = "http://127.0.0.1:9/a2a/"\ntools = ["web_fetch"]\n')
    with pytest.raises(InvalidConfig, match="tools cannot be set here"):
        AgentRegistry.load(path, frozenset({"default"}))
    path.write_text('[agents.pricing]\na2a = "file:///etc/passwd"\n')
    with pytest.raises(InvalidConfig, match="a2a"):
        AgentRegistry.load(path, frozenset({"default"}))
    path.write_text(
        f'[agents.pricing]\na2a = "http://127.0.0.1:9/a2a/"\na2a_token_env = "{TOKEN_VARIABLE}"\n'
    )
    agents = AgentRegistry.load(path, frozenset({"default"}))
    with pytest.raises(InvalidConfig, match=f"{TOKEN_VARIABLE}, which is not set"):
        RemoteAgents(
            agents,
            (),
            SpendGuard(PrincipalRegistry.load(Settings()), None),
            environ={},
        )


async def test_a_remote_task_that_waits_for_a_person_there_is_on_the_loop_s_state_and_desk(
    harness: Harness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The remote's transfer waits for a person at the remote: the loop says so (its status,
    the delegation's ``waiting``, the desk's inbox, ``orga state``) until they decide there."""
    lead = _lead_model(harness)
    remote_model = harness.new_model(
        [Turn(tool_calls=[("transfer", {"amount": 6, "to": "grocer"})]), Turn(text="paid 6 USD")]
    )
    async with remote_deployment(harness, remote_model, gated=True) as remote:
        settings = first_settings(
            harness, remote, first_agents(tmp_path, remote.url, lead), monkeypatch
        )
        async with harness.worker(settings=settings):
            handle = await start_lead(harness, "ann")

            async def waiting() -> LoopState | None:
                state = await handle.query("state", result_type=LoopState)
                return state if state.status == "awaiting_remote" else None

            state = await eventually(waiting, "the loop shows the remote's wait")
            items = [i for i in await inbox(harness.client) if i.workflow_id == handle.id]
            [delegation] = state.delegations
            context = delegation.workflow_id.removeprefix("a2a:")
            thread = orga.loop(remote.harness.client, f"{A2A_PREFIX}{context}")
            remote.harness.handles.append(thread.handle)
            [call] = (await thread.state()).pending_approvals  # a person there decides
            await thread.approve(call.call_id, approver="kim", reason="the grocer is ours")
            result = await handle.result()
            after = await handle.query("state", result_type=LoopState)
            await thread.handle.cancel()
    assert delegation.waiting is not None and "transfer" in delegation.waiting
    [item] = items
    assert item.kind == "remote" and "'pricing' waits for a person" in (item.reason or "")
    assert "waits for a person at the remote agent" in render_state(state)
    assert result.output == "3 apples cost 6 USD"
    assert after.delegations[0].waiting is None and after.delegations[0].status == "completed"


class _Padded:
    """An ASGI wrapper that answers every JSON-RPC request with ``pad`` bytes of whitespace
    after the JSON (still valid JSON): an endpoint that makes its caller read without end."""

    def __init__(self, app: Any, pad: int) -> None:
        self._app, self._pad = app, pad

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            return await self._app(scope, receive, send)
        started: dict[str, Any] = {}

        async def padded(message: Any) -> None:
            if message["type"] == "http.response.start":
                started.update(message)
                return
            if message["type"] == "http.response.body" and not message.get("more_body"):
                headers = [(k, v) for k, v in started["headers"] if k != b"content-length"]
                await send({**started, "headers": headers})
                await send({**message, "more_body": True})
                chunk = b" " * 65_536
                for _ in range(self._pad // len(chunk)):
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                return
            await send(message)

        await self._app(scope, receive, padded)


async def test_an_endpoint_that_answers_without_end_is_not_read_past_its_bound(
    harness: Harness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lead = _lead_model(harness)
    padded = functools.partial(_Padded, pad=ANSWER_BYTES + 1_000_000)
    async with remote_deployment(harness, _remote_model(harness), wrap=padded) as remote:
        settings = first_settings(
            harness, remote, first_agents(tmp_path, remote.url, lead), monkeypatch
        )
        async with harness.worker(settings=settings):
            result = await (await start_lead(harness, "ann")).result()
    [read] = harness.model.requests_for(lead)[1].tool_result_texts()
    assert "RemoteAgentFailed" in read and f"more than {ANSWER_BYTES} bytes" in read, read
    assert result.output == "3 apples cost 6 USD"

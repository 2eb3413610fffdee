"""A remote A2A agent as a delegate (issue 68), with real parts: a second orga deployment —
its own worker and task queue on the same dev server, its ``orga api --a2a`` app served over
HTTP on 127.0.0.1 — is an agent of the first's agents file (``a2a = "http://…"``). A loop of
the first delegates to it: its answer is the call's result, the cost it reports is on the
parent's books and its principal's ledger, and the call's egress is the worker's rules. A
remote failure is a typed error the model reads."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import WorkflowHandle

from orga.contracts.config import LoopConfig, LoopInput
from orga.contracts.conversation import Message
from orga.contracts.journal import CallReceipt, DelegationFinished, Journal
from orga.contracts.principals import PrincipalClaim
from orga.contracts.state import LoopResult, LoopState
from orga.runtime.spend import SpendLedger
from orga.scripted.server import Turn
from orga.tools.sdk import Tool, tool
from orga.web.a2a import A2A_PREFIX
from orga.web.agui import AguiOptions, agui_app
from orga.web.callers import Callers, new_token
from tests.harness import TEST_STORE, Harness, scripted_settings
from tests.helpers import asgi_server

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


def _price_tool(asked: list[str], release: asyncio.Event) -> Tool:
    @tool(name="price")
    async def price(item: str) -> str:
        """The price of an item.

        Args:
            item: what to price.
        """
        asked.append(item)
        await release.wait()
        return f"{item}: 2 USD each"

    return price


@asynccontextmanager
async def remote_deployment(
    harness: Harness, model: str, *, held: bool = False
) -> AsyncIterator[Remote]:
    """The second deployment, its threads on ``model`` with ``price``, served on 127.0.0.1."""
    other = dataclasses.replace(harness, task_queue=f"remote-{uuid.uuid4().hex[:10]}", handles=[])
    token, digest = new_token()
    asked: list[str] = []
    release = asyncio.Event()
    if not held:
        release.set()
    price = _price_tool(asked, release)
    options = AguiOptions(
        task_queue=other.task_queue, config=LoopConfig(model=model, tools=["price"])
    )
    app = agui_app(harness.client, Callers({digest: "first-deployment"}), options, a2a="pricing")
    async with other.worker(tools=[price]), asgi_server(app) as base:
        yield Remote(f"{base}/a2a/", token, other, asked, release)
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


async def start_lead(harness: Harness, user: str) -> WorkflowHandle[Any, LoopResult]:
    handle = await harness.client.start_workflow(
        "ReasoningLoop",
        LoopInput(
            messages=[Message(role="user", content="What do 3 apples cost?")],
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
        monkeypatch.setenv(TOKEN_VARIABLE, remote.token)
        settings = scripted_settings(
            harness.model,
            agents_file=first_agents(tmp_path, remote.url, lead),
            egress_allow=["127.0.0.1"],
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

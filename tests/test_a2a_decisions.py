"""A remote caller decides its own task's ``input-required`` (issue 68), where the endpoint's
operator lets it (``--a2a-decider``): its decision is signed with its enrolled approver key,
sent as a data part of a message to the task, and recorded by the thread like any approver's —
verified, on the audit chain. A decision in another's name, one signed with another key, or
one from a caller the operator did not name is not taken: the task waits again, saying why."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.helpers import get_artifact_text, get_data_parts, new_data_part, new_text_part
from a2a.types import GetTaskRequest, Message, Role, SendMessageRequest, Task, TaskState
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

import orga
from orga.contracts.approvals import PendingApproval
from orga.contracts.config import LoopConfig
from orga.contracts.journal import ApprovalDecided, Journal
from orga.desk.approvals import approval_decision
from orga.runtime.approver_keys import public_key_of
from orga.scripted.server import Turn
from orga.web.a2a_threads import A2A_PREFIX, APPROVAL_KEY, DECISION_KEY
from orga.web.agui import AguiOptions, agui_app
from tests.harness import Harness, scripted_settings
from tests.helpers import agents_endpoint, asgi_server, callers_for, eventually
from tests.sample_tools import transfer

ANN, KIM = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()


def _message(task: Task | None, text: str, decision: dict[str, Any] | None = None) -> Any:
    message = Message(role=Role.ROLE_USER, message_id=uuid.uuid4().hex, parts=[new_text_part(text)])
    if task is not None:
        message.task_id, message.context_id = task.id, task.context_id
    if decision is not None:
        message.parts.append(new_data_part({DECISION_KEY: decision}))
    return SendMessageRequest(message=message)


async def _sent(client: Any, request: Any) -> Task:
    [task] = [answer.task async for answer in client.send_message(request)]
    return task


def _waiting(task: Task) -> tuple[str, PendingApproval, str]:
    """The thread, the call that waits and the words of an input-required task."""
    assert TaskState.Name(task.status.state) == "TASK_STATE_INPUT_REQUIRED", task
    [data] = get_data_parts(task.status.message.parts)
    said = " ".join(p.text for p in task.status.message.parts if p.HasField("text"))
    [pending] = data[APPROVAL_KEY]["pending"]
    return data[APPROVAL_KEY]["workflow_id"], PendingApproval.model_validate(pending), said


def _decision(workflow_id: str, pending: PendingApproval, approver: str, key: Any) -> Any:
    decided = approval_decision(
        workflow_id,
        pending,
        call_id=pending.call_id,
        approved=True,
        reason="the invoice matches",
        approver=approver,
        via="a2a",
        key=key,
    )
    return decided.model_dump(mode="json")


async def test_a_caller_the_operator_names_decides_its_task_with_a_signed_decision(
    harness: Harness, tmp_path: Path
) -> None:
    approvers = tmp_path / "approvers.toml"
    approvers.write_text(
        "".join(
            f'[approvers.{n}]\nkey = "{public_key_of(k)}"\n'
            for n, k in (("ann", ANN), ("kim", KIM))
        )
    )
    settings = scripted_settings(harness.model, approvers_file=approvers)
    model = harness.new_model(
        [Turn(tool_calls=[("transfer", {"amount": 12, "to": "eve"})]), Turn(text="sent")]
    )
    tokens, callers = callers_for("ann", "bob")
    options = AguiOptions(
        task_queue=harness.task_queue,
        config=LoopConfig(model=model, tools=["transfer"]),
        a2a_deciders=frozenset({"ann"}),
    )
    app = agui_app(harness.client, callers, options, a2a="shop")
    async with harness.worker(settings=settings, tools=[transfer]), asgi_server(app) as base:
        headers = {"Authorization": f"Bearer {tokens['ann']}"}
        async with httpx.AsyncClient(headers=headers, timeout=60) as http:
            card = await A2ACardResolver(http, f"{base}/a2a").get_agent_card()
            client = ClientFactory(ClientConfig(httpx_client=http, streaming=False)).create(card)
            # The task comes back at input-required: ann decides it.
            asked = await _sent(client, _message(None, "pay eve 12"))
            workflow_id, pending, said = _waiting(asked)
            assert workflow_id == f"{A2A_PREFIX}{asked.context_id}" and pending.tool == "transfer"
            assert "waiting for a person to decide: transfer" in said
            thread = orga.loop(harness.client, workflow_id)
            harness.handles.append(thread.handle)
            # In kim's name (with kim's key, which ann should not hold): not taken.
            as_kim = await _sent(
                client, _message(asked, "ok", _decision(workflow_id, pending, "kim", KIM))
            )
            # In ann's name, signed with kim's key: the thread refuses it.
            wrong_key = await _sent(
                client, _message(asked, "ok", _decision(workflow_id, pending, "ann", KIM))
            )
            # Ann's own, signed by her key: taken, and the turn goes on to its answer.
            done = await _sent(
                client, _message(asked, "ok", _decision(workflow_id, pending, "ann", ANN))
            )
        journal = await thread.journal()
        await thread.handle.cancel()
    assert "not taken" in _waiting(as_kim)[2] and "approver 'ann'" in _waiting(as_kim)[2]
    assert "does not hold for ann's enrolled key" in _waiting(wrong_key)[2]
    assert TaskState.Name(done.status.state) == "TASK_STATE_COMPLETED", done
    assert [get_artifact_text(a) for a in done.artifacts] == ["sent"]
    [decided] = [e for e in journal.entries if isinstance(e, ApprovalDecided)]
    assert (decided.approver, decided.approved, decided.verified) == ("ann", True, True)
    assert decided.decisions[0].key_fingerprint
    assert isinstance(journal, Journal)


async def test_a_caller_the_operator_did_not_name_waits_for_orga_s_people(
    harness: Harness,
) -> None:
    """Bob is no decider: his task does not end at input-required — it waits through it, and
    the decision a person takes on orga's side lets it complete."""
    model = harness.new_model(
        [Turn(tool_calls=[("transfer", {"amount": 12, "to": "eve"})]), Turn(text="sent")]
    )
    tokens, callers = callers_for("bob")
    options = AguiOptions(
        task_queue=harness.task_queue,
        config=LoopConfig(model=model, tools=["transfer"]),
        a2a_deciders=frozenset({"ann"}),
    )
    app = agui_app(harness.client, callers, options, a2a="shop")
    async with harness.worker(tools=[transfer]), asgi_server(app) as base:
        headers = {"Authorization": f"Bearer {tokens['bob']}"}
        async with httpx.AsyncClient(headers=headers, timeout=60) as http:
            card = await A2ACardResolver(http, f"{base}/a2a").get_agent_card()
            client = ClientFactory(ClientConfig(httpx_client=http, streaming=True)).create(card)
            states: list[str] = []
            request = _message(None, "pay eve 12")
            request.message.context_id = f"bob-{uuid.uuid4().hex[:8]}"
            thread = orga.loop(harness.client, f"{A2A_PREFIX}{request.message.context_id}")
            harness.handles.append(thread.handle)
            async for event in client.send_message(request):
                if event.WhichOneof("payload") == "status_update":
                    state = TaskState.Name(event.status_update.status.state)
                    states.append(state)
                    if state == "TASK_STATE_INPUT_REQUIRED":  # a person, on orga's side
                        waiting = (await thread.state()).pending_approvals
                        await thread.approve(waiting[0].call_id, approver="kim", reason="ok")
        await thread.handle.cancel()
    assert "TASK_STATE_INPUT_REQUIRED" in states and states[-1] == "TASK_STATE_COMPLETED"


async def test_who_decides_is_each_agent_s_in_the_agents_file(
    harness: Harness, tmp_path: Path
) -> None:
    """``shop`` names ann among its deciders, ``helper`` names nobody. Ann's signed decision
    sent to her ``shop`` task is taken there (the task rested at input-required for her); her
    ``helper`` task waits through its approval, taken on orga's side, and completes on its own
    (were ann a decider there, it would rest until she writes)."""
    model = harness.new_model([_pay, _pay, _pay, _pay])
    agents = tmp_path / "agents.toml"
    agents.write_text(
        f"""
[agents.shop]
tools = ["transfer"]
model = "{model}"
a2a_deciders = ["ann"]

[agents.helper]
tools = ["transfer"]
model = "{model}"

[approvers.ann]
key = "{public_key_of(ANN)}"
"""
    )
    async with agents_endpoint(harness, agents, transfer) as (base, token):
        headers = {"Authorization": f"Bearer {token}"}
        async with httpx.AsyncClient(headers=headers, timeout=60) as http:
            clients = {}
            for name in ("shop", "helper"):
                card = await A2ACardResolver(http, f"{base}/a2a/{name}").get_agent_card()
                config = ClientConfig(httpx_client=http, streaming=False)
                clients[name] = ClientFactory(config).create(card)
            asked = {n: await _sent(c, _message(None, "pay eve 12")) for n, c in clients.items()}
            # helper: decided on orga's side, the task is followed to its end on its own.
            workflow_id, pending, _ = _waiting(asked["helper"])
            helper_thread = orga.loop(harness.client, workflow_id)
            harness.handles.append(helper_thread.handle)
            await helper_thread.approve(pending.call_id, approver="ann", reason="ok", key=ANN)

            async def ended() -> Task | None:
                found = await clients["helper"].get_task(GetTaskRequest(id=asked["helper"].id))
                return found if found.status.state == TaskState.TASK_STATE_COMPLETED else None

            helper = await eventually(ended, "helper's task completes")
            # shop: ann decides by a message to her task (with no decider, it would wait on).
            workflow_id, pending, _ = _waiting(asked["shop"])
            harness.handles.append(orga.loop(harness.client, workflow_id).handle)
            decision = _decision(workflow_id, pending, "ann", ANN)
            shop = await _sent(clients["shop"], _message(asked["shop"], "ok", decision))
        for task in asked.values():
            await orga.loop(harness.client, _waiting(task)[0]).handle.cancel()
    assert [get_artifact_text(a) for a in helper.artifacts] == ["sent"]
    assert TaskState.Name(shop.status.state) == "TASK_STATE_COMPLETED", shop
    assert [get_artifact_text(a) for a in shop.artifacts] == ["sent"]


def _pay(request: Any) -> Turn:
    """A thread's model: it pays eve, then says it did."""
    if request.tool_results():
        return Turn(text="sent")
    return Turn(tool_calls=[("transfer", {"amount": 12, "to": "eve"})])

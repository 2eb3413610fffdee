"""The OPA bridge against a small HTTP server on 127.0.0.1 that answers like OPA's data API."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from temporalio.client import WorkflowFailureError

from orga.contracts.errors import PolicyUnavailable
from orga.contracts.inference import Usage
from orga.contracts.policy import PolicyAction, PolicyRequest
from orga.gates.opa import OpaGate
from orga.scripted.server import Turn
from tests.harness import Harness, scripted_settings
from tests.helpers import conversation
from tests.local_http import Reply, serve
from tests.sample_tools import transfer

SEEN: list[dict[str, Any]] = []


def decide(facts: dict[str, Any]) -> dict[str, Any] | None:
    """What the package ``orga.gate`` would answer (the rules a Rego policy would state)."""
    if facts["action"] == "respond":  # a typed answer's value is there to judge
        if facts.get("answer", {}).get("amount", 0) > 1000:
            return {"allow": False, "reason": "refunds over 1000 need a person"}
        return {"allow": True}
    tool, arguments = facts["tool"], facts["arguments"]
    if tool == "add":
        return {"allow": True, "policy_ids": ["arith"]}
    if tool == "transfer":
        big = arguments.get("amount", 0) > 100
        return {"allow": True, "require_approval": big, "reason": "large transfer" if big else ""}
    if tool == "file_read":
        return {"allow": False, "reason": "no file access for this agent", "policy_ids": ["files"]}
    return None  # undefined


def answer_like_opa(method: str, path: str, raw: bytes) -> Reply:
    body = json.loads(raw)
    SEEN.append(body)
    if path == "/v1/data/broken/gate":
        status, answer = 500, {"code": "internal_error", "message": "boom"}
    elif path != "/v1/data/orga/gate":
        status, answer = 404, {}
    else:
        result = decide(body["input"])
        status, answer = 200, ({} if result is None else {"result": result})
    return status, "application/json", json.dumps(answer).encode()


@pytest.fixture(scope="module")
def opa() -> Iterator[str]:
    with serve(answer_like_opa) as url:
        yield url


def call(tool: str, **arguments: Any) -> PolicyAction:
    return PolicyAction(kind="call_tool", call_id=tool, tool=tool, arguments=json.dumps(arguments))


async def test_decisions(opa: str) -> None:
    actions = [
        call("add", a=1, b=2),
        call("transfer", amount=500, to="x"),
        call("transfer", amount=5, to="y"),
        call("file_read", path="a"),
        call("ghost"),
        PolicyAction(kind="respond"),
        PolicyAction(kind="respond", answer='{"amount": 5000, "refund_id": "r-1"}'),
    ]
    request = PolicyRequest(
        mode="opa",
        agent_id="a1",
        workflow_id="w",
        iteration=2,
        usage=Usage(total_tokens=7),
        advertised=[],
        actions=actions,
    )
    async with httpx.AsyncClient() as http:
        decisions = await OpaGate(f"{opa}/v1/data/orga/gate", http).decide(actions, request)
    assert [d.decision for d in decisions] == [
        "allow",
        "require_approval",
        "allow",
        "deny",
        "deny",
        "allow",
        "deny",
    ]
    assert decisions[6].reason == "refunds over 1000 need a person"
    assert decisions[0].policy_ids == ["arith"]
    assert decisions[1].reason == "large transfer"
    assert decisions[3].reason == "no file access for this agent"
    assert "undefined" in decisions[4].reason
    sent = next(s["input"] for s in SEEN if s["input"].get("arguments", {}).get("amount") == 500)
    assert sent == {
        "agent_id": "a1",
        "workflow_id": "w",
        "action": "call_tool",
        "iteration": 2,
        "tokens_used": 7,
        "tool": "transfer",
        "arguments": {"amount": 500, "to": "x"},
    }


async def test_an_unavailable_opa_is_retryable(opa: str) -> None:
    request = PolicyRequest(
        mode="opa",
        agent_id="a",
        workflow_id="w",
        iteration=1,
        usage=Usage(),
        advertised=[],
        actions=[PolicyAction(kind="respond")],
    )
    async with httpx.AsyncClient() as http:
        with pytest.raises(PolicyUnavailable, match="HTTP 500") as caught:
            await OpaGate(f"{opa}/v1/data/broken/gate", http).decide(request.actions, request)
    assert not caught.value.non_retryable


async def test_a_loop_under_opa(harness: Harness, opa: str) -> None:
    model = harness.new_model(
        [
            Turn(tool_calls=[("add", {"a": 1, "b": 1}), ("file_read", {"path": "x"})]),
            Turn(text="two, and no file"),
        ]
    )
    settings = scripted_settings(harness.model, opa_url=f"{opa}/v1/data/orga/gate")
    async with harness.worker(settings=settings, tools=[transfer]):
        handle = await harness.start("go", model=model, tools=["add", "file_read"], policy="opa")
        assert (await handle.result()).output == "two, and no file"
        messages = await conversation(handle)
    add, read = messages[2].tool_results
    assert add.status == "ok" and read.status == "denied"
    assert "no file access for this agent" in read.content


async def test_a_broken_opa_denies_the_turn(harness: Harness, opa: str) -> None:
    model = harness.new_model([Turn(tool_calls=[("add", {"a": 1, "b": 1})]), Turn(text="denied")])
    settings = scripted_settings(harness.model, opa_url=f"{opa}/v1/data/broken/gate")
    async with harness.worker(settings=settings):
        handle = await harness.start("go", model=model, tools=["add"], policy="opa")
        with pytest.raises(WorkflowFailureError):  # the answer is denied too, then no script
            await handle.result()
        messages = await conversation(handle)
    [result] = messages[2].tool_results
    assert result.status == "denied" and "fail closed" in result.content

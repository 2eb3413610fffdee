"""The OPA bridge against a small HTTP server on 127.0.0.1 that answers like OPA's data API."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from temporalio.client import WorkflowFailureError
from temporalio.testing import WorkflowEnvironment

from orga.contracts.audit import AuditChain
from orga.contracts.errors import PolicyUnavailable
from orga.contracts.inference import Usage
from orga.contracts.journal import Journal, PolicyEvaluated
from orga.contracts.policy import PolicyAction, PolicyRequest
from orga.gates.opa import OpaGate
from orga.scripted.server import Turn
from tests.harness import Harness, scripted_settings
from tests.helpers import conversation, eventually, on, orga
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
    if tool == "web_fetch":  # fetched, but never more than 1000 characters
        return {"allow": True, "modify_arguments": {"max_chars": 1000}, "policy_ids": ["fetch"]}
    return None  # undefined


POLICIES = [{"id": "orga/gate.rego", "raw": "package orga.gate\n..."}]
"""What ``GET /v1/policies`` lists on the OPA that serves no bundle."""


def answer_like_opa(method: str, target: str, raw: bytes) -> Reply:
    path, _, query = target.partition("?")
    if method == "GET" and path == "/v1/policies":
        return 200, "application/json", json.dumps({"result": POLICIES}).encode()
    body = json.loads(raw)
    SEEN.append(body)
    if path == "/v1/data/broken/gate":
        status, answer = 500, {"code": "internal_error", "message": "boom"}
    elif path not in ("/v1/data/orga/gate", "/v1/data/nobundle/gate", "/v1/data/strict/gate"):
        status, answer = 404, {}
    else:
        result = decide(body["input"])
        if path == "/v1/data/strict/gate" and body["input"].get("tool") == "add":
            result = {"allow": True, "require_approval": True, "reason": "sums need a person"}
        answer = {} if result is None else {"result": result}
        if "provenance=true" in query:
            bundles = {"orga": {"revision": "rev-7"}} if path == "/v1/data/orga/gate" else {}
            answer["provenance"] = {"version": "1.4.2", "bundles": bundles}
        status = 200
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


def _one(action: PolicyAction) -> PolicyRequest:
    """A request of one action, as a loop's first turn asks it."""
    return PolicyRequest(
        mode="opa",
        agent_id="a",
        workflow_id="w",
        iteration=1,
        usage=Usage(),
        advertised=[],
        actions=[action],
    )


async def test_an_unavailable_opa_is_retryable(opa: str) -> None:
    request = _one(PolicyAction(kind="respond"))
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


async def test_opa_modifies_a_call_and_names_its_policy_set(harness: Harness, opa: str) -> None:
    """At parity with Cedar: ``result.modify_arguments`` rewrites the call (which runs, and the
    model sees, rewritten), and every decision records the bundle's revision — or, on an OPA
    that serves no bundle, the hash of its policies — with what OPA was asked."""
    assert (await _revision_of(f"{opa}/v1/data/orga/gate")) == "orga@rev-7"
    expected = hashlib.sha256(
        json.dumps(sorted((p["id"], p["raw"]) for p in POLICIES)).encode()
    ).hexdigest()
    assert (await _revision_of(f"{opa}/v1/data/nobundle/gate")) == f"sha256:{expected[:16]}"
    model = harness.new_model(
        [
            Turn(tool_calls=[("web_fetch", {"url": "http://127.0.0.1:9/a"})]),
            Turn(text="fetched"),
        ]
    )
    settings = scripted_settings(harness.model, opa_url=f"{opa}/v1/data/orga/gate")
    async with harness.worker(settings=settings):
        handle = await harness.start("go", model=model, tools=["web_fetch"], policy="opa")
        await handle.result()
        journal = await handle.query("journal", result_type=Journal)
        audit = await handle.query("audit", result_type=AuditChain)
        messages = await conversation(handle)
    [fetch, answer] = [e for e in journal.entries if isinstance(e, PolicyEvaluated)]
    assert fetch.engine == "opa" and fetch.policy_hash == "orga@rev-7"
    [decided] = fetch.decisions
    assert decided.decision == "modify" and decided.policy_ids == ["fetch"]
    assert decided.asked is not None and decided.asked.request["tool"] == "web_fetch"
    assert decided.asked.policy_hash == "orga@rev-7"
    assert decided.asked.arguments is not None
    assert json.loads(decided.asked.arguments) == {"url": "http://127.0.0.1:9/a", "max_chars": 1000}
    call = messages[1].tool_calls[0]
    assert json.loads(call.arguments)["max_chars"] == 1000  # the model sees the call as run
    assert answer.policy_hash == "orga@rev-7"
    chained = [e.record for e in audit.entries if e.kind == "PolicyEvaluated"]
    assert chained and all(r["policy_hash"] == "orga@rev-7" for r in chained)


async def _revision_of(url: str) -> str | None:
    request = _one(call("add", a=1, b=1))
    async with httpx.AsyncClient() as http:
        _, revision = await OpaGate(url, http).decide_with_revision(request.actions, request)
    return revision


async def test_what_if_asks_a_candidate_opa(
    env: WorkflowEnvironment, harness: Harness, opa: str
) -> None:
    """``orga policy what-if URL`` asks an OPA decision endpoint serving the candidate what the
    loops' OPA gate was asked, as it asks a Cedar directory."""
    model = harness.new_model([Turn(tool_calls=[("add", {"a": 2, "b": 2})]), Turn(text="4")])
    settings = scripted_settings(harness.model, opa_url=f"{opa}/v1/data/orga/gate")
    async with harness.worker(settings=settings):
        handle = await harness.start("2+2", model=model, tools=["add"], policy="opa")
        await handle.result()

    async def what_if(candidate: str) -> tuple[int, dict[str, Any]] | None:
        code, out, err = await orga(
            "policy", "what-if", candidate, "--since", "1h", "--task-queue", harness.task_queue,
            "--json", env=on(env, harness),
        )  # fmt: skip
        assert code in (0, 1), err
        found = json.loads(out)
        return (code, found) if found["summary"]["requests"] == 2 else None

    code, same = await eventually(lambda: what_if(f"{opa}/v1/data/orga/gate"), "what-if")
    assert code == 0 and same["flips"] == []
    code, strict = await eventually(lambda: what_if(f"{opa}/v1/data/strict/gate"), "what-if")
    assert code == 1
    [changed] = strict["flips"]
    assert (changed["workflow_id"], changed["tool"], changed["flip"]) == (
        handle.id,
        "add",
        "approval needed",
    )
    assert changed["after"] == "require_approval: sums need a person"

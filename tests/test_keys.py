"""Keys that cannot collide: a workflow id used again, and a provider that repeats call ids."""

from __future__ import annotations

import json
import uuid

from sqlalchemy import text

from orga.contracts.approvals import ApprovalDecision
from orga.contracts.journal import ApprovalDecided, Journal
from orga.scripted.server import Raw, Turn
from tests.harness import TEST_STORE, Harness
from tests.helpers import conversation, pending
from tests.sample_tools import transfer


async def test_a_task_run_again_under_its_workflow_id_pays_again(harness: Harness) -> None:
    """The first execution's receipt must not come back to the second: the key carries the
    execution chain's first run id."""
    from orga.tools._loading import load_tool_modules

    workflow_id = f"order-{uuid.uuid4().hex[:8]}"
    steps = [
        {
            "id": "pay",
            "action": {
                "kind": "tool",
                "tool": "record_payment",
                "arguments": {"amount": 4200, "to": workflow_id},
            },
        }
    ]
    receipts: list[str] = []
    async with harness.worker(tools=load_tool_modules(["examples.payments"])):
        for _ in range(2):
            handle = await harness.start_task(steps, workflow_id=workflow_id)
            result = await handle.result()
            receipts.append(result.steps[0].result or "")
    assert receipts[0] != receipts[1] and all("receipt rcpt-" in r for r in receipts)
    with TEST_STORE.engine.connect() as db:
        rows = db.execute(
            text("SELECT idempotency_key FROM payments WHERE recipient = :to"), {"to": workflow_id}
        ).all()
    keys = sorted(row[0] for row in rows)
    assert len(keys) == 2 and keys[0] != keys[1]  # two payments, one per execution
    assert all(key.startswith(f"{workflow_id}/") and key.endswith("/pay") for key in keys)


def repeated_call(amount: int) -> Raw:
    """An OpenAI answer whose tool call is always ``call_0`` (some servers do this)."""
    return Raw(
        200,
        {
            "id": "chatcmpl-repeat",
            "object": "chat.completion",
            "created": 0,
            "model": "repeater",
            "choices": [
                {
                    "index": 0,
                    "message": {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": "call_0",
                                "type": "function",
                                "function": {
                                    "name": "transfer",
                                    "arguments": json.dumps({"amount": amount, "to": "ann"}),
                                },
                            }
                        ],
                    },
                    "finish_reason": "tool_calls",
                }
            ],
            "usage": {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10},
        },
    )


async def test_a_provider_that_repeats_call_ids(harness: Harness) -> None:
    model = harness.new_model([repeated_call(1), repeated_call(2), Turn(text="both sent")])
    async with harness.worker(tools=[transfer]):
        handle = await harness.start("pay ann twice", model=model, tools=["transfer"])
        decided: list[str] = []
        for _ in range(2):
            state = await pending(handle, besides=decided)
            [waiting] = state.pending_approvals
            decided.append(waiting.call_id)
            await handle.execute_update(
                "approve",
                ApprovalDecision(call_id=waiting.call_id, approved=True, approver="ann"),
            )
        assert (await handle.result()).output == "both sent"
        journal = await handle.query("journal", result_type=Journal)
        messages = await conversation(handle)
    assert decided == ["i1_call_0", "i2_call_0"]  # the loop's own ids, unique per iteration
    approvals = [e for e in journal.entries if isinstance(e, ApprovalDecided)]
    assert [a.call_id for a in approvals] == decided and all(a.approved for a in approvals)
    results = [r.content for m in messages if m.role == "tool" for r in m.tool_results]
    assert results == ["sent 1 to ann", "sent 2 to ann"]
    # What went back to the provider: its own id for the first call, and for the repeat (which
    # would name two calls of one request alike) the id translated from the loop's; each tool
    # result under its call's id.
    from orga.core.ids import translated_id

    wire = ["call_0", translated_id("i2_call_0")]
    last = harness.model.requests_for(model)[-1].body["messages"]
    assert [c["id"] for m in last for c in m.get("tool_calls") or []] == wire
    assert [m["tool_call_id"] for m in last if m["role"] == "tool"] == wire


def test_ids_repeated_within_one_turn_are_told_apart() -> None:
    """A provider that names two calls of one turn alike (or two ids that read alike once made
    safe) still gets one id per call: approvals, keys and the journal never mix them up."""
    from orga.contracts.conversation import ToolCall
    from orga.contracts.inference import InferenceResponse
    from orga.core.ids import with_internal_ids

    calls = [
        ToolCall(id="call_0", name="transfer", arguments="{}"),
        ToolCall(id="call_0", name="transfer", arguments="{}"),
        ToolCall(id="call.1", name="add", arguments="{}"),
        ToolCall(id="call-1", name="add", arguments="{}"),
    ]
    response = InferenceResponse(
        stop_reason="tool_use", tool_calls=calls, provider="openai", model="m"
    )
    renamed = with_internal_ids(response, 3)
    assert [c.id for c in renamed.tool_calls] == [
        "i3_call_0",
        "i3_call_0_2",
        "i3_call-1",
        "i3_call-1_2",
    ]


def test_a_step_cannot_take_the_id_of_a_compensation() -> None:
    """``pay.compensate`` would share its idempotency key and escalation ids with the
    compensation of step ``pay``."""
    import pytest
    from pydantic import ValidationError

    from orga.contracts.task import Step

    action = {"kind": "tool", "tool": "transfer"}
    with pytest.raises(ValidationError, match="names the compensation of step 'pay'"):
        Step.model_validate({"id": "pay.compensate", "action": action})
    assert Step.model_validate({"id": "pay.compensated-later", "action": action}).id

"""A worker SIGKILLed inside tools whose effects cannot simply run again (issue 55): on the next
worker, the tool's ``reconcile`` settles a call whose effect happened as delivered (it does not
run again) and one whose effect did not as not delivered (it runs once); a tool with neither
leaves an ``unknown`` receipt and waits for a person on the desk, who says what happened."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from orga.contracts.approvals import EscalationResolution
from orga.contracts.config import LoopConfig, LoopInput
from orga.contracts.conversation import Message
from orga.contracts.journal import CallReceipt, Journal
from orga.scripted.server import Turn
from tests.harness import TEST_STORE, Harness
from tests.helpers import escalated, eventually, host_env, inbox, worker_process
from tests.receipt_tools import effects


async def test_a_worker_killed_mid_call_leaves_receipts_that_settle_each_effect_once(
    env: WorkflowEnvironment, harness: Harness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    effects_file = tmp_path / "effects.jsonl"
    worker = host_env(
        env, harness, "worker", tmp_path, TEST_STORE.url,
        ORGA_TOOL_MODULES="tests.receipt_tools", RECEIPT_EFFECTS=str(effects_file),
    )  # fmt: skip
    monkeypatch.setenv("RECEIPT_EFFECTS", str(effects_file))  # this process reads it too
    loops = {
        "happened": ("pay_reconciled", {"amount": 100, "hold": "after"}),
        "not yet": ("pay_reconciled", {"amount": 200, "hold": "before"}),
        "nobody knows": ("pay_plain", {"amount": 300, "hold": "after"}),
    }
    handles: dict[str, Any] = {}
    async with worker_process(worker) as first:
        for name, (tool, arguments) in loops.items():
            model = harness.new_model(
                [Turn(tool_calls=[(tool, arguments)]), Turn(text=f"{name}: done")]
            )
            handles[name] = await harness.client.start_workflow(
                "ReasoningLoop",
                LoopInput(
                    messages=[Message(role="user", content=f"pay ({name})")],
                    config=LoopConfig(model=model, tools=[tool]),
                ),
                id=f"killed-{name.replace(' ', '-')}-{tmp_path.name[-8:]}",
                task_queue=harness.task_queue,
            )
            harness.handles.append(handles[name])
        await eventually(lambda: len([e for e in effects() if "held" in e]) == 3, "three held")
        first.send_signal(signal.SIGKILL)  # in the middle of all three
        await first.wait()
    async with worker_process(worker):
        pending_one = await escalated(handles["nobody knows"])
        items = await inbox(env, harness, 1)
        for name in ("happened", "not yet"):
            await handles[name].result()
        await handles["nobody knows"].execute_update(
            "resolve_escalation",
            EscalationResolution(
                escalation_id=pending_one, action="result", result="paid 300 (the bank has it)",
                reason="checked the statement", operator="olu",
            ),
        )  # fmt: skip
        await handles["nobody knows"].result()
        journals = {
            name: await handle.query("journal", result_type=Journal)
            for name, handle in handles.items()
        }
    paid = sorted(e["amount"] for e in effects() if "key" in e)
    assert paid == [100, 200, 300]  # every effect once: none lost, none twice
    receipts = {
        name: [e.outcome for e in journal.entries if isinstance(e, CallReceipt)]
        for name, journal in journals.items()
    }
    assert receipts == {name: ["unknown", "delivered"] for name in loops}
    [waiting] = [i for i in items if i["workflow_id"] == handles["nobody knows"].id]
    assert "outcome of call" in str(waiting)  # the desk says why a person is asked

"""Trust boundaries on a real server: each attack from the security review, refused, nothing run.

The worker's operator owns the agents, the gate and the egress and file rules; a client may only
narrow them; a model (and any page it reads) only proposes calls, which all pass the gate.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from orga.contracts.approvals import ApprovalDecision, EscalationResolution
from orga.contracts.conversation import Message, chain_digest
from orga.contracts.journal import Journal, ObservationsCollected, PreHydrationComplete, Started
from orga.contracts.task import TaskState
from orga.scripted.server import Turn
from tests.harness import Harness, scripted_settings
from tests.helpers import (
    POLICY_EXAMPLES,
    conversation,
    eventually,
    failure,
    task_state,
    tool_results,
)
from tests.local_http import Reply, serve
from tests.sample_tools import Shop, transfer

# ---- what a client may ask -----------------------------------------------------------------


AGENTS = """
[agents.support]
description = "Answers from the docs"
tools = ["add", "file_read"]
policy = "cedar"
max_iterations = 4
system_prompt = "You are support. Answer from the documentation only."

[agents.ops]
tools = ["*"]
"""


def agents_file(tmp_path: Path) -> Path:
    path = tmp_path / "agents.toml"
    path.write_text(AGENTS)
    return path


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"agent_id": "support", "policy": "permissive"}, "weaker than 'cedar'"),
        ({"agent_id": "support", "policy": "default"}, "policy 'default' is weaker than 'cedar'"),
        ({"agent_id": "support", "tools": ["web_fetch"]}, "may not use: ['web_fetch']"),
        ({"agent_id": "support", "max_iterations": 40}, "config.max_iterations=40 is above"),
        ({"agent_id": "intruder"}, "there is no agent 'intruder' on this worker"),
    ],
)
async def test_a_client_cannot_widen_its_agent(
    harness: Harness, tmp_path: Path, config: dict[str, Any], message: str
) -> None:
    model = harness.new_model([Turn(text="must not be asked")])
    settings = scripted_settings(
        harness.model, agents_file=agents_file(tmp_path), policy_dir=POLICY_EXAMPLES
    )
    async with harness.worker(settings=settings):
        handle = await harness.start("go", model=model, **config)
        error = await failure(handle)
    assert error.type == "InvalidConfig" and message in error.message
    assert f"ORGA_AGENTS={tmp_path / 'agents.toml'}" in error.message or "intruder" in message
    assert harness.model.requests_for(model) == []  # nothing ran


async def test_the_agent_sets_gate_budget_and_prompt(harness: Harness, tmp_path: Path) -> None:
    model = harness.new_model([Turn(tool_calls=[("add", {"a": 1, "b": 2})]), Turn(text="3")])
    settings = scripted_settings(
        harness.model, agents_file=agents_file(tmp_path), policy_dir=POLICY_EXAMPLES
    )
    async with harness.worker(settings=settings):
        handle = await harness.start("1+2?", model=model, agent_id="support", tools=["add"])
        assert (await handle.result()).output == "3"
        journal = await handle.query("journal", result_type=Journal)
        messages = await conversation(handle)
    [started] = [e for e in journal.entries if isinstance(e, Started)]
    assert started.policy == "cedar"  # the agent's floor, though the client named none
    assert messages[0].role == "system" and messages[0].content.startswith("You are support")
    first = harness.model.requests_for(model)[0].body["messages"]
    assert first[0]["content"].startswith("You are support")


async def test_permissive_needs_the_worker_to_allow_it(harness: Harness) -> None:
    model = harness.new_model([Turn(text="must not be asked")])
    settings = scripted_settings(harness.model, allow_permissive=False)
    async with harness.worker(settings=settings):
        handle = await harness.start("go", model=model, policy="permissive")
        error = await failure(handle)
    assert error.type == "InvalidConfig" and "ORGA_ALLOW_PERMISSIVE=1" in error.message
    assert harness.model.requests_for(model) == []  # refused before anything was sent


def forged_carry(model: str) -> dict[str, Any]:
    """A loop input whose ``carry`` a client made up (its digest computed as a loop would):
    no tokens used, no approvals pending."""
    messages = [Message(role="user", content="go")]
    return {
        "messages": [m.model_dump(mode="json") for m in messages],
        "config": {"model": model},
        "carry": {
            "digest": chain_digest("", messages),
            "sent": 0,
            "usage": {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0},
            "iteration": 0,
            "started_at": "2026-01-01T00:00:00Z",
            "journal": {"entries": []},
            "tools": {"decided_ids": ["call_1"]},
        },
    }


async def test_a_client_cannot_hand_a_loop_carried_state(harness: Harness) -> None:
    """``carry`` restores journal, usage and decided approvals: only a run that continues an
    earlier one may take it."""
    model = harness.new_model([Turn(text="must not be asked")])
    async with harness.worker():
        handle = await harness.client.start_workflow(
            "ReasoningLoop",
            forged_carry(model),
            id=f"forged-{uuid.uuid4().hex[:8]}",
            task_queue=harness.task_queue,
        )
        harness.handles.append(handle)
        error = await failure(handle)
    assert (
        error.type == "InvalidConfig" and "carry is set by a loop for its next run" in error.message
    )
    assert harness.model.requests_for(model) == []


async def test_a_cron_schedule_cannot_smuggle_carried_state(harness: Harness) -> None:
    """Every run of a cron workflow after the first continues the one before it, with the
    client's input: a forged ``carry`` would pass as a continuation. Loops refuse cron (use
    ``orga schedule``: Temporal Schedules start fresh loops)."""
    model = harness.new_model([Turn(text="must not be asked")])
    async with harness.worker():
        handle = await harness.client.start_workflow(
            "ReasoningLoop",
            forged_carry(model),
            id=f"cron-{uuid.uuid4().hex[:8]}",
            task_queue=harness.task_queue,
            cron_schedule="@every 1s",
        )

        async def run_failure(run_id: str | None) -> tuple[str, str, str]:
            """How one run ended: (failure type, message, the next run's id)."""
            run = harness.client.get_workflow_handle(handle.id, run_id=run_id)
            async for event in run.fetch_history_events(wait_new_event=True):
                if event.HasField("workflow_execution_failed_event_attributes"):
                    ended = event.workflow_execution_failed_event_attributes
                    info = ended.failure.application_failure_info
                    return info.type, ended.failure.message, ended.new_execution_run_id
                assert not event.HasField("workflow_execution_completed_event_attributes")
            raise AssertionError("the run ended without failing")

        try:
            first, _, next_run = await asyncio.wait_for(run_failure(handle.result_run_id), 30)
            assert next_run  # the cron's next run, with the same input
            second, message, _ = await asyncio.wait_for(run_failure(next_run), 30)
        finally:
            await handle.terminate("test over")
    assert first == "InvalidConfig"
    assert second == "InvalidConfig" and "orga schedule" in message
    assert harness.model.requests_for(model) == []


# ---- what a model (and what it reads) can reach ---------------------------------------------


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("docs/../.env", "hidden"),  # refused by the file rules before the policy is asked
        ("docs/../notes.md", "policy"),  # not hidden: the policy judges notes.md, not docs/*
    ],
)
async def test_a_path_that_escapes_is_judged_where_it_leads(
    harness: Harness, tmp_path: Path, path: str, why: str
) -> None:
    """The shipped policy permits ``path like "docs/*"``; ``docs/../.env`` used to match it."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "guide.md").write_text("the guide")
    (tmp_path / ".env").write_text("OPENAI_API_KEY=sk-leaked-if-you-see-this")
    (tmp_path / "notes.md").write_text("sk-leaked-if-you-see-this too")
    model = harness.new_model(
        [
            Turn(
                tool_calls=[("file_read", {"path": path}), ("file_read", {"path": "docs/guide.md"})]
            ),
            Turn(text="no luck"),
        ]
    )
    settings = scripted_settings(harness.model, policy_dir=POLICY_EXAMPLES, file_root=tmp_path)
    async with harness.worker(settings=settings):
        handle = await harness.start("read it", model=model, tools=["file_read"], policy="cedar")
        await handle.result()
        messages = await conversation(handle)
        journal = await handle.query("journal", result_type=Journal)
    escaped, inside = tool_results(messages)
    assert escaped.is_error and escaped.status == "denied"
    if why == "hidden":
        assert "hidden" in escaped.content
    else:
        assert "hidden" not in escaped.content and "denied" in escaped.content
    assert inside.content == "the guide"  # the same policy lets docs/* through
    assert "sk-leaked" not in json.dumps([m.model_dump(mode="json") for m in messages])
    outcome = next(e for e in journal.entries if isinstance(e, ObservationsCollected)).outcomes[0]
    assert outcome.status == "denied" and outcome.error is not None


@pytest.fixture
def private_site() -> Iterator[tuple[str, list[str]]]:
    seen: list[str] = []

    def page(method: str, path: str, body: bytes) -> Reply:
        seen.append(path)
        return 200, "text/plain", b"internal admin token: 12345"

    with serve(page) as url:
        yield url, seen


async def test_pre_hydration_does_not_reach_loopback(
    harness: Harness, private_site: tuple[str, list[str]]
) -> None:
    url, seen = private_site
    model = harness.new_model([Turn(text="ok")])
    settings = scripted_settings(harness.model)  # no ORGA_EGRESS_ALLOW
    async with harness.worker(settings=settings):
        handle = await harness.start(
            f"Summarise {url}/admin", model=model, pre_hydration={}, tools=["web_fetch"]
        )
        await handle.result()
        journal = await handle.query("journal", result_type=Journal)
    [done] = [e for e in journal.entries if isinstance(e, PreHydrationComplete)]
    assert (done.found, done.resolved, done.failed) == (1, 0, 1)
    assert seen == []  # the private server was never asked


async def test_a_model_cannot_fetch_private_addresses(
    harness: Harness, private_site: tuple[str, list[str]]
) -> None:
    url, seen = private_site
    model = harness.new_model(
        [
            Turn(tool_calls=[("web_fetch", {"url": f"{url}/admin"})]),
            Turn(tool_calls=[("web_fetch", {"url": "http://169.254.169.254/latest/meta-data/"})]),
            Turn(text="could not"),
        ]
    )
    async with harness.worker():
        handle = await harness.start("fetch it", model=model, tools=["web_fetch"])
        await handle.result()
        messages = await conversation(handle)
        journal = await handle.query("journal", result_type=Journal)
    loopback, metadata = tool_results(messages)
    assert loopback.status == "denied" and "loopback" in loopback.content
    assert metadata.status == "denied" and "metadata" in metadata.content
    assert "ORGA_EGRESS_ALLOW" in loopback.content  # the rule, and how to open it
    errors = [
        o.error or ""
        for e in journal.entries
        if isinstance(e, ObservationsCollected)
        for o in e.outcomes
    ]
    assert any("loopback" in error for error in errors)  # the journal records the refusal
    assert seen == []
    first = harness.model.requests_for(model)[0].body["messages"]
    assert "admin token" not in json.dumps(first)


# ---- tasks pass the gate too ----------------------------------------------------------------


SCHEMA = {
    "": {
        "entityTypes": {"Agent": {}, "Tool": {}, "Answer": {}},
        "actions": {
            "call_tool": {
                "appliesTo": {
                    "principalTypes": ["Agent"],
                    "resourceTypes": ["Tool"],
                    "context": {
                        "type": "Record",
                        "attributes": {
                            "arguments": {"type": "Record", "attributes": {}},
                            "iteration": {"type": "Long"},
                            "tokens_used": {"type": "Long"},
                            "step": {"type": "String", "required": False},
                            "compensation": {"type": "Boolean", "required": False},
                        },
                    },
                }
            },
            "respond": {
                "appliesTo": {
                    "principalTypes": ["Agent"],
                    "resourceTypes": ["Answer"],
                    "context": {
                        "type": "Record",
                        "attributes": {
                            "iteration": {"type": "Long"},
                            "tokens_used": {"type": "Long"},
                        },
                    },
                }
            },
        },
    }
}

POLICIES = """
permit (principal, action == Action::"call_tool", resource);

@id("no-charges")
@reason("charges are the finance agent's job")
forbid (principal == Agent::"shop", action == Action::"call_tool", resource == Tool::"charge");

@id("no-silent-release")
@reason("releasing stock needs a person on the phone")
forbid (principal, action == Action::"call_tool", resource == Tool::"release")
when { context has compensation && context.compensation };
"""


def task_policies(tmp_path: Path) -> Path:
    directory = tmp_path / "policies"
    directory.mkdir()
    (directory / "schema.cedarschema.json").write_text(json.dumps(SCHEMA))
    (directory / "shop.cedar").write_text(POLICIES)
    (tmp_path / "agents.toml").write_text('[agents.shop]\ntools = ["*"]\npolicy = "cedar"\n')
    return directory


STEPS: list[dict[str, Any]] = [
    {
        "id": "reserve",
        "action": {"kind": "tool", "tool": "reserve", "arguments": {"item": "lamp"}},
        "compensation": {"tool": "release", "arguments": {"reservation": "${result.reservation}"}},
    },
    {
        "id": "charge",
        "action": {"kind": "tool", "tool": "charge", "arguments": {"amount": 4200}},
        "depends_on": ["reserve"],
    },
]


async def test_a_denied_step_fails_and_a_denied_compensation_goes_to_an_operator(
    harness: Harness, tmp_path: Path
) -> None:
    shop = Shop(notify_fails=False)
    settings = scripted_settings(
        harness.model, policy_dir=task_policies(tmp_path), agents_file=tmp_path / "agents.toml"
    )
    async with harness.worker(settings=settings, tools=shop.tools):
        handle = await harness.start_task(STEPS, agent_id="shop")

        async def escalated() -> TaskState | None:
            state = await task_state(handle)
            return state if state.pending_escalations else None

        state = await eventually(escalated, "the denied compensation escalated")
        [waiting] = state.pending_escalations
        assert waiting.escalation_id == "reserve.compensate#1"
        assert "releasing stock needs a person on the phone" in waiting.error
        assert waiting.options == ["retry", "mark_compensated", "give_up"]
        await handle.execute_update(
            "resolve_escalation",
            EscalationResolution(
                escalation_id=waiting.escalation_id,
                action="give_up",
                reason="called the warehouse",
                operator="ops",
            ),
        )
        error = await failure(handle)
    report = {s["id"]: s for s in error.details[0]["steps"]}
    assert "charges are the finance agent's job" in report["charge"]["errors"][0]
    assert report["charge"]["attempts"] == 1  # a denial is not re-attempted
    assert report["reserve"]["status"] == "compensation_failed"
    assert (
        report["reserve"]["compensation_note"] == "left uncompensated by ops: called the warehouse"
    )
    assert "releasing stock needs a person" in report["reserve"]["compensation_error"]
    assert error.details[0]["outcome"] == "compensation_incomplete"
    assert shop.names() == ["reserve"]  # neither the charge nor the release ran


async def test_a_step_can_wait_for_approval(harness: Harness) -> None:
    async with harness.worker(tools=[transfer]):
        handle = await harness.start_task(
            [
                {
                    "id": "pay",
                    "action": {
                        "kind": "tool",
                        "tool": "transfer",
                        "arguments": {"amount": 5, "to": "al"},
                    },
                }
            ]
        )

        async def asked() -> TaskState | None:
            state = await task_state(handle)
            return state if state.pending_approvals else None

        state = await eventually(asked, "the payment waits for approval")
        [waiting] = state.pending_approvals
        assert (waiting.call_id, waiting.tool) == ("pay#1", "transfer")
        assert state.status == "awaiting_operator"
        await handle.execute_update(
            "approve", ApprovalDecision(call_id="pay#1", approved=True, approver="pam")
        )
        result = await handle.result()
    assert result.steps[0].result == "sent 5 to al"

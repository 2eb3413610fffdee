"""Many agents working together: a child runs as its own agent, and one budget holds for the
whole tree — the parent, its children and its critic — against a child or a critic that tries
to spend more."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHandle
from temporalio.worker import Worker

from orga.contracts.journal import (
    DelegationStarted,
    Journal,
    ObservationsCollected,
    PolicyEvaluated,
)
from orga.contracts.state import LoopState
from orga.plugin import OrgaPlugin, http_client
from orga.runtime.presence import publish_tools
from orga.scripted.server import Turn
from orga.tools.sdk import Tool, tool
from tests.harness import TEST_STORE, Harness, scripted_settings
from tests.helpers import eventually, failure, started_config, verdict

AGENTS = """
[agents.lead]
description = "Plans and hands out work"
tools = ["note_finding", "add"]  # what it may hand on: a child is never wider than its parent
delegates = ["research"]
model = "{lead}"
{lead_extra}

[agents.research]
description = "Finds facts and notes them"
tools = ["note_finding", "add"]
model = "{research}"
{research_extra}

[agents.critic]
description = "Checks answers"
model = "{critic}"
"""


def agents(tmp_path: Path, models: dict[str, str], **extra: str) -> Path:
    path = tmp_path / "agents.toml"
    path.write_text(
        AGENTS.format(
            lead=models["lead"],
            research=models.get("research", "unused"),
            critic=models.get("critic", "unused"),
            lead_extra=extra.get("lead", ""),
            research_extra=extra.get("research", ""),
        )
    )
    return path


def note_tool(notes: list[str]) -> Tool:
    @tool
    def note_finding(text: str) -> str:
        """Write a finding into the team's notes.

        Args:
            text: the finding.
        """
        notes.append(text)
        return f"noted: {text}"

    return note_finding


def delegating(task: str, **more: Any) -> Turn:
    return Turn(tool_calls=[("delegate", {"agent": "research", "task": task, **more})])


async def child_of(harness: Harness, journal: Journal) -> WorkflowHandle[Any, Any]:
    [started, *_] = [e for e in journal.entries if isinstance(e, DelegationStarted)]
    handle = harness.client.get_workflow_handle(started.workflow_id)
    harness.handles.append(handle)
    return handle


# ---- a child is its own agent ------------------------------------------------------------


async def test_a_delegated_child_calls_its_own_tools_and_its_effects_land(
    harness: Harness, tmp_path: Path
) -> None:
    notes: list[str] = []
    models = {
        "lead": harness.new_model([delegating("Find the answer and note it."), Turn(text="42")]),
        "research": harness.new_model(
            [Turn(tool_calls=[("note_finding", {"text": "the answer is 42"})]), Turn(text="42")]
        ),
    }
    settings = scripted_settings(harness.model, agents_file=agents(tmp_path, models))
    async with harness.worker(settings=settings, tools=[note_tool(notes)]):
        handle = await harness.start("What is the answer?", agent_id="lead")
        result = await handle.result()
        journal = await handle.query("journal", result_type=Journal)
        child = await child_of(harness, journal)
        config = await started_config(child)
    assert result.output == "42"
    assert notes == ["the answer is 42"]  # the child's effect landed
    assert config.agent_id == "research" and config.tools == ["add", "note_finding"]
    [first_child_call, _] = harness.model.requests_for(models["research"])
    offered = {t["function"]["name"] for t in first_child_call.body["tools"]}
    assert offered == {"note_finding", "add"}
    # The parent was told what the child can do: its description and its tools.
    [intro] = [
        str(m["content"])
        for m in harness.model.requests_for(models["lead"])[0].body["messages"]
        if m["role"] == "system" and "delegate" in str(m["content"])
    ]
    assert "research: Finds facts and notes them (tools: add, note_finding)" in intro


async def test_a_delegation_may_narrow_the_child_s_tools_but_never_widen_them(
    harness: Harness, tmp_path: Path
) -> None:
    models = {
        "lead": harness.new_model(
            [
                Turn(
                    tool_calls=[
                        (
                            "delegate",
                            {"agent": "research", "task": "fetch it", "tools": ["web_fetch"]},
                        ),
                        ("delegate", {"agent": "research", "task": "add", "tools": ["add"]}),
                    ]
                ),
                Turn(text="done"),
            ]
        ),
        "research": harness.new_model([Turn(text="3")]),
    }
    settings = scripted_settings(harness.model, agents_file=agents(tmp_path, models))
    async with harness.worker(settings=settings, tools=[note_tool([])]):
        handle = await harness.start("go", agent_id="lead")
        await handle.result()
        journal = await handle.query("journal", result_type=Journal)
        config = await started_config(await child_of(harness, journal))
    widened, narrowed = harness.model.requests_for(models["lead"])[1].tool_result_texts()
    assert "may not use ['web_fetch']" in widened and "add" in widened
    assert narrowed == "3"
    assert config.tools == ["add"]
    [child_call] = harness.model.requests_for(models["research"])
    assert [t["function"]["name"] for t in child_call.body["tools"]] == ["add"]


# ---- one budget for the tree -------------------------------------------------------------


async def test_parent_and_children_never_exceed_the_parent_s_max_iterations(
    harness: Harness, tmp_path: Path
) -> None:
    """The child tries to go on calling tools; parent and child together make at most the
    parent's four model calls (before, 7 were made while the result said 4)."""
    models = {
        "lead": harness.new_model(
            [delegating("Count."), delegating("Count more."), Turn(text="?")]
        ),
        "research": harness.new_model(
            [Turn(tool_calls=[("add", {"a": n, "b": 1})]) for n in range(10)]
        ),
    }
    settings = scripted_settings(harness.model, agents_file=agents(tmp_path, models))
    async with harness.worker(settings=settings, tools=[note_tool([])]):
        handle = await harness.start("Count.", agent_id="lead", max_iterations=4)
        error = await failure(handle)
        state = await handle.query("state", result_type=LoopState)
    made = len(harness.model.requests_for(models["lead"])) + len(
        harness.model.requests_for(models["research"])
    )
    assert made <= 4
    assert error.type == "BudgetExceeded" and error.details[0]["budget"] == "max_iterations"
    assert "by its critic and delegated children" in error.message
    assert state.model_calls == made and state.model_calls <= 4


async def test_a_child_cannot_spend_past_its_carve(harness: Harness, tmp_path: Path) -> None:
    """Carved 6 000 tokens, the child's model answers 2 500 tokens a call: its third answer is
    capped at what is left, so it ends past its carve by less than one call's input (before,
    it spent 7 500)."""
    big = [Turn(tool_calls=[("add", {"a": 1, "b": 2})], input_tokens=100, output_tokens=2_400)]
    models = {
        "lead": harness.new_model([delegating("Work.", max_tokens=6_000), Turn(text="done")]),
        "research": harness.new_model(big * 5),
    }
    settings = scripted_settings(harness.model, agents_file=agents(tmp_path, models))
    async with harness.worker(settings=settings, tools=[note_tool([])]):
        handle = await harness.start("Work.", agent_id="lead")
        result = await handle.result()
        state = await handle.query("state", result_type=LoopState)
    [record] = state.delegations
    assert record.status == "failed" and "BudgetExceeded" in (record.error or "")
    assert record.max_tokens == 6_000
    assert 2 * 2_500 < record.usage.total_tokens < 6_000 + 100  # within one call's input
    calls = harness.model.requests_for(models["research"])
    assert len(calls) == 3 and calls[2].body["max_tokens"] < 2_400
    # What the child spent is the parent's.
    assert result.usage.total_tokens == record.usage.total_tokens + 30


async def test_a_child_s_working_time_is_carved_from_the_parent_s(
    harness: Harness, tmp_path: Path
) -> None:
    models = {
        # The lead's own answer comes too late as well: whether the child's carved time or
        # the lead's runs out first (the two end together), the lead ends on its timeout.
        "lead": harness.new_model([delegating("Think hard."), Turn(text="gave up", delay=30)]),
        "research": harness.new_model([Turn(text="finally", delay=30)]),
    }
    settings = scripted_settings(harness.model, agents_file=agents(tmp_path, models))
    async with harness.worker(settings=settings, tools=[note_tool([])]):
        handle = await harness.start("go", agent_id="lead", timeout=4)
        error = await failure(handle)
        journal = await handle.query("journal", result_type=Journal)
        config = await started_config(await child_of(harness, journal))
    [started] = [e for e in journal.entries if isinstance(e, DelegationStarted)]
    assert 0 < started.timeout_seconds <= 4
    assert config.timeout is not None and config.timeout.total_seconds() <= 4
    assert error.type == "BudgetExceeded" and error.details[0]["budget"] == "timeout"


async def test_the_agents_file_caps_the_delegation_depth(harness: Harness, tmp_path: Path) -> None:
    models = {"lead": harness.new_model([Turn(text="never asked")])}
    path = agents(tmp_path, models, lead="max_delegation_depth = 1")
    settings = scripted_settings(harness.model, agents_file=path)
    async with harness.worker(settings=settings, tools=[note_tool([])]):
        handle = await harness.start("go", agent_id="lead", max_delegation_depth=10)
        error = await failure(handle)
    assert error.type == "InvalidConfig"
    assert "config.max_delegation_depth=10 is above the ceiling of agent 'lead': 1" in (
        error.message
    )
    assert harness.model.requests_for(models["lead"]) == []


async def test_a_critic_that_would_spend_past_the_budget_is_stopped(
    harness: Harness, tmp_path: Path
) -> None:
    """``max_total_tokens: 4000``, and a task of 10 000 bytes that orga estimates at about
    2 500 tokens (4 bytes a token), so the critic is asked, but whose digits the critic's
    provider counts as 9 000 input tokens: a count its request could hold
    (``orga.providers.usage``), and past the budget. Before, the loop completed with
    ``total_tokens`` over 9 000."""
    readings = "Check the readings: " + "7,3;" * 2_495  # 10 000 bytes
    models = {
        "lead": harness.new_model([Turn(text="an answer")]),
        "critic": harness.new_model(
            [Turn(tool_calls=[("submit_review", {"verdict": "approve"})], input_tokens=9_000)]
        ),
    }
    settings = scripted_settings(harness.model, agents_file=agents(tmp_path, models))
    async with harness.worker(settings=settings, tools=[note_tool([])]):
        handle = await harness.start(
            readings,
            agent_id="lead",
            max_total_tokens=4_000,
            critic={"kind": "model", "agent": "critic"},
        )
        error = await failure(handle)
    assert error.type == "BudgetExceeded" and error.details[0]["budget"] == "max_total_tokens"
    assert "critic 'critic'" in error.message and "over max_total_tokens=4000" in error.message
    [review] = harness.model.requests_for(models["critic"])
    assert review.body["max_tokens"] < 4_000 - 15  # its answer was capped to what was left


async def test_a_critic_is_not_asked_when_nothing_is_left(harness: Harness, tmp_path: Path) -> None:
    models = {
        "lead": harness.new_model([Turn(text="an answer", input_tokens=60, output_tokens=40)]),
        "critic": harness.new_model([verdict("approve")]),
    }
    settings = scripted_settings(harness.model, agents_file=agents(tmp_path, models))
    async with harness.worker(settings=settings, tools=[note_tool([])]):
        handle = await harness.start(
            "go", agent_id="lead", max_total_tokens=120, critic={"kind": "model", "agent": "critic"}
        )
        error = await failure(handle)
    assert error.type == "BudgetExceeded" and error.details[0]["budget"] == "max_total_tokens"
    assert harness.model.requests_for(models["critic"]) == []


def _offered(request: Any) -> list[str]:
    return sorted(t["function"]["name"] for t in request.body.get("tools", []))


async def test_a_loop_that_names_no_tools_uses_its_agents(harness: Harness, tmp_path: Path) -> None:
    """Issue 65, a regression seen from the CLI: ``orga run "What is 2+3?" --agent demo``
    (agent ``demo``: ``tools = ["add"]``) answered "No tools were given to me". A top-level
    loop that names no tools uses its agent's (the guide's rule); one that names some, only
    those; an agent with delegates has its tools and ``delegate``; the implicit agent of a
    worker without an agents file hands out no tool unasked."""
    path = tmp_path / "agents.toml"
    path.write_text(
        '[agents.demo]\ntools = ["add"]\n\n'
        '[agents.lead]\ntools = ["add"]\ndelegates = ["helper"]\n\n'
        '[agents.helper]\ntools = ["add"]\n'
    )
    added = harness.new_model([Turn(tool_calls=[("add", {"a": 2, "b": 3})]), Turn(text="5")])
    narrowed = harness.new_model([Turn(text="none")])
    leading = harness.new_model([Turn(text="planned")])
    implicit = harness.new_model([Turn(text="no tools")])
    async with harness.worker(settings=scripted_settings(harness.model, agents_file=path)):
        demo = await harness.run("What is 2+3?", model=added, agent_id="demo")
        named = await harness.run("Hello", model=narrowed, agent_id="lead", tools=["delegate"])
        lead = await harness.run("Plan", model=leading, agent_id="lead")
    async with harness.worker():
        bare = await harness.run("Hello", model=implicit)
    assert demo.output == "5"
    [first, _] = harness.model.requests_for(added)
    assert _offered(first) == ["add"]
    assert _offered(harness.model.requests_for(narrowed)[0]) == ["delegate"]  # what it named
    assert _offered(harness.model.requests_for(leading)[0]) == ["add", "delegate"]
    assert _offered(harness.model.requests_for(implicit)[0]) == []
    assert named.output == "none" and lead.output == "planned" and bare.output == "no tools"


@tool(description="Shout the text back.")
def shout(text: str) -> str:
    return text.upper()


async def test_a_worker_without_a_named_tool_asks_one_that_has_it(harness: Harness) -> None:
    """Issue 65: beside a worker that registers ``shout``, a second worker of the queue does
    not; of four loops naming ``shout``, two failed ``InvalidConfig … tools this worker does
    not have`` (their setup landed there), though its start-up warning says calls wait for a
    worker that has the tool. Then such a setup failed its workflow task, which the server
    made again after a growing backoff (loops waited 10 to 35 s) — and a loop whose workflow
    stayed on the worker without the tool had the gate deny its calls ("not registered on the
    worker that checked the call").

    Here every workflow runs on the worker without ``shout`` (the one with it runs only
    activities): each setup and each gate's check is asked again as a plain activity, which
    the worker with ``shout`` answers; every call is allowed and runs there, once — a task's
    setup and step too."""
    script = [Turn(tool_calls=[("shout", {"text": "hi"})]), Turn(text="done")]
    models = [harness.new_model(script) for _ in range(8)]  # one script a loop
    without = await harness.another_process()
    async with http_client() as http:  # closed with the test (the plugin's own would leak)
        with_tool = OrgaPlugin(
            tools=[shout],
            settings=scripted_settings(harness.model),
            store=TEST_STORE,
            http=http,
            tracing=False,
        )
        parts = with_tool.parts(harness.client)
        # A worker of the queue that runs only activities, and says what it registers.
        identity = harness.client.identity
        publish_tools(TEST_STORE, harness.task_queue, identity, parts.registry.names())
        activities_only = Worker(
            harness.client, task_queue=harness.task_queue, activities=parts.activities()
        )
        async with without.worker(), activities_only:
            await _both_run(harness, without, models)


async def _both_run(harness: Harness, without: Harness, models: list[str]) -> None:
    await eventually(lambda: _served_by_two(harness), "both workers of the queue are seen")
    handles = [await harness.start("Shout hi", model=m, tools=["shout"]) for m in models]
    results = [await handle.result() for handle in handles]
    journals = [await handle.query("journal", result_type=Journal) for handle in handles]
    step = {"id": "s", "action": {"kind": "tool", "tool": "shout", "arguments": {"text": "hi"}}}
    task = await harness.start_task([step])  # a task's setup and step: the same way
    done = await task.result()
    histories = [await handle.fetch_history() for handle in [*handles, task]]
    assert (done.status, [s.result for s in done.steps]) == ("completed", ["HI"])
    assert [r.output for r in results] == ["done"] * 8
    for journal in journals:
        decisions = [
            d.decision
            for e in journal.entries
            if isinstance(e, PolicyEvaluated)
            for d in e.decisions
            if d.tool == "shout"
        ]
        outcomes = [
            (o.tool, o.status)
            for e in journal.entries
            if isinstance(e, ObservationsCollected)
            for o in e.outcomes
        ]
        assert (decisions, outcomes) == (["allow"], [("shout", "ok")]), journal
    workflow_workers = {
        e.workflow_task_started_event_attributes.identity
        for history in histories
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED
    }
    assert workflow_workers == {without.client.identity}
    assert not any(
        e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED
        for history in histories
        for e in history.events
    )


async def _served_by_two(harness: Harness) -> bool:
    from orga.runtime.presence import registries
    from tests.harness import TEST_STORE

    found = await registries(harness.client, harness.task_queue, TEST_STORE, with_pollers=True)
    return len(found) >= 2 and any(t is not None and "shout" in t for t in found.values())

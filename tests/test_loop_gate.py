"""The gate inside a running loop: Cedar decisions, a denied final answer, and the record."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from orga.cli.worker import build_workers
from orga.contracts.errors import InvalidConfig
from orga.contracts.journal import Journal, PolicyEvaluated
from orga.plugin import OrgaPlugin
from orga.scripted.server import Turn
from tests.harness import Harness, scripted_settings
from tests.helpers import POLICY_EXAMPLES, conversation
from tests.sample_tools import log_search_tools


async def test_a_denied_answer_goes_back_to_the_model(harness: Harness) -> None:
    model = harness.new_model(
        [Turn(text="I guess 4."), Turn(tool_calls=[("add", {"a": 2, "b": 2})]), Turn(text="4")]
    )
    settings = scripted_settings(harness.model, policy_dir=POLICY_EXAMPLES)
    async with harness.worker(settings=settings):
        handle = await harness.start(
            "What is 2+2?", model=model, tools=["add"], policy="cedar", agent_id="careful"
        )
        result = await handle.result()
        journal = await handle.query("journal", result_type=Journal)
        messages = await conversation(handle)
    assert result.output == "4" and result.iterations == 3
    gates = [e for e in journal.entries if isinstance(e, PolicyEvaluated)]
    assert [d.decision for g in gates for d in g.decisions] == ["deny", "allow", "allow"]
    assert gates[0].decisions[0].policy_ids == ["no-blind-answers"]
    assert gates[1].decisions[0].policy_ids == ["arithmetic"]
    assert all(g.engine == "cedar" and g.policy_hash for g in gates)
    feedback = messages[2]
    assert feedback.role == "user"
    assert "answer only after at least one reasoning step" in feedback.content
    # The model saw its own denied answer followed by the feedback.
    second = harness.model.requests_for(model)[1].body["messages"]
    assert [m["role"] for m in second] == ["user", "assistant", "user"]


async def test_cedar_denial_of_a_call_is_fed_back(harness: Harness) -> None:
    model = harness.new_model(
        [
            Turn(tool_calls=[("file_read", {"path": "docs/secret.txt"})]),
            Turn(text="I may not read it."),
        ]
    )
    settings = scripted_settings(harness.model, policy_dir=POLICY_EXAMPLES)
    async with harness.worker(settings=settings):
        handle = await harness.start("read it", model=model, tools=["file_read"], policy="cedar")
        await handle.result()
        messages = await conversation(handle)
    result = messages[2].tool_results[0]
    assert result.status == "denied" and result.is_error
    assert "never read" in result.content and "no-secrets" in result.content


async def test_a_worker_with_invalid_policies_refuses_to_start(
    harness: Harness, tmp_path: Path
) -> None:
    shutil.copytree(POLICY_EXAMPLES, tmp_path / "policies")
    (tmp_path / "policies" / "broken.cedar").write_text(
        'permit(principal, action == Action::"nope", resource);'
    )
    settings = scripted_settings(harness.model, policy_dir=tmp_path / "policies")
    with pytest.raises(InvalidConfig, match=r"broken\.cedar"):
        build_workers(
            harness.client,
            settings,
            OrgaPlugin(settings=settings, tracing=False),
            task_queue=harness.task_queue,
        )


async def test_a_modified_call_runs_as_modified_and_the_model_sees_it(
    harness: Harness, tmp_path: Path
) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "guide.md").write_text("x" * 30_000)
    model = harness.new_model(
        [
            Turn(tool_calls=[("file_read", {"path": "docs/guide.md", "max_chars": 25_000})]),
            Turn(text="read"),
        ]
    )
    settings = scripted_settings(harness.model, policy_dir=POLICY_EXAMPLES, file_root=tmp_path)
    async with harness.worker(settings=settings):
        handle = await harness.start(
            "read the guide", model=model, tools=["file_read"], policy="cedar"
        )
        await handle.result()
        messages = await conversation(handle)
    call = messages[1].tool_calls[0]
    assert '"max_chars": 20000' in call.arguments
    result = messages[2].tool_results[0]
    assert result.status == "ok" and len(result.content) == 20_000
    sent = harness.model.requests_for(model)[1].body["messages"][1]["tool_calls"][0]
    assert '"max_chars": 20000' in sent["function"]["arguments"]


async def test_the_default_gate_decides_each_call_once_where_the_model_call_ran(
    harness: Harness,
) -> None:
    """Under the default gate the model call decides its answer's calls on its worker; the
    loop takes each call's decision by what it was about, so a turn one of whose calls the
    evidence tracker answered (a search without its judgement) needs no policy call, and a
    call the loop runs with other arguments than the model's (judgement stripped) is decided
    again by the policy activity, as it will run."""
    model = harness.new_model(
        [
            Turn(tool_calls=[("search_logs", {"query": "timeout"})]),
            Turn(tool_calls=[("search_logs", {"query": "disk"}), ("add", {"a": 2, "b": 3})]),
            Turn(tool_calls=[("search_logs", {"query": "disk", "previous_gain": "GAINED"})]),
            Turn(text="5, and the logs say timeout"),
        ]
    )
    async with harness.worker(tools=log_search_tools([])):
        handle = await harness.start("why?", model=model, tools=["search_logs", "add"])
        result = await handle.result()
        journal = await handle.query("journal", result_type=Journal)
    assert result.output == "5, and the logs say timeout"
    gates = {e.iteration: e for e in journal.entries if isinstance(e, PolicyEvaluated)}
    assert [(d.tool, d.decision) for d in gates[2].decisions] == [("add", "allow")]
    assert [(d.tool, d.decision) for d in gates[3].decisions] == [("search_logs", "allow")]
    history = await handle.fetch_history()
    policy_calls = [
        e.event_id
        for e in history.events
        if e.HasField("marker_recorded_event_attributes")
        and b"evaluate_policy" in e.marker_recorded_event_attributes.SerializeToString()
    ]
    assert len(policy_calls) == 1  # turn 3's, with the judgement stripped; none for 1 and 2

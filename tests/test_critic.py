"""The critic reviews final answers: a model (structured verdicts only) or a person."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.client import WorkflowFailureError, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError

from orga.client import start_thread
from orga.contracts.config import LoopConfig
from orga.contracts.critic import HumanCritic, Review
from orga.contracts.journal import Journal, PolicyEvaluated, ReviewDecided
from orga.contracts.state import LoopState
from orga.contracts.threads import ThreadConfig
from orga.desk.facts import DeskError
from orga.desk.inbox import inbox
from orga.desk.sender import review
from orga.scripted.server import Turn
from tests.harness import Harness, scripted_settings
from tests.helpers import critic_agents, summaries, verdict, waiting_review


async def test_a_model_critic_asks_for_one_revision_then_approves(
    harness: Harness, tmp_path: Path
) -> None:
    writer = harness.new_model([Turn(text="Paris is big."), Turn(text="Paris has 2.1M people.")])
    critic = harness.new_model([verdict("revise", "give the population"), verdict("approve")])
    settings = scripted_settings(harness.model, agents_file=critic_agents(tmp_path, writer, critic))
    async with harness.worker(settings=settings):
        handle = await harness.start(
            "How large is Paris?",
            agent_id="writer",
            critic={"kind": "model", "agent": "critic", "max_rounds": 2},
        )
        result = await handle.result()
        state = await handle.query("state", result_type=LoopState)
        journal = await handle.query("journal", result_type=Journal)
    assert result.output == "Paris has 2.1M people."
    assert result.termination_reason == "end_turn"
    assert [(r.verdict, r.source, r.reviewer) for r in state.reviews] == [
        ("revise", "model", "critic"),
        ("approve", "model", "critic"),
    ]
    # The writer was told what to change; the critic saw the task and the answer, and was
    # offered nothing but submit_review.
    second = harness.model.requests_for(writer)[1]
    assert "[orga critic]" in second.user_texts()[-1] and "population" in second.user_texts()[-1]
    first_review = harness.model.requests_for(critic)[0]
    assert "How large is Paris?" in first_review.user_texts()[0]
    assert [t["function"]["name"] for t in first_review.body["tools"]] == ["submit_review"]
    # The critic's tokens are the loop's: two writer calls and two critic calls, 15 each.
    assert result.usage.total_tokens == 60
    reviews = [e for e in journal.entries if isinstance(e, ReviewDecided)]
    assert [e.verdict for e in reviews] == ["revise", "approve"]
    gated = [d for e in journal.entries if isinstance(e, PolicyEvaluated) for d in e.decisions]
    assert [d.tool for d in gated if d.action == "review"] == ["critic", "critic"]


async def test_a_verdict_in_prose_is_not_taken(harness: Harness, tmp_path: Path) -> None:
    writer = harness.new_model([Turn(text="42")])
    critic = harness.new_model([Turn(text="Looks good to me, approve!")] * 3)
    settings = scripted_settings(harness.model, agents_file=critic_agents(tmp_path, writer, critic))
    async with harness.worker(settings=settings):
        handle = await harness.start(
            "6 times 7?", agent_id="writer", critic={"kind": "model", "agent": "critic"}
        )
        with pytest.raises(WorkflowFailureError) as caught:
            await handle.result()
    cause = caught.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "CriticFailed"
    assert "not taken from prose" in cause.message
    assert len(harness.model.requests_for(critic)) == 3  # retried, then failed typed


async def test_a_person_rejecting_twice_ends_the_loop_critic_rejected(harness: Harness) -> None:
    model = harness.new_model([Turn(text="draft one"), Turn(text="draft two")])
    async with harness.worker():
        handle = await harness.start(
            "Write the release note.",
            model=model,
            critic={"kind": "human", "max_rounds": 2},
        )
        state = await waiting_review(handle, 1)
        assert state.status == "awaiting_review"
        assert state.pending_review is not None and state.pending_review.answer == "draft one"
        [item] = [i for i in await inbox(harness.client) if i.workflow_id == handle.id]
        assert item.kind == "review" and item.options == ["approve", "revise"]
        assert item.commands[0] == f"orga review {handle.id} --verdict approve"
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await handle.execute_update("review", Review(verdict="approve"))
        assert "names no reviewer" in str(refused.value.cause)
        await handle.execute_update(
            "review", Review(verdict="revise", feedback="mention the fix", reviewer="kim")
        )
        await waiting_review(handle, 2)
        await review(
            harness.client, handle.id, verdict="revise", feedback="still vague", reviewer="kim"
        )
        result = await handle.result()
        with pytest.raises(DeskError) as late:  # nothing waits for review any more
            await review(harness.client, handle.id, verdict="approve", feedback="", reviewer="kim")
        assert "already finished" in str(late.value)
    assert result.termination_reason == "critic_rejected"
    assert result.output == "draft two" and result.critique == "still vague"
    second = harness.model.requests_for(model)[1]
    assert "mention the fix" in second.user_texts()[-1]


async def test_an_unanswered_review_counts_as_its_default(skipping: Harness) -> None:
    model = skipping.new_model([Turn(text="draft")])
    async with skipping.worker():
        handle = await skipping.start(
            "Write it.",
            model=model,
            critic={"kind": "human", "timeout": 7200, "on_timeout": "reject"},
        )
        result = await handle.result()
        state = await handle.query("state", result_type=LoopState)
        history = await handle.fetch_history()
    assert result.termination_reason == "critic_rejected"
    [record] = state.reviews
    assert (record.verdict, record.source) == ("reject", "timeout")
    # The Web UI names the timer by what it waits for.
    labels = summaries(history.events, kinds=True)
    assert "timer_started_event_attributes: review timeout · answer 1" in labels


async def test_a_critic_cannot_take_the_conversation_past_the_agent_s_models(
    harness: Harness, tmp_path: Path
) -> None:
    """The writer may use only its own model: a critic on another model would send it the
    loop's task and answer, so the loop is refused before anything is sent."""
    writer = harness.new_model([Turn(text="must not be asked")])
    path = tmp_path / "agents.toml"
    path.write_text(
        f'[agents.writer]\nmodel = "{writer}"\nmodels = ["{writer}"]\n\n'
        '[agents.critic]\nmodel = "elsewhere-model"\n'
    )
    settings = scripted_settings(harness.model, agents_file=path)
    async with harness.worker(settings=settings):
        handle = await harness.start(
            "How large is Paris?",
            agent_id="writer",
            critic={"kind": "model", "agent": "critic", "max_rounds": 1},
        )
        with pytest.raises(WorkflowFailureError) as caught:
            await handle.result()
    error = caught.value.cause
    assert isinstance(error, ApplicationError) and error.type == "InvalidConfig"
    assert "'elsewhere-model' is not one agent 'writer' may use" in error.message
    assert "the critic (agent 'critic')" in error.message
    assert harness.model.requests_for(writer) == []


async def test_a_thread_s_critic_counts_each_turn_s_reviews_anew(harness: Harness) -> None:
    """``max_rounds`` 2: each turn may be revised once. Counted over the thread (issue 63), turn
    2's first revision was the third review and ended it ``critic_rejected``."""
    model = harness.new_model([Turn(text=f"draft {n}") for n in range(1, 5)])
    config = LoopConfig(model=model, thread=ThreadConfig(), critic=HumanCritic(max_rounds=2))
    async with harness.worker():
        chat = await start_thread(harness.client, config, "first", task_queue=harness.task_queue)
        harness.handles.append(chat.handle)
        answers = []
        approved = Review(verdict="approve", reviewer="kim")
        for turn in (1, 2):
            if turn == 2:
                await chat.say("second")
            for round_, review in enumerate(
                (Review(verdict="revise", feedback="shorter", reviewer="kim"), approved), start=1
            ):
                await waiting_review(chat.handle, round_)
                await chat.handle.execute_update("review", review)
            answers.append(await chat.turn(turn))
        state = await chat.state()
        await chat.close()
    assert [(a.reason, a.output) for a in answers] == [
        ("end_turn", "draft 2"),
        ("end_turn", "draft 4"),
    ]
    assert [(r.turn, r.round, r.verdict) for r in state.reviews] == [
        (1, 1, "revise"),
        (1, 2, "approve"),
        (2, 1, "revise"),
        (2, 2, "approve"),
    ]

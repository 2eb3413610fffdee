"""``anchored_summary`` loops fold what leaves the context window into a running summary."""

from __future__ import annotations

import itertools
from typing import Any

from temporalio.client import WorkflowHandle

from orga.activities.summary import transcript
from orga.cli.journal_text import render_entry
from orga.contracts.conversation import Message, ToolCall, ToolResult
from orga.contracts.inference import (
    CALL_MODEL,
    SUMMARISE_CONTEXT,
    InferenceRequest,
    SummaryRequest,
    Usage,
)
from orga.contracts.journal import ContextSummarised, Journal
from orga.contracts.state import LoopState
from orga.core.context import SUMMARY_MARKER, summary_tokens
from orga.scripted.server import Raw, RecordedRequest, Turn
from tests.harness import Harness
from tests.helpers import FACT, PAGES, SUMMARY_USAGE, is_summariser, read_page, reader

BUDGET = 600


def test_the_transcript_shows_every_turn_and_cuts_long_ones_to_their_share() -> None:
    call = ToolCall(id="c1", name="read_page", arguments='{"page": 1}')
    turns = [
        Message(role="assistant", content="reading", tool_calls=[call]),
        Message(
            role="tool",
            tool_results=[ToolResult(call_id="c1", name="read_page", content="x" * 5_000)],
        ),
        Message(role="user", content=FACT),
    ]
    text = transcript(turns, 1_200)
    pieces = text.split("\n\n")
    assert pieces[0] == "assistant: reading"
    assert pieces[1] == 'assistant calls read_page({"page": 1})'
    assert pieces[2].startswith("result of read_page: xxx") and "characters left out" in pieces[2]
    assert len(pieces[2]) <= 300 and pieces[3] == f"user: {FACT}"


def test_the_journal_line_says_what_was_folded_or_why_not() -> None:
    stamp = {"seq": 7, "at": "2026-01-01T00:00:00Z", "agent_id": "a", "iteration": 9}
    made = ContextSummarised(
        **stamp, start=15, through=25, folded=10, tokens=40, usage=Usage(total_tokens=340)
    )
    assert render_entry(made).endswith(
        "ContextSummarised      10 message(s) folded in: the summary covers 25 (40 tokens, "
        "340 spent)"
    )
    failed = ContextSummarised(**stamp, start=15, through=25, error="provider said\nno")
    assert "messages [15, 25) NOT summarised (provider said no): a marker stands for them" in (
        render_entry(failed)
    )


async def requests_per_run(
    harness: Harness, handle: WorkflowHandle[Any, Any]
) -> list[list[InferenceRequest | SummaryRequest]]:
    """The model calls' and summaries' requests, in order, run by run (from the histories)."""
    converter = harness.client.data_converter
    run_id = handle.first_execution_run_id
    found: list[list[InferenceRequest | SummaryRequest]] = []
    while run_id:
        history = await harness.client.get_workflow_handle(handle.id, run_id=run_id).fetch_history()
        requests: list[InferenceRequest | SummaryRequest] = []
        for event in history.events:
            if not event.HasField("activity_task_scheduled_event_attributes"):
                continue
            scheduled = event.activity_task_scheduled_event_attributes
            kind = {CALL_MODEL: InferenceRequest, SUMMARISE_CONTEXT: SummaryRequest}.get(
                scheduled.activity_type.name
            )
            if kind is not None:
                [request] = await converter.decode(scheduled.input.payloads, [kind])
                requests.append(request)
        found.append(requests)
        last = history.events[-1]
        run_id = last.workflow_execution_continued_as_new_event_attributes.new_execution_run_id
    return found


async def test_a_long_loop_answers_from_its_summary_across_continues(harness: Harness) -> None:
    model = harness.new_model([reader()] * 80)
    async with harness.worker(tools=[read_page]):
        handle = await harness.start(
            "Read the handbook page by page, then tell me the vault code.",
            model=model,
            tools=["read_page"],
            context_strategy="anchored_summary",
            context_token_budget=BUDGET,
            max_iterations=60,
            max_total_tokens=100_000,
            max_history_events=200,
        )
        result = await handle.result()
        state = await handle.query("state", result_type=LoopState)
        journal = await handle.query("journal", result_type=Journal)
        runs = await requests_per_run(harness, handle)
    # The answer needed page 1, which left the window long before: it came from the summary.
    assert result.output == "The vault code is 4711."
    requests = harness.model.requests_for(model)
    summaries = [r for r in requests if is_summariser(r)]
    assert len(summaries) >= 2
    last = requests[-1].body["messages"]
    assert not any(FACT in str(m["content"]) for m in last if m["role"] == "tool")
    assert [m["role"] for m in last[:2]] == ["user", "user"]
    assert last[0]["content"].startswith("Read the handbook")  # the anchor: the task
    assert last[1]["content"].startswith(SUMMARY_MARKER) and FACT in last[1]["content"]
    assert not any(str(m["content"]).startswith("[orga: ") for m in last)
    # Only the turns that left since the previous summary were folded in, with that summary.
    second = summaries[1].user_texts()[-1]
    assert "Summary so far:\nRead pages 1," in second and "Page 1:" not in second
    # Each summary asked for at most a quarter of the context budget.
    assert all(s.body["max_tokens"] == summary_tokens(BUDGET) for s in summaries)
    # The summaries are the loop's spend: tokens, and a model call each.
    made = [e for e in journal.entries if isinstance(e, ContextSummarised)]
    assert len(made) == len(summaries) and not any(e.error for e in made)
    assert all(e.usage.total_tokens == sum(SUMMARY_USAGE) for e in made)
    main_calls = len(requests) - len(summaries)
    assert result.iterations == main_calls == PAGES + 1
    assert result.usage.total_tokens == 15 * main_calls + sum(SUMMARY_USAGE) * len(summaries)
    assert state.model_calls == main_calls + len(summaries)
    # Every summary had the tokens the loop had left as its budget.
    folded = [r for run in runs for r in run if isinstance(r, SummaryRequest)]
    assert len(folded) == len(summaries)
    assert all(r.token_budget is not None and r.token_budget < 100_000 for r in folded)
    # The summary crossed continue-as-new: a later run's first model call shows it.
    assert len(runs) >= 2
    carried = [
        run[0]
        for run in runs[1:]
        if isinstance(run[0], InferenceRequest) and run[0].context_summary is not None
    ]
    assert carried and all(FACT in (r.context_summary or "") for r in carried)
    assert all(r.summarised_through > 0 for r in carried)


async def test_a_summariser_that_fails_leaves_a_marker_and_the_loop_goes_on(
    harness: Harness,
) -> None:
    calls = 0

    def step(request: RecordedRequest) -> Turn | Raw:
        nonlocal calls
        if is_summariser(request):
            return Raw(status=400, body={"error": {"message": "no summaries today"}})
        calls += 1
        if calls <= 10:
            return Turn(tool_calls=[("read_page", {"page": calls})])
        return Turn(text="done reading")

    model = harness.new_model([step] * 30)
    async with harness.worker(tools=[read_page]):
        result = await harness.run(
            "Read ten pages.",
            model=model,
            tools=["read_page"],
            context_strategy="anchored_summary",
            context_token_budget=BUDGET,
            max_iterations=30,
        )
        journal = await harness.client.get_workflow_handle(harness.handles[-1].id).query(
            "journal", result_type=Journal
        )
    assert result.output == "done reading" and result.iterations == 11
    failed = [e for e in journal.entries if isinstance(e, ContextSummarised)]
    assert failed and all(e.error and "no summaries today" in e.error for e in failed)
    assert all(e.usage.total_tokens == 0 for e in failed)
    last = harness.model.requests_for(model)[-1].body["messages"]
    assert last[1]["content"].startswith("[orga: ")
    assert not any(str(m["content"]).startswith(SUMMARY_MARKER) for m in last)
    assert result.usage.total_tokens == 15 * 11  # a failed summary charged nothing


async def test_a_summariser_that_answers_nothing_is_charged_and_not_asked_every_turn(
    harness: Harness,
) -> None:
    """The attack: a summariser that answers without text (a reasoning model that spends its
    output on thinking) was retried three times, charged nothing and asked again before every
    model call — a loop capped at 20 000 tokens had 268 200 tokens served and 4 200 charged.
    Now each answer is charged as served, the summariser is asked again only when more turns
    must leave the window, and the loop goes on within its budget."""
    pages, served, calls = 24, 0, 0

    def step(request: RecordedRequest) -> Turn:
        nonlocal served, calls
        if is_summariser(request):
            thinking = min(150, request.body["max_tokens"])  # all its output, and no text
            served += 300 + thinking
            return Turn(text="", input_tokens=300, output_tokens=thinking, stop="max_tokens")
        served += 15
        calls += 1
        if calls <= pages:
            return Turn(tool_calls=[("read_page", {"page": calls})])
        return Turn(text="done reading")

    model = harness.new_model([step] * 60)
    async with harness.worker(tools=[read_page]):
        handle = await harness.start(
            f"Read {pages} pages.",
            model=model,
            tools=["read_page"],
            context_strategy="anchored_summary",
            context_token_budget=BUDGET,
            max_iterations=50,
            max_total_tokens=20_000,
        )
        result = await handle.result()
        journal = await handle.query("journal", result_type=Journal)
    assert result.output == "done reading" and result.iterations == pages + 1
    assert result.usage.total_tokens == served <= 20_000  # every token served is charged
    requests = harness.model.requests_for(model)
    asked = [n for n, r in enumerate(requests) if is_summariser(r)]
    # Asked once per fold, never retried: several of the loop's calls between two asks.
    assert len(asked) >= 2 and all(b - a > 3 for a, b in itertools.pairwise(asked))
    folds = [e for e in journal.entries if isinstance(e, ContextSummarised)]
    assert len(folds) == len(asked)
    assert all(e.error and "answered with no text" in e.error for e in folds)
    assert all(e.usage.total_tokens == 450 for e in folds)
    assert result.model_calls == pages + 1 + len(asked)
    assert all(a.through < b.through for a, b in itertools.pairwise(folds))

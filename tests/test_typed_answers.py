"""Typed answers: a loop names the shape of its answer, gets a validated value, and a model
that answers badly is shown why, charged for every try, and stopped after its retries; the
provider is asked for structured output, and the final-answer gate and the critic judge the
value."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError

import orga
from orga.contracts.errors import InvalidConfig
from orga.contracts.journal import PolicyEvaluated
from orga.core.typed_answers import schema_text
from orga.scripted.server import RecordedRequest, Turn
from tests.harness import Harness, scripted_settings
from tests.helpers import critic_agents, failure, refund_policies, verdict


class Refund(BaseModel):
    refund_id: str
    amount: int


async def test_a_typed_loop_returns_a_validated_value_after_two_bad_answers(
    harness: Harness,
) -> None:
    model = harness.new_model(
        [
            Turn(text="I refunded 4200 cents, the id is r-7."),  # prose, not JSON
            Turn(text='{"refund_id": "r-7", "amount": "4200 cents"}'),  # not an integer
            Turn(text='```json\n{"refund_id": "r-7", "amount": 4200}\n```'),
        ]
    )
    async with harness.worker():
        loop = await orga.start_loop(
            harness.client,
            "Refund order 7 and say what you did.",
            orga.LoopConfig(provider="openai", model=model),
            task_queue=harness.task_queue,
            output_type=Refund,
        )
        harness.handles.append(loop.handle)
        result = await loop.result()
    assert result.value == Refund(refund_id="r-7", amount=4200)
    assert result.iterations == 3 and result.model_calls == 3  # every try was paid for
    requests = harness.model.requests_for(model)
    assert "is not JSON" in requests[1].user_texts()[-1]
    assert "amount: '4200 cents' is not of type 'integer'" in requests[2].user_texts()[-1]
    assert (result.usage.input_tokens, result.usage.output_tokens) == (3 * 10, 3 * 5)


async def test_a_model_that_never_matches_ends_output_invalid(harness: Harness) -> None:
    model = harness.new_model([Turn(text="no"), Turn(text="still no")])
    async with harness.worker():
        handle = await harness.start(
            "refund",
            model=model,
            output_schema=Refund.model_json_schema(),
            output_retries=1,
        )
        with pytest.raises(WorkflowFailureError) as failed:
            await handle.result()
    cause = failed.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "OutputInvalid"
    assert "after 2 answer(s) (output_retries=1)" in cause.message
    assert len(harness.model.requests_for(model)) == 2


async def test_a_schema_that_is_not_one_is_refused_at_start(harness: Harness) -> None:
    model = harness.new_model([Turn(text="{}")])
    async with harness.worker():
        handle = await harness.start("x", model=model, output_schema={"type": "nonsense"})
        error = await failure(handle)
    assert error.type == InvalidConfig.__name__
    assert "config.output_schema is not a JSON Schema" in error.message


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_the_provider_is_asked_for_structured_output(harness: Harness, provider: str) -> None:
    asked = harness.new_model([Turn(text='{"refund_id": "r-1", "amount": 1}')])
    plain = harness.new_model([Turn(text='{"refund_id": "r-2", "amount": 2}')])
    schema = Refund.model_json_schema()
    async with harness.worker():
        for model, structured in ((asked, True), (plain, False)):
            handle = await harness.start(
                "refund",
                provider=provider,
                model=model,
                output_schema=schema,
                structured_output=structured,
            )
            assert (await handle.result()).value == {"refund_id": f"r-{1 if structured else 2}",
                                                      "amount": 1 if structured else 2}  # fmt: skip
    [with_schema] = harness.model.requests_for(asked)
    [without] = harness.model.requests_for(plain)
    if provider == "openai":
        assert with_schema.body["response_format"] == {
            "type": "json_schema",
            "json_schema": {"name": "answer", "schema": schema},
        }
        assert "response_format" not in without.body
    else:
        assert with_schema.body["output_config"] == {
            "format": {"type": "json_schema", "schema": schema}
        }
        assert "output_config" not in without.body


async def test_the_final_answer_gate_judges_the_typed_value(
    harness: Harness, tmp_path: Path
) -> None:
    policies = refund_policies(tmp_path / "policies")
    model = harness.new_model(
        [
            Turn(text='{"refund_id": "r-9", "amount": 5000}'),
            Turn(text='{"refund_id": "r-9", "amount": 1000}'),
        ]
    )
    settings = scripted_settings(harness.model, policy_dir=policies)
    async with harness.worker(settings=settings):
        loop = await orga.start_loop(
            harness.client,
            "Refund order 9.",
            orga.LoopConfig(model=model, policy="cedar"),
            task_queue=harness.task_queue,
            output_type=Refund,
        )
        harness.handles.append(loop.handle)
        result = await loop.result()
        journal = await loop.journal()
    assert result.value == Refund(refund_id="r-9", amount=1000)
    feedback = harness.model.requests_for(model)[1].user_texts()[-1]
    assert "a refund over 1000 needs a person" in feedback
    answers = [
        d
        for e in journal.entries
        if isinstance(e, PolicyEvaluated)
        for d in e.decisions
        if d.action == "respond"
    ]
    assert [(d.decision, d.policy_ids[:1]) for d in answers] == [
        ("deny", ["big-refunds"]),
        ("allow", answers[1].policy_ids[:1]),
    ]


async def test_the_critic_reviews_the_typed_value(harness: Harness, tmp_path: Path) -> None:
    writer = harness.new_model([Turn(text='```json\n{"amount": 7, "refund_id": "r-3"}\n```')])
    reviewer = harness.new_model([verdict("approve")])
    path = critic_agents(tmp_path, writer, reviewer)
    async with harness.worker(settings=scripted_settings(harness.model, agents_file=path)):
        handle = await harness.start(
            "refund order 3",
            agent_id="writer",
            critic={"kind": "model", "agent": "critic"},
            output_schema=Refund.model_json_schema(),
        )
        result = await handle.result()
    assert result.value == {"amount": 7, "refund_id": "r-3"}
    shown = "\n".join(harness.model.requests_for(reviewer)[0].user_texts())
    assert '{\n  "amount": 7,\n  "refund_id": "r-3"\n}' in shown  # the value, not the fenced text
    assert "```" not in shown


class Sum(BaseModel):
    a: int
    b: int
    sum: int


def _system_texts(request: RecordedRequest) -> list[str]:
    return [m["content"] for m in request.body["messages"] if m["role"] == "system"]


async def test_a_typed_loop_with_tools_still_calls_them_and_always_sees_the_schema(
    harness: Harness,
) -> None:
    """Seen with a real model on llama.cpp's server (issue 51): orga asked for structured
    output on every call, the server constrained every reply to the schema, and the model never
    called ``add`` — it answered the sum from its head. Now a loop that offers tools asks the
    provider to constrain only the retry after an answer that did not match; the schema is
    shown to the model in every call and in the retry message."""
    schema = Sum.model_json_schema()
    model = harness.new_model(
        [
            Turn(tool_calls=[("add", {"a": 17, "b": 25})]),
            Turn(text="The sum is 42."),  # prose: not the JSON asked for
            Turn(text='{"a": 17, "b": 25, "sum": 42}'),
        ]
    )
    plain = harness.new_model([Turn(text="42"), Turn(text='{"a": 1, "b": 2, "sum": 3}')])
    async with harness.worker():
        handle = await harness.start(
            "What is 17+25?", model=model, tools=["add"], output_schema=schema
        )
        result = await handle.result()
        unstructured = await harness.start(
            "1+2?", model=plain, output_schema=schema, structured_output=False
        )
        assert (await unstructured.result()).value == {"a": 1, "b": 2, "sum": 3}
    assert result.value == {"a": 17, "b": 25, "sum": 42}
    first, after_tool, retry = harness.model.requests_for(model)
    assert "response_format" not in first.body and "response_format" not in after_tool.body
    assert [t["function"]["name"] for t in first.body["tools"]] == ["add"]
    assert retry.body["response_format"]["json_schema"]["schema"] == schema
    for request in (first, after_tool, retry):
        [notice] = [t for t in _system_texts(request) if t.startswith("[orga]")]
        assert schema_text(schema) in notice
    assert schema_text(schema) in retry.user_texts()[-1]  # the retry message shows it too
    for request in harness.model.requests_for(plain):  # structured_output=False: only shown
        assert "response_format" not in request.body
        assert any(schema_text(schema) in t for t in _system_texts(request))
    assert schema_text(schema) in harness.model.requests_for(plain)[1].user_texts()[-1]

"""Typed answers: a loop names the shape of its answer, gets a validated value, and a model
that answers badly is shown why, charged for every try, and stopped after its retries."""

from __future__ import annotations

import pytest
from pydantic import BaseModel
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError

import orga
from orga.contracts.errors import InvalidConfig
from orga.scripted.server import Turn
from tests.harness import Harness
from tests.helpers import failure


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

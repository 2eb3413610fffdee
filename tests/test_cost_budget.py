"""Budgets in money (issue 37): a loop's calls are priced by the worker's price table
(genai-prices, or ORGA_MODEL_PRICES for a model it does not know), the cost is in the state,
the journal and the result, and ``max_cost`` ends the loop ``BudgetExceeded`` naming it; a
model whose price is unknown is never counted as free."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import genai_prices
import pytest
from temporalio.exceptions import ActivityError, ApplicationError

import orga
from orga.contracts.inference import Usage
from orga.contracts.journal import Journal, ReasoningComplete
from orga.contracts.state import LoopState
from orga.contracts.threads import ThreadConfig
from orga.providers.prices import price_of, priced
from orga.runtime.settings import ModelPrice
from orga.scripted.server import Raw, Turn
from tests.harness import Harness, scripted_settings
from tests.helpers import agents_file, eventually, failure

PRICED = "gpt-4o-mini-2024-07-18"
"""A model the price table knows (the scripted server answers for any name it is given)."""
INPUT, OUTPUT = 4_000, 2_000
"""The tokens of each call."""


def _table_price() -> float:
    found = genai_prices.calc_price(
        genai_prices.Usage(input_tokens=INPUT, output_tokens=OUTPUT), PRICED, provider_id="openai"
    )
    return float(Decimal(found.total_price))


async def test_max_cost_stops_the_loop_at_the_price_the_table_gives(harness: Harness) -> None:
    per_call = _table_price()
    assert per_call > 0
    turns = [
        Turn(tool_calls=[("add", {"a": i, "b": 1})], input_tokens=INPUT, output_tokens=OUTPUT)
        for i in range(6)
    ]
    harness.model.script(PRICED, turns)
    limit = per_call * 2.5  # the third call passes it
    async with harness.worker():
        handle = await harness.start(
            "keep adding", provider="openai", model=PRICED, tools=["add"],
            max_cost=limit, max_total_tokens=10_000_000,
        )  # fmt: skip
        stopped = await failure(handle, "BudgetExceeded")
        state = await handle.query("state", result_type=LoopState)
        journal = await handle.query("journal", result_type=Journal)
    assert stopped.message.startswith(f"the loop cost {per_call * 3:.6f} USD, over max_cost=")
    assert "at iteration 3" in stopped.message
    assert stopped.details[0]["budget"] == "max_cost"
    assert state.usage.cost_usd == pytest.approx(per_call * 3)
    assert state.usage.unpriced_calls == 0
    calls = [e for e in journal.entries if isinstance(e, ReasoningComplete)]
    assert [c.usage.cost_usd for c in calls] == pytest.approx([per_call] * 3)


async def test_a_model_without_a_price_is_never_free(harness: Harness) -> None:
    model = harness.new_model([Turn(tool_calls=[("add", {"a": 1, "b": 1})]), Turn(text="2")])
    async with harness.worker():
        handle = await harness.start("1+1", model=model, tools=["add"], max_cost=5.0)
        stopped = await failure(handle, "BudgetExceeded")
    assert stopped.message.startswith(
        f"max_cost=5 USD cannot be kept: the price of model {model!r} is unknown"
    )
    assert "ORGA_MODEL_PRICES" in stopped.message and "at iteration 1" in stopped.message
    # Without max_cost the loop runs, and says what it could not price.
    model = harness.new_model([Turn(text="2")])
    async with harness.worker():
        result = await harness.run("1+1", model=model)
    assert result.usage.unpriced_calls == 1 and result.usage.cost_usd == 0


async def test_the_workers_own_prices_count_for_a_model_the_table_does_not_know(
    harness: Harness,
) -> None:
    model = harness.new_model(
        [
            Turn(tool_calls=[("add", {"a": 1, "b": 1})], input_tokens=2_000, output_tokens=500),
            Turn(text="2", input_tokens=3_000, output_tokens=100),
        ]
    )
    prices = {model: ModelPrice(input=1.0, output=4.0)}  # USD per million tokens
    settings = scripted_settings(harness.model, model_prices=prices)
    async with harness.worker(settings=settings):
        result = await harness.run("1+1", model=model, tools=["add"], max_cost=1.0)
    expected = (2_000 * 1.0 + 500 * 4.0 + 3_000 * 1.0 + 100 * 4.0) / 1_000_000
    assert result.output == "2"
    assert result.usage.cost_usd == pytest.approx(expected) and result.usage.unpriced_calls == 0


async def test_a_threads_turns_each_have_max_cost_and_the_thread_its_own(
    harness: Harness,
) -> None:
    """In a thread the config's ``max_cost`` is each turn's (as its other budgets are), and
    ``ThreadConfig.max_cost`` bounds the whole thread: no turn may walk past it."""
    model = harness.new_model(
        [Turn(text="one", input_tokens=1_000, output_tokens=1)] * 3  # 0.001001 USD each
    )
    prices = {model: ModelPrice(input=1.0, output=1.0)}
    settings = scripted_settings(harness.model, model_prices=prices)
    async with harness.worker(settings=settings):
        handle = await harness.start(
            "first", model=model, max_cost=0.0015,
            thread=ThreadConfig(max_cost=0.0025),
        )  # fmt: skip
        loop = orga.loop(harness.client, handle.id)
        for text in ("second", "third"):  # each turn alone is within the turn's max_cost
            await eventually(lambda: _waiting_for_a_message(handle), "the thread waits")
            await loop.say(text)
        stopped = await failure(handle, "BudgetExceeded")
    assert stopped.details[0]["budget"] == "thread.max_cost"
    assert stopped.message.startswith("the thread cost 0.003003 USD, over thread.max_cost=0.0025")
    assert "at iteration 3 (turn 3 of a thread" in stopped.message


async def _waiting_for_a_message(handle: Any) -> bool:
    state = await handle.query("state", result_type=LoopState)
    return state.status == "awaiting_message"


async def test_a_delegated_child_gets_its_share_of_the_parents_max_cost(
    harness: Harness, tmp_path: Path
) -> None:
    """The parent's money is shared as its tokens are: the child runs under what is left of
    the parent's ``max_cost`` and stops there; the parent pays for what it spent, and ends
    ``BudgetExceeded`` at its next call once the whole tree's cost passes its own cap."""

    def priced_turn(**turn: Any) -> Turn:  # 0.001001 USD a call, at 1 USD per Mtok
        return Turn(input_tokens=1_000, output_tokens=1, **turn)

    models = {
        "lead": harness.new_model(
            [
                priced_turn(tool_calls=[("delegate", {"agent": "research", "task": "Count."})]),
                priced_turn(text="the child ran out of money"),
            ]
        ),
        "research": harness.new_model(
            [priced_turn(tool_calls=[("add", {"a": i, "b": 1})]) for i in range(10)]
        ),
        "writer": harness.new_model([]),
    }
    prices = {model: ModelPrice(input=1.0, output=1.0) for model in models.values()}
    settings = scripted_settings(
        harness.model, agents_file=agents_file(tmp_path, models), model_prices=prices
    )
    async with harness.worker(settings=settings):
        handle = await harness.start("Write a short report.", agent_id="lead", max_cost=0.0045)
        stopped = await failure(handle, "BudgetExceeded")
        state = await handle.query("state", result_type=LoopState)
    [child] = state.delegations
    assert child.status == "failed" and "BudgetExceeded" in (child.error or "")
    assert "over max_cost=0.003499" in (child.error or "")  # 0.0045 less the parent's call
    assert child.usage.cost_usd == pytest.approx(4 * 0.001001)  # stopped at its fourth call
    assert stopped.message.startswith("the loop cost 0.006006 USD, over max_cost=0.0045")
    assert state.usage.cost_usd == pytest.approx(6 * 0.001001)  # the child's, charged back


def test_a_model_the_table_lacks_is_looked_for_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Looking for a model the table lacks scans all it has: the worker remembers the miss."""
    asked: list[str] = []
    real, expected = genai_prices.calc_price, _table_price()

    def counting(usage: Any, model: str, **kwargs: Any) -> Any:
        asked.append(model)
        return real(usage, model, **kwargs)

    monkeypatch.setattr(genai_prices, "calc_price", counting)
    usage = Usage(input_tokens=INPUT, output_tokens=OUTPUT, total_tokens=INPUT + OUTPUT)
    unknown = f"no-such-model-{len(asked)}-{id(asked)}"
    assert price_of(usage, "openai", unknown, {}) is None
    assert price_of(usage, "openai", unknown, {}) is None
    assert asked == [unknown]
    assert price_of(usage, "openai", PRICED, {}) == pytest.approx(expected)
    assert price_of(usage, "openai", PRICED, {}) == pytest.approx(expected)
    assert asked == [unknown, PRICED, PRICED]  # a known one is priced every time


def _lying_answer(usage: dict[str, Any]) -> dict[str, Any]:
    call = {"id": "call_9", "type": "function", "function": {"name": "add", "arguments": "{}"}}
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    return {
        "id": "chatcmpl-discount",
        "model": PRICED,
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
        "usage": usage,
    }


async def test_cached_tokens_beyond_the_input_never_price_a_loop_below_zero(
    harness: Harness,
) -> None:
    """The attack (issue 50): a model endpoint answers ``prompt_tokens: 900`` with
    ``cached_tokens: 5000000``, which priced at -44 USD; a loop capped at 0.05 USD ran all 30
    calls and ended at cost_usd = -44.64. Now the first such answer is a protocol error that
    ends the loop, and the cost keeps what was honestly charged."""
    discount = {
        "prompt_tokens": 900,
        "completion_tokens": 400,
        "prompt_tokens_details": {"cached_tokens": 5_000_000},
    }
    asked_before = len(harness.model.requests_for(PRICED))  # the model is shared by the file
    harness.model.script(
        PRICED,
        [
            Turn(tool_calls=[("add", {"a": 1, "b": 1})], input_tokens=INPUT, output_tokens=OUTPUT),
            *[Raw(200, _lying_answer(discount)) for _ in range(30)],
        ],
    )
    async with harness.worker():
        handle = await harness.start(
            "keep adding", provider="openai", model=PRICED, tools=["add"], max_cost=0.05,
            max_total_tokens=10_000_000,
        )  # fmt: skip
        stopped = await failure(handle, "ModelCallFailed")
        state = await handle.query("state", result_type=LoopState)
    assert isinstance(stopped.cause, ActivityError)
    inner = stopped.cause.cause
    assert isinstance(inner, ApplicationError) and inner.type == "ImplausibleUsage"
    assert "cached tokens are part of the input" in inner.message and inner.non_retryable
    asked = len(harness.model.requests_for(PRICED)) - asked_before
    assert asked == 2  # not retried: each ask is served
    assert state.usage.cost_usd == pytest.approx(_table_price())  # the honest call only
    assert state.usage.cost_usd > 0


def test_a_price_the_table_refuses_charges_every_input_token_uncached(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Tokens served are never free and never fail the call: if genai-prices refuses a usage
    (it raises ``ValueError`` on usage it finds inconsistent), every input token is charged at
    the uncached price; a table that refuses that too leaves the call unpriced (never free)."""
    real = genai_prices.calc_price
    refused: list[int] = []

    def picky(usage: Any, model: str, **kwargs: Any) -> Any:
        if usage.cache_read_tokens:
            refused.append(usage.cache_read_tokens)
            raise ValueError("Invalid usage data")
        return real(usage, model, **kwargs)

    monkeypatch.setattr(genai_prices, "calc_price", picky)
    usage = Usage(
        input_tokens=INPUT, output_tokens=OUTPUT, total_tokens=INPUT + OUTPUT,
        cache_read_input_tokens=INPUT // 2,
    )  # fmt: skip
    assert price_of(usage, "openai", PRICED, {}) == pytest.approx(_table_price())
    assert refused == [INPUT // 2]

    def refusing(usage: Any, model: str, **kwargs: Any) -> Any:
        raise ValueError("Invalid usage data")

    monkeypatch.setattr(genai_prices, "calc_price", refusing)
    assert price_of(usage, "openai", PRICED, {}) is None  # counted as unpriced
    assert priced(usage, "openai", PRICED, {}).unpriced_calls == 1


def test_a_negative_price_is_charged_uncached(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = genai_prices.calc_price

    class Negative:
        total_price = Decimal("-44.0")

    def negative_when_cached(usage: Any, model: str, **kwargs: Any) -> Any:
        return Negative() if usage.cache_read_tokens else real(usage, model, **kwargs)

    monkeypatch.setattr(genai_prices, "calc_price", negative_when_cached)
    usage = Usage(
        input_tokens=INPUT, output_tokens=OUTPUT, total_tokens=INPUT + OUTPUT,
        cache_read_input_tokens=10,
    )  # fmt: skip
    assert price_of(usage, "openai", PRICED, {}) == pytest.approx(_table_price())

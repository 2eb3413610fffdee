"""A second model when the first fails (issue 37): a loop whose provider is down after its
retries goes on with its fallback — the switch journaled, the calls counted in the same
budget, the first model's call ids translated for the second's wire — and never falls back
for a request the provider refused; a fallback its agent may not use is refused at start."""

from __future__ import annotations

from pathlib import Path

from orga.contracts.agents import ModelChoice
from orga.contracts.journal import Journal, ModelSwitched, ToolsDispatched
from orga.contracts.state import LoopState
from orga.core.ids import translated_id
from orga.scripted.server import Raw, Turn
from tests.harness import Harness, scripted_settings
from tests.helpers import failure

DOWN = Raw(503, {"error": {"message": "overloaded"}}, headers={"retry-after-ms": "10"})
"""A provider that is down: every attempt answers 503 (and asks to be tried again soon)."""


async def test_a_provider_that_is_down_hands_the_loop_to_its_fallback(harness: Harness) -> None:
    first = harness.new_model([Turn(tool_calls=[("add", {"a": 2, "b": 3})]), *[DOWN] * 6])
    second = harness.new_model([Turn(text="5, on the second model", input_tokens=40)])
    async with harness.worker():
        handle = await harness.start(
            "2+3?", provider="openai", model=first, tools=["add"],
            fallbacks=[ModelChoice(provider="anthropic", model=second)],
        )  # fmt: skip
        result = await handle.result()
        journal = await handle.query("journal", result_type=Journal)
        state = await handle.query("state", result_type=LoopState)
    assert result.output == "5, on the second model"
    [switched] = [e for e in journal.entries if isinstance(e, ModelSwitched)]
    assert (switched.from_provider, switched.from_model) == ("openai", first)
    assert (switched.to_provider, switched.to_model) == ("anthropic", second)
    assert "ProviderUnavailable" in switched.error and switched.iteration == 2
    assert (state.provider, state.model) == ("anthropic", second)
    assert result.usage.input_tokens == 10 + 40  # both models' calls, in one budget
    # The second model read the first one's call under the id orga translates it to.
    [dispatched] = [e for e in journal.entries if isinstance(e, ToolsDispatched)]
    [asked] = harness.model.requests_for(second)
    blocks = [
        b for m in asked.body["messages"] if isinstance(m["content"], list) for b in m["content"]
    ]
    [use] = [b for b in blocks if b.get("type") == "tool_use"]
    [answered] = [b for b in blocks if b.get("type") == "tool_result"]
    assert use["id"] == translated_id(dispatched.call_ids[0]) == answered["tool_use_id"]


async def test_a_refused_request_never_falls_back(harness: Harness) -> None:
    refused = Raw(400, {"error": {"message": "bad request", "type": "invalid_request_error"}})
    first = harness.new_model([refused])
    second = harness.new_model([Turn(text="never asked")])
    async with harness.worker():
        handle = await harness.start(
            "hi", provider="openai", model=first,
            fallbacks=[ModelChoice(provider="anthropic", model=second)],
        )  # fmt: skip
        failed = await failure(handle, "ModelCallFailed")
        journal = await handle.query("journal", result_type=Journal)
    assert "ProviderRejected" in failed.message
    assert not [e for e in journal.entries if isinstance(e, ModelSwitched)]
    assert harness.model.requests_for(second) == []


async def test_a_fallback_outside_the_agents_lists_is_refused(
    harness: Harness, tmp_path: Path
) -> None:
    agents = tmp_path / "agents.toml"
    agents.write_text('[agents.careful]\nproviders = ["openai"]\n')
    first = harness.new_model([Turn(text="hi")])
    settings = scripted_settings(harness.model, agents_file=agents)
    async with harness.worker(settings=settings):
        handle = await harness.start(
            "hi", agent_id="careful", provider="openai", model=first,
            fallbacks=[ModelChoice(provider="anthropic", model="elsewhere")],
        )  # fmt: skip
        refused = await failure(handle, "InvalidConfig")
    assert "provider 'anthropic' is not one" in refused.message
    assert "a fallback of the loop" in refused.message
    assert harness.model.requests_for(first) == []

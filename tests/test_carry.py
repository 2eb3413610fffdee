"""What a loop carries into its next run stays bounded over days (pure), and a state too
large to carry ends the loop with a typed error instead of wedging it."""

from __future__ import annotations

from datetime import UTC, datetime

from orga.contracts.carry import CachedEntry, LoopCarry, ToolStateSnapshot
from orga.contracts.inference import Usage
from orga.contracts.journal import Journal, Started
from orga.contracts.resilience import DeadLetterEntry
from orga.core.carry import CACHE_ENTRIES, DEAD_LETTERS, DECIDED_IDS, JOURNAL_BYTES, bounded
from orga.scripted.server import Turn
from tests.harness import Harness
from tests.helpers import failure
from tests.sample_tools import dump

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def carry_of(journal: Journal, tools: ToolStateSnapshot) -> LoopCarry:
    return LoopCarry(
        digest="d", sent=0, usage=Usage(), iteration=9, started_at=NOW, journal=journal, tools=tools
    )


def test_everything_carried_is_bounded() -> None:
    journal = Journal(limit=100_000)
    for _ in range(20_000):
        journal.append(
            Started(seq=journal.take_seq(), at=NOW, agent_id="a", iteration=1, tools=["t"] * 5)
        )
    tools = ToolStateSnapshot(
        cache={f"k{i}": CachedEntry(content="x" * 20_000, at=NOW) for i in range(300)},
        dead_letters=[
            DeadLetterEntry(
                call_id=f"c{i}", tool="t", arguments="a" * 10_000, error="e", iteration=1, at=NOW
            )
            for i in range(500)
        ],
        decided_ids=[f"i{i}_call" for i in range(5_000)],
    )
    out = bounded(carry_of(journal, tools))
    assert len(out.journal.model_dump_json()) <= JOURNAL_BYTES + 1_000
    assert out.journal.entries[-1].seq == 20_000  # the newest are kept
    assert out.journal.dropped + len(out.journal.entries) == 20_000  # and the rest counted
    assert len(out.tools.cache) <= CACHE_ENTRIES
    assert sum(len(e.content) for e in out.tools.cache.values()) <= 1024 * 1024
    assert list(out.tools.cache)[-1] == "k299"  # the newest result is kept
    assert len(out.tools.dead_letters) == DEAD_LETTERS
    assert out.tools.dead_letters[-1].call_id == "c499"
    assert max(len(d.arguments) for d in out.tools.dead_letters) <= 2_000
    assert len(out.tools.decided_ids) == DECIDED_IDS
    small = carry_of(Journal(), ToolStateSnapshot())
    assert bounded(small) == small  # nothing to trim: nothing changes


async def test_a_state_too_large_to_carry_fails_typed(harness: Harness) -> None:
    # 30 results of 100 KiB: the history reaches 200 events with ~3 MiB of conversation.
    model = harness.new_model([Turn(tool_calls=[("dump", {"kib": 100})])] * 30 + [Turn(text="x")])
    async with harness.worker(tools=[dump]):
        handle = await harness.start(
            "dump",
            model=model,
            tools=["dump"],
            max_state_bytes=1024 * 1024,
            max_history_events=200,
            context_token_budget=4_000,
        )
        error = await failure(handle)
    assert error.type == "StateTooLarge"
    assert "more than config.max_state_bytes=1048576" in error.message
    assert error.details[0]["limit"] == 1024 * 1024

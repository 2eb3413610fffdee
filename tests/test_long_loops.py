"""Long loops continue as new at iteration boundaries and look the same from outside."""

from __future__ import annotations

from orga.contracts.journal import Journal
from orga.contracts.state import LoopState
from orga.runtime.scripted_model import RecordedRequest, Turn
from tests.harness import Harness, replay

ITERATIONS = 310


def counter(request: RecordedRequest) -> Turn:
    done = request.tool_results()
    if done < ITERATIONS - 1:
        return Turn(tool_calls=[("add", {"a": done, "b": 1})], input_tokens=3, output_tokens=2)
    return Turn(text=f"counted {done}", input_tokens=3, output_tokens=2)


async def test_a_310_iteration_loop_continues_as_new_and_looks_the_same(harness: Harness) -> None:
    model = harness.new_model([])
    harness.model.script(model, [counter] * ITERATIONS)
    async with harness.worker():
        handle = await harness.start(
            "count",
            model=model,
            tools=["add"],
            max_iterations=400,
            max_total_tokens=10_000,
            max_history_events=1_500,
            timeout=600,
        )
        result = await handle.result()
        state = await handle.query("state", result_type=LoopState)
        journal = await handle.query("journal", result_type=Journal)
        runs = await replay(handle, harness.client)
    assert result.output == f"counted {ITERATIONS - 1}"
    assert result.iterations == ITERATIONS
    assert result.tool_call_count == ITERATIONS - 1
    assert result.usage.total_tokens == 5 * ITERATIONS
    assert result.messages == 1 + 2 * (ITERATIONS - 1) + 1
    assert runs >= 3  # at least two continues
    assert state.iteration == ITERATIONS and state.status == "completed"
    seqs = [e.seq for e in journal.entries]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))  # one journal, no gaps
    assert journal.entries[-1].kind == "Terminated"
    assert journal.dropped + len(journal.entries) == journal.next_seq - 1
    assert [e.kind for e in journal.entries].count("Started") <= 1
    # Every model call after the first carried only what was new.
    sizes = [len(r.body["messages"]) for r in harness.model.requests_for(model)]
    assert sizes[-1] == result.messages - 1

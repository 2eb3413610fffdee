"""Threads, forks and typed answers with the offline scripted model (issue 51, point 7): a user
follows the conversations guide with ``worker.py --scripted`` and no API key, and each step
answers what was asked — a message that refers back to the last answer, a fork's new message,
an answer that matches its schema."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

import jsonschema
from pydantic import BaseModel
from temporalio.testing import WorkflowEnvironment

import orga
from orga.contracts.journal import TurnAnswered
from orga.scripted.offline import LABEL
from tests.helpers import calls_of, offline_env, offline_worker
from tests.helpers import orga as orga_cli


async def test_a_thread_s_next_message_refers_back_to_the_last_answer(
    env: WorkflowEnvironment, tmp_path: Path
) -> None:
    settings = offline_env(env, tmp_path)
    async with offline_worker(settings, "--scripted"):
        code, out, err = await orga_cli(
            "run", "What is 2+3?", "--tool", "add", "--thread", env=settings
        )
        assert code == 0, err
        assert out.startswith(f"{LABEL} 2 + 3 = 5 (by the add tool).")
        [thread_id] = re.findall(r"thread (thread-[0-9a-f]{12}) waits", out + err)
        code, out, err = await orga_cli("say", thread_id, "Now add 8 to that", env=settings)
        assert code == 0, err
        assert out.startswith(f"{LABEL} 5 + 8 = 13 (by the add tool)."), out
        code, out, err = await orga_cli("say", thread_id, "And what is 4+4?", env=settings)
        assert code == 0, err
        assert out.startswith(f"{LABEL} 4 + 4 = 8 (by the add tool)."), out
        code, _, err = await orga_cli("close", thread_id, env=settings)
        assert code == 0, err
        calls = await calls_of(env, thread_id)
    assert calls == [
        ("add", {"a": 2, "b": 3}),
        ("add", {"a": 5, "b": 8}),
        ("add", {"a": 4, "b": 4}),
    ]


async def test_a_fork_at_turn_one_answers_its_new_message(
    env: WorkflowEnvironment, tmp_path: Path
) -> None:
    settings = offline_env(env, tmp_path)
    source = f"loop-{uuid.uuid4().hex[:12]}"
    async with offline_worker(settings, "--scripted"):
        code, out, err = await orga_cli(
            "run", "What is 2+3?", "--tool", "add", "--id", source, env=settings
        )
        assert code == 0, err
        forks: list[str] = []
        for say, answer in (
            ("And what is 4+4?", "4 + 4 = 8"),  # a question of its own
            ("Now add 8 to that", "5 + 8 = 13"),  # turn 1's result, read from its tool result
        ):
            code, out, err = await orga_cli("fork", source, "--at", "1", "--say", say, env=settings)
            assert code == 0, err
            assert out.startswith(f"{LABEL} {answer} (by the add tool)."), out
            [fork] = re.findall(rf"forked {source} after turn 1 as (\S+)", out + err)
            forks.append(fork)
        calls = [await calls_of(env, fork) for fork in forks]
        source_calls = await calls_of(env, source)
    # The call before the fork point is carried, not made again; the fork makes its own.
    assert source_calls == [("add", {"a": 2, "b": 3})]
    assert calls == [
        [("add", {"a": 2, "b": 3}), ("add", {"a": 4, "b": 4})],
        [("add", {"a": 2, "b": 3}), ("add", {"a": 5, "b": 8})],
    ]


class Sum(BaseModel):
    a: int
    b: int
    sum: int


class Refund(BaseModel):
    refund_id: str
    amount: int


async def test_a_typed_loop_calls_its_tool_and_its_answer_validates(
    env: WorkflowEnvironment, tmp_path: Path
) -> None:
    settings = offline_env(env, tmp_path)
    client = env.client
    queue = settings["ORGA_TASK_QUEUE"]
    async with offline_worker(settings, "--scripted"):
        loop = await orga.start_loop(
            client,
            "What is 17+25?",
            orga.LoopConfig(tools=["add"]),
            output_type=Sum,
            task_queue=queue,
        )
        result = await loop.result()
        assert result.value == Sum(a=17, b=25, sum=42)
        jsonschema.validate(json.loads(result.output), Sum.model_json_schema())
        assert await calls_of(env, loop.id) == [("add", {"a": 17, "b": 25})]
        state = await loop.state()
        assert state.model_calls == 2  # the call, then the answer: no retry was needed

        # The same from the command line: orga run --output-schema FILE, and a budget in USD.
        schema_file = tmp_path / "sum.schema.json"
        schema_file.write_text(json.dumps(Sum.model_json_schema()))
        code, out, err = await orga_cli(
            "run", "What is 17+25?", "--tool", "add", "--output-schema", str(schema_file),
            "--max-cost", "0.5", "--json", env=settings,
        )  # fmt: skip
        assert code == 0, err
        assert json.loads(out)["value"] == {"a": 17, "b": 25, "sum": 42}
        schema_file.write_text("[1, 2]")
        code, _, err = await orga_cli(
            "run", "x", "--output-schema", str(schema_file), env=settings
        )  # fmt: skip
        assert code == 2 and "a JSON Schema is a JSON object" in err

        # The conversations guide's own example: no tools, the answer from the task.
        refund = await orga.start_loop(
            client, "Refund order 7", orga.LoopConfig(), output_type=Refund, task_queue=queue
        )
        value = (await refund.result()).value
        assert isinstance(value, Refund) and value.amount == 7, value
        assert await calls_of(env, refund.id) == []  # no tools: it answered at once, and replays

        # A typed thread: each turn's answer validates, the second refers back to the first.
        chat = await orga.start_thread(
            client,
            orga.LoopConfig(tools=["add"]),
            "What is 17+25?",
            output_type=Sum,
            task_queue=queue,
        )
        first = await chat.turn(1)
        second = await chat.send("Now add 8 to that")
        await chat.close()
        journal = await chat.journal()
        calls = await calls_of(env, chat.id)
    assert (first.value, second.value) == (Sum(a=17, b=25, sum=42), Sum(a=42, b=8, sum=50))
    assert calls == [("add", {"a": 17, "b": 25}), ("add", {"a": 42, "b": 8})]
    assert len([e for e in journal.entries if isinstance(e, TurnAnswered)]) == 2

"""A real model through orga: a thread of two turns with a tool each, and a typed answer whose
loop called its tool. Point it at any OpenAI-compatible server (llama.cpp's ``llama-server``,
Ollama, vLLM) and see whether the model and orga work together.

    uv run orga server                                   # terminal 1: Temporal
    OPENAI_BASE_URL=http://127.0.0.1:8080/v1 OPENAI_MODEL=qwen2.5-coder-0.5b-instruct \\
        uv run python -m examples.real_model             # terminal 2: a worker and the checks

It runs its own worker (the built-in ``add`` tool) on a task queue of its own, asks, and
prints what each step did: the tool calls the loop made and the answers. It exits 0 when every
step called its tool and the typed answer validated, 1 otherwise — a small model may well fail
a step; the point is to see which, and why (``orga journal ID`` tells the rest). No API key is
needed for a server that is not OpenAI's own; ``OPENAI_API_KEY`` is sent if set.
"""

from __future__ import annotations

import asyncio
import os
import sys
import uuid

from pydantic import BaseModel
from temporalio.client import Client
from temporalio.worker import Worker

import orga
from orga.contracts.journal import ToolsDispatched


class Sum(BaseModel):
    """The typed answer: the two numbers and their sum."""

    a: int
    b: int
    sum: int


async def tools_called(loop: orga.LoopHandle) -> list[str]:
    """The tools a loop ran (from its journal)."""
    journal = await loop.journal()
    return [t for e in journal.entries if isinstance(e, ToolsDispatched) for t in e.tools]


async def main() -> int:
    if not os.environ.get("OPENAI_BASE_URL"):
        print("set OPENAI_BASE_URL (and OPENAI_MODEL) to an OpenAI-compatible server first")
        return 2
    plugin = orga.OrgaPlugin()
    queue = f"real-model-{uuid.uuid4().hex[:8]}"
    client = await Client.connect(**plugin.connect_config(), plugins=[plugin])
    config = orga.LoopConfig(provider="openai", tools=["add"], max_iterations=6)
    steps: list[tuple[str, bool, str]] = []
    async with Worker(client, task_queue=queue):
        chat = await orga.start_thread(
            client, config, "What is 17+25? Use the add tool.", task_queue=queue
        )
        first = await chat.turn(1)
        after_first = await tools_called(chat)
        steps.append(("turn 1 called add", after_first.count("add") >= 1, first.said))
        second = await chat.send("Now add 8 to that, with the add tool.")
        after_second = await tools_called(chat)
        steps.append(("turn 2 called add", len(after_second) > len(after_first), second.said))
        await chat.close()
        typed = await orga.start_loop(
            client, "What is 17+25? Use the add tool.", config, output_type=Sum, task_queue=queue
        )
        try:
            result = await typed.result()
            answer, valid = result.output, isinstance(result.value, Sum)
        except Exception as error:  # the loop's typed failure is what this step reports
            answer, valid = f"{type(error).__name__}: {error}", False
        steps.append(("the typed loop called add", "add" in await tools_called(typed), answer))
        steps.append(("the typed answer validated", valid, answer))
    for name, passed, said in steps:
        print(f"{'ok  ' if passed else 'FAIL'} {name}: {said}")
    print(f"thread {chat.id}, typed loop {typed.id} (orga journal ID shows every step)")
    return 0 if all(passed for _, passed, _ in steps) else 1


if __name__ == "__main__":
    code = asyncio.run(main())
    sys.stdout.flush()
    os._exit(code)  # temporalio can crash the interpreter at exit (sdk-python#300)

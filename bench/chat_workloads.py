"""The long-conversation bench's workload and the two chats it measures orga against.

Workflow and worker code of ``bench/long_conversation.py`` (which runs them): the log pages a
tool reads and their JSON schema; the minimal chat a Temporal user writes (plain dicts, the
whole conversation passed to every model call); the OpenAI Agents SDK on Temporal's plugin
(the ``peers`` dependency group, optional).
"""

from __future__ import annotations

import json
import os
import re
from datetime import timedelta
from typing import Any

from temporalio import activity, workflow

with workflow.unsafe.imports_passed_through():
    import httpx
    from temporalio.client import Client
    from temporalio.worker import Worker

    from bench.approvals import rss_kib
    from orga.tools.sdk import tool

PAGES_PER_TURN = 4
"""Tool calls per turn while the conversation grows."""
ASK = re.compile(r"Read (\d+) pages from page (\d+)(?:, (\d+) bytes each)?\.")
"""What the person asks; the scripted model reads it from the conversation."""
MODEL_CALLS = {"call_model", "long_call_model", "invoke_model_activity"}
"""The activity types of the three variants' model calls: where each tool call's span begins."""
WORDS = "the quick brown fox jumps over the lazy dog while the log rotates at noon "


def page_size(page: int) -> int:
    """8-16 KB, spread by the page number: the results while the conversation grows."""
    return 8192 + (page * 2_654_435_761) % 8193


def page_text(page: int, size: int) -> str:
    """``size`` bytes of ASCII text for ``page``."""
    head = f"page {page}: "
    body = WORDS * (size // len(WORDS) + 1)
    return (head + body)[:size]


CALLS: list[int] = []
"""This process's resident memory (KiB) each time a tool ran: the driver clears it."""


@tool
def read_page(page: int, size: int) -> str:
    """Read one page of the log.

    Args:
        page: which page.
        size: how many bytes of it.
    """
    CALLS.append(rss_kib())
    return page_text(page, size)


@activity.defn(name="long_read_page")
async def read_page_activity(page: int, size: int) -> str:
    """Read one page of the log (the agents' tool, an activity)."""
    CALLS.append(rss_kib())
    return page_text(page, size)


READ_PAGE = {
    "type": "function",
    "function": {
        "name": "read_page",
        "description": "Read one page of the log.",
        "parameters": {
            "type": "object",
            "properties": {"page": {"type": "integer"}, "size": {"type": "integer"}},
            "required": ["page", "size"],
        },
    },
}


# ---- the minimal chat a Temporal user writes --------------------------------------------------


class MinimalActivities:
    """A chat-completions call over one shared HTTP client, and the tool, on plain dicts."""

    def __init__(self, http: httpx.AsyncClient, base_url: str) -> None:
        self._http = http
        self._url = f"{base_url}/chat/completions"

    @activity.defn(name="long_call_model")
    async def call_model(self, request: dict[str, Any]) -> dict[str, Any]:
        body = {"model": request["model"], "messages": request["messages"], "tools": [READ_PAGE]}
        response = await self._http.post(self._url, json=body)
        response.raise_for_status()
        message: dict[str, Any] = response.json()["choices"][0]["message"]
        return message

    @activity.defn(name="long_run_tool")
    async def run_tool(self, function: dict[str, Any]) -> str:
        arguments = json.loads(function["arguments"] or "{}")
        CALLS.append(rss_kib())
        return page_text(arguments["page"], arguments["size"])


@workflow.defn(name="LongMinimalThread")
class MinimalThreadWorkflow:
    """``bench/minimal.py``'s loop as a chat: each message an update that runs the loop over
    the whole conversation, kept in the workflow."""

    @workflow.init
    def __init__(self, model: str) -> None:
        self._model = model
        self._messages: list[dict[str, Any]] = []
        self._closed = False

    @workflow.run
    async def run(self, model: str) -> None:
        await workflow.wait_condition(lambda: self._closed and workflow.all_handlers_finished())

    @workflow.signal
    def close(self) -> None:
        self._closed = True

    @workflow.update
    async def send(self, text: str) -> str:
        self._messages.append({"role": "user", "content": text})
        while True:
            answer: dict[str, Any] = await workflow.execute_activity(
                "long_call_model",
                {"model": self._model, "messages": self._messages},
                start_to_close_timeout=timedelta(seconds=60),
            )
            self._messages.append(answer)
            calls: list[dict[str, Any]] = answer.get("tool_calls") or []
            if not calls:
                return str(answer.get("content") or "")
            for call in calls:
                content: str = await workflow.execute_activity(
                    "long_run_tool", call["function"], start_to_close_timeout=timedelta(seconds=30)
                )
                self._messages.append(
                    {"role": "tool", "tool_call_id": call["id"], "content": content}
                )


# ---- the OpenAI Agents SDK on Temporal's plugin -----------------------------------------------


@workflow.defn(name="LongAgentsThread")
class AgentsThreadWorkflow:
    """A chat on the Agents SDK: each message an update that runs the agent over the
    conversation so far (``result.to_input_list()``), as its documentation shows."""

    @workflow.init
    def __init__(self, model: str) -> None:
        self._model = model
        self._items: list[Any] = []
        self._closed = False

    @workflow.run
    async def run(self, model: str) -> None:
        await workflow.wait_condition(lambda: self._closed and workflow.all_handlers_finished())

    @workflow.signal
    def close(self) -> None:
        self._closed = True

    @workflow.update
    async def send(self, text: str) -> str:
        # Imported here: the peers group may be missing (the plugin passes them through).
        from agents import Agent, Runner  # pyright: ignore[reportMissingImports]
        from temporalio.openai_agents.workflow import (  # pyright: ignore[reportMissingImports]
            activity_as_tool,
        )

        reader = activity_as_tool(read_page_activity, start_to_close_timeout=timedelta(seconds=30))
        agent = Agent(
            name="reader",
            instructions="Read what you are asked to.",
            model=self._model,
            tools=[reader],
        )
        result = await Runner.run(
            agent, [*self._items, {"role": "user", "content": text}], max_turns=100_000
        )
        self._items = result.to_input_list()
        return str(result.final_output)


async def agents_parts(address: str, base_url: str) -> tuple[Client, Worker] | str:
    """A client and worker with the OpenAI Agents plugin, the model at ``base_url``; or why
    not (the ``peers`` group is not installed)."""
    try:  # reportMissingImports: the peers group is optional (CI does not install it)
        from agents import OpenAIProvider  # pyright: ignore[reportMissingImports]
        from openai import AsyncOpenAI  # pyright: ignore[reportMissingImports]
        from temporalio.openai_agents import (  # pyright: ignore[reportMissingImports]
            ModelActivityParameters,
            OpenAIAgentsPlugin,
        )
    except ImportError as missing:
        return f"{missing.name} is not installed: `uv run --group peers` brings it"
    # Read by every trace provider, the plugin's too: traces would go to OpenAI's servers.
    os.environ["OPENAI_AGENTS_DISABLE_TRACING"] = "1"
    model = AsyncOpenAI(base_url=base_url, api_key="unused", max_retries=0)
    plugin = OpenAIAgentsPlugin(
        model_params=ModelActivityParameters(start_to_close_timeout=timedelta(seconds=60)),
        model_provider=OpenAIProvider(openai_client=model, use_responses=False),
    )
    client = await Client.connect(address, plugins=[plugin])
    worker = Worker(
        client,
        task_queue="long-agents",
        workflows=[AgentsThreadWorkflow],
        activities=[read_page_activity],
    )
    return client, worker

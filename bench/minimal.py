"""The baseline: the minimal agent loop a Temporal user writes, with nothing of orga in it.

Plain-dict activities and inputs under Temporal's default JSON converter (no pydantic, no orga
types), an ``httpx`` POST of the OpenAI chat-completions body to the same scripted model server
on 127.0.0.1, one activity per tool call, the whole conversation sent on every model call. No
gate, journal, budget, search attribute, breaker or continue-as-new: what orga's loop costs is
measured against this. Its activities are ``bench/minimal_activities.py`` (a workflow module
imports no HTTP client).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow

__all__ = ["MinimalApprovalWorkflow", "MinimalLoopWorkflow"]


@workflow.defn(name="MinimalLoop")
class MinimalLoopWorkflow:
    @workflow.run
    async def run(self, input: dict[str, Any]) -> str:
        messages: list[dict[str, Any]] = list(input["messages"])
        while True:
            answer: dict[str, Any] = await workflow.execute_activity(
                "minimal_call_model",
                {"model": input["model"], "messages": messages, "tools": input["tools"]},
                start_to_close_timeout=timedelta(seconds=60),
            )
            messages.append(answer)
            calls: list[dict[str, Any]] = answer.get("tool_calls") or []
            if not calls:
                return str(answer.get("content") or "")
            for call in calls:
                content: str = await workflow.execute_activity(
                    "minimal_run_tool",
                    call["function"],
                    start_to_close_timeout=timedelta(seconds=30),
                )
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": content})


@workflow.defn(name="MinimalApproval")
class MinimalApprovalWorkflow:
    """The baseline of an approval: wait for a decision, then run the tool call (a payment).

    The decision comes as the ``approve`` signal (the issue's baseline) or as the ``decide``
    update (what an update costs on its own: the server serves an update's workflow task
    differently from a signal's), the update's validator refusing a second decision."""

    def __init__(self) -> None:
        self._decision: dict[str, Any] | None = None

    @workflow.signal
    def approve(self, decision: dict[str, Any]) -> None:
        self._decision = decision

    @workflow.update
    def decide(self, decision: dict[str, Any]) -> bool:
        self._decision = decision
        return True

    @decide.validator
    def _check(self, decision: dict[str, Any]) -> None:
        if self._decision is not None:
            raise ValueError("already decided")

    @workflow.query
    def waiting(self) -> bool:
        return self._decision is None

    @workflow.run
    async def run(self, call: dict[str, Any]) -> str:
        await workflow.wait_condition(lambda: self._decision is not None)
        content: str = await workflow.execute_activity(
            "minimal_pay", call, start_to_close_timeout=timedelta(seconds=30)
        )
        return content

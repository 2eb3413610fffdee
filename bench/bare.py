"""The baseline: the same loop written as a bare Temporal workflow, the way one usually would.

Each model call gets the whole conversation (so history grows with the square of the number
of turns), tool calls run one activity each, and there is no gate, journal, budget or search
attribute. It uses orga's HTTP provider code, so the activities do the same work and the
comparison measures orchestration alone.
"""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from orga.contracts.conversation import Message, ToolResult
    from orga.contracts.inference import InferenceResponse


class BareInput(BaseModel):
    messages: list[Message]
    model: str
    tools: list[str]


class BareModelCall(BaseModel):
    messages: list[Message]
    model: str
    tools: list[str]


class BareToolCall(BaseModel):
    name: str
    arguments: str
    call_id: str


@workflow.defn(name="BareLoop")
class BareLoopWorkflow:
    @workflow.run
    async def run(self, input: BareInput) -> str:
        messages = list(input.messages)
        while True:
            response = await workflow.execute_activity(
                "bare_call_model",
                BareModelCall(messages=messages, model=input.model, tools=input.tools),
                result_type=InferenceResponse,
                start_to_close_timeout=timedelta(seconds=60),
            )
            messages.append(response.as_message())
            if not response.tool_calls:
                return response.text
            results: list[ToolResult] = []
            for call in response.tool_calls:
                results.append(
                    await workflow.execute_activity(
                        "bare_run_tool",
                        BareToolCall(name=call.name, arguments=call.arguments, call_id=call.id),
                        result_type=ToolResult,
                        start_to_close_timeout=timedelta(seconds=30),
                    )
                )
            messages.append(Message(role="tool", tool_results=results))

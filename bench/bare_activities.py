"""Activities of the bare baseline (see ``bench/bare.py``): the same HTTP and tool work."""

from __future__ import annotations

import json

import httpx
from temporalio import activity

from bench.bare import BareModelCall, BareToolCall
from orga.contracts.conversation import ToolResult
from orga.contracts.inference import InferenceResponse
from orga.providers.client import complete
from orga.runtime.settings import Settings
from orga.tools._loading import render_value
from orga.tools.sdk import ToolContext, ToolRegistry


class BareActivities:
    def __init__(self, settings: Settings, http: httpx.AsyncClient, registry: ToolRegistry) -> None:
        self._settings = settings
        self._http = http
        self._registry = registry

    @activity.defn(name="bare_call_model")
    async def call_model(self, request: BareModelCall) -> InferenceResponse:
        provider = self._settings.provider(None)
        tools = [t.definition for n in request.tools if (t := self._registry.get(n)) is not None]
        return await complete(
            self._http,
            provider,
            request.messages,
            tools,
            model=request.model,
            max_output_tokens=None,
            temperature=None,
            timeout=30,
        )

    @activity.defn(name="bare_run_tool")
    async def run_tool(self, call: BareToolCall) -> ToolResult:
        tool = self._registry.get(call.name)
        assert tool is not None
        arguments = tool.validate(json.loads(call.arguments))
        value = await tool.invoke(arguments, ToolContext(call.call_id, "bare", call.call_id))
        return ToolResult(call_id=call.call_id, name=call.name, content=render_value(value))

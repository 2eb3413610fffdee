"""The minimal loop's activities (``bench/minimal.py``): a chat-completions call over ``httpx``
and the ``add`` tool, on plain dicts."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
from temporalio import activity

__all__ = ["PAYMENTS", "MinimalActivities"]

PAYMENTS: list[float] = []
"""When each payment ran (``time.perf_counter``): the approval benchmark's finish line."""


ADD = {
    "type": "function",
    "function": {
        "name": "add",
        "description": "Add two numbers and return the sum.",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
            "required": ["a", "b"],
        },
    },
}


class MinimalActivities:
    """A chat-completions call and the ``add`` tool, over one shared HTTP client."""

    def __init__(self, http: httpx.AsyncClient, base_url: str) -> None:
        self._http = http
        self._url = f"{base_url}/chat/completions"

    @activity.defn(name="minimal_call_model")
    async def call_model(self, request: dict[str, Any]) -> dict[str, Any]:
        body = {
            "model": request["model"],
            "messages": request["messages"],
            "tools": [ADD for name in request["tools"] if name == "add"],
        }
        response = await self._http.post(self._url, json=body)
        response.raise_for_status()
        message: dict[str, Any] = response.json()["choices"][0]["message"]
        return message

    @activity.defn(name="minimal_run_tool")
    async def run_tool(self, function: dict[str, Any]) -> str:
        arguments = json.loads(function["arguments"] or "{}")
        total = arguments["a"] + arguments["b"]
        return str(int(total) if float(total).is_integer() else total)

    @activity.defn(name="minimal_pay")
    async def pay(self, call: dict[str, Any]) -> str:
        """The approved tool call: a payment, noted in ``PAYMENTS``."""
        PAYMENTS.append(time.perf_counter())
        return f"paid {call['arguments']}"

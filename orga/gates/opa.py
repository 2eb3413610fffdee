"""The OPA bridge: each action of a turn is asked of an Open Policy Agent server.

``POST <ORGA_OPA_URL>`` (OPA's data API, ``/v1/data/<package>``) with::

    {"input": {"agent_id", "workflow_id",
               "action": "call_tool" | "respond" | "review" | "remember",
               "tool" (the tool; the critic agent of a review; the knowledge store of a
               remember), "arguments" (a tool call's), "answer" (a typed loop's answer,
               its ``output_schema`` value), "iteration", "tokens_used"}}

and reads ``result.allow`` (bool), ``result.reason`` (str), ``result.require_approval`` (bool)
and, if present, ``result.policy_ids`` (list of str). An undefined result or ``allow`` that is
not ``true`` is a denial; an unreachable server or an error status is ``PolicyUnavailable``
(retried by Temporal; after that the loop denies the whole turn, fail closed).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, cast

import httpx

from orga.contracts.errors import PolicyUnavailable
from orga.contracts.policy import DECISION_KINDS, PolicyAction, PolicyDecision, PolicyRequest
from orga.tools.sdk import parse_arguments

__all__ = ["OpaGate"]


class OpaGate:
    """Asks one OPA decision endpoint."""

    def __init__(self, url: str, http: httpx.AsyncClient, timeout: float = 5.0) -> None:
        self.url = url
        self._http = http
        self._timeout = timeout

    def _input(self, action: PolicyAction, request: PolicyRequest) -> dict[str, Any]:
        facts: dict[str, Any] = {
            "agent_id": request.agent_id,
            "workflow_id": request.workflow_id,
            "action": action.kind,
            "iteration": request.iteration,
            "tokens_used": request.usage.total_tokens,
        }
        if action.kind == "call_tool":
            facts["tool"] = action.tool
            facts["arguments"] = parse_arguments(action.tool or "", action.arguments)
        elif action.kind == "respond" and action.answer is not None:
            facts["answer"] = json.loads(action.answer)
        elif action.kind in ("review", "remember"):
            facts["tool"] = action.tool  # the critic agent; the knowledge store
        return facts

    def asked(self, action: PolicyAction, request: PolicyRequest) -> dict[str, Any] | None:
        """The ``input`` document ``decide`` sends for ``action``, or None when it passes
        unjudged (a person's decision)."""
        return None if action.kind in DECISION_KINDS else self._input(action, request)

    async def _ask(self, action: PolicyAction, request: PolicyRequest) -> PolicyDecision:
        try:
            reply = await self._http.post(
                self.url, json={"input": self._input(action, request)}, timeout=self._timeout
            )
        except httpx.TransportError as error:
            raise PolicyUnavailable(f"OPA at {self.url} is unreachable: {error}") from error
        if reply.status_code != 200:
            raise PolicyUnavailable(
                f"OPA at {self.url} answered HTTP {reply.status_code}: {reply.text[:300]}"
            )
        try:
            body = reply.json()
        except ValueError as error:
            raise PolicyUnavailable(f"OPA at {self.url} answered with invalid JSON") from error
        result = cast(dict[str, Any], body).get("result") if isinstance(body, dict) else None
        if not isinstance(result, dict):
            return PolicyDecision(
                decision="deny", reason="the OPA policy gave no decision (undefined); denied"
            )
        result = cast(dict[str, Any], result)
        ids_value = result.get("policy_ids")
        ids = [str(i) for i in cast(list[Any], ids_value)] if isinstance(ids_value, list) else []
        reason = str(result.get("reason") or "")
        if result.get("allow") is not True:
            return PolicyDecision(
                decision="deny", reason=reason or "denied by the OPA policy", policy_ids=ids
            )
        if result.get("require_approval") is True:
            return PolicyDecision(
                decision="require_approval",
                reason=reason or "the OPA policy requires a human approval",
                policy_ids=ids,
            )
        return PolicyDecision(decision="allow", reason=reason, policy_ids=ids)

    async def decide(
        self, actions: list[PolicyAction], request: PolicyRequest
    ) -> list[PolicyDecision]:
        """One decision per action, asked concurrently. A person's decision passes unjudged:
        the OPA bridge does not decide who may approve (the Cedar gate does)."""
        unjudged = PolicyDecision(decision="allow", policy_ids=["opa.no-approval-policies"])
        return list(
            await asyncio.gather(
                *(
                    self._ask(a, request) if a.kind not in DECISION_KINDS else _given(unjudged)
                    for a in actions
                )
            )
        )


async def _given(decision: PolicyDecision) -> PolicyDecision:
    return decision

"""The OPA bridge: each action of a turn is asked of an Open Policy Agent server.

``POST <ORGA_OPA_URL>`` (OPA's data API, ``/v1/data/<package>``) with::

    {"input": {"agent_id", "workflow_id",
               "action": "call_tool" | "respond" | "review" | "remember",
               "tool" (the tool; the critic agent of a review; the knowledge store of a
               remember), "arguments" (a tool call's), "answer" (a typed loop's answer,
               its ``output_schema`` value), "iteration", "tokens_used"}}

and reads ``result.allow`` (bool), ``result.reason`` (str), ``result.require_approval`` (bool),
``result.modify_arguments`` (an object merged into a tool call's arguments: the call runs, and
the model sees it, as rewritten — a ``modify``, as Cedar's ``@modify_arguments``) and, if
present, ``result.policy_ids`` (list of str). An undefined result or ``allow`` that is not
``true`` is a denial; an unreachable server or an error status is ``PolicyUnavailable``
(retried by Temporal; after that the loop denies the whole turn, fail closed).

Which policies decided is recorded with every decision: each request asks for OPA's
provenance (``?provenance=true``), whose bundle revisions name the policy set
(``bundle-name@revision``); an OPA serving no bundle is asked for its policies
(``GET /v1/policies``) once a turn, and their SHA-256 names the set (``sha256:…``).
"""

from __future__ import annotations

import asyncio
import hashlib
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

    async def _ask(
        self, action: PolicyAction, request: PolicyRequest
    ) -> tuple[PolicyDecision, str | None]:
        """OPA's decision on ``action``, and the bundle revisions it names (if any)."""
        separator = "&" if "?" in self.url else "?"
        body = await self._post(
            f"{self.url}{separator}provenance=true", {"input": self._input(action, request)}
        )
        revision = _revision(body.get("provenance"))
        result = body.get("result")
        if not isinstance(result, dict):
            return PolicyDecision(
                decision="deny", reason="the OPA policy gave no decision (undefined); denied"
            ), revision
        return _decision(cast(dict[str, Any], result), action), revision

    async def _post(self, url: str, payload: dict[str, Any]) -> dict[str, Any]:
        try:
            reply = await self._http.post(url, json=payload, timeout=self._timeout)
        except httpx.TransportError as error:
            raise PolicyUnavailable(f"OPA at {self.url} is unreachable: {error}") from error
        return self._body(reply)

    def _body(self, reply: httpx.Response) -> dict[str, Any]:
        if reply.status_code != 200:
            raise PolicyUnavailable(
                f"OPA at {self.url} answered HTTP {reply.status_code}: {reply.text[:300]}"
            )
        try:
            body = reply.json()
        except ValueError as error:
            raise PolicyUnavailable(f"OPA at {self.url} answered with invalid JSON") from error
        return cast(dict[str, Any], body) if isinstance(body, dict) else {}

    async def _policies_hash(self) -> str:
        """``sha256:…`` of the policies OPA serves (``GET /v1/policies``: ids and texts)."""
        base = self.url.split("/v1/", 1)[0]
        try:
            reply = await self._http.get(f"{base}/v1/policies", timeout=self._timeout)
        except httpx.TransportError as error:
            raise PolicyUnavailable(f"OPA at {self.url} is unreachable: {error}") from error
        listed = self._body(reply).get("result")
        policies = cast(list[Any], listed) if isinstance(listed, list) else []
        texts = sorted(
            (str(p.get("id", "")), str(p.get("raw", "")))
            for p in (cast(dict[str, Any], p) for p in policies if isinstance(p, dict))
        )
        digest = hashlib.sha256(json.dumps(texts).encode()).hexdigest()
        return f"sha256:{digest[:16]}"

    async def decide(
        self, actions: list[PolicyAction], request: PolicyRequest
    ) -> list[PolicyDecision]:
        """One decision per action, asked concurrently. A person's decision passes unjudged:
        the OPA bridge does not decide who may approve (the Cedar gate does)."""
        return (await self.decide_with_revision(actions, request))[0]

    async def decide_with_revision(
        self, actions: list[PolicyAction], request: PolicyRequest
    ) -> tuple[list[PolicyDecision], str | None]:
        """``decide``'s decisions, and what names the policy set that made them (the bundle
        revisions, else the policies' hash; None when no action was asked)."""
        unjudged = PolicyDecision(decision="allow", policy_ids=["opa.no-approval-policies"])
        asked = [a for a in actions if a.kind not in DECISION_KINDS]
        answers = iter(await asyncio.gather(*(self._ask(a, request) for a in asked)))
        decisions: list[PolicyDecision] = []
        revisions: list[str] = []
        for action in actions:
            if action.kind in DECISION_KINDS:
                decisions.append(unjudged)
                continue
            decision, revision = next(answers)
            decisions.append(decision)
            if revision is not None:
                revisions.append(revision)
        if not asked:
            return decisions, None
        revision = revisions[0] if revisions else await self._policies_hash()
        return decisions, revision


def _revision(provenance: Any) -> str | None:
    """``name@revision`` of each bundle OPA's provenance names (sorted, comma-joined)."""
    if not isinstance(provenance, dict):
        return None
    found = cast(dict[str, Any], provenance)
    bundles = found.get("bundles")
    if isinstance(bundles, dict) and bundles:
        named = cast(dict[str, Any], bundles)
        return (
            ",".join(
                f"{name}@{cast(dict[str, Any], b).get('revision', '')}"
                for name, b in sorted(named.items())
                if isinstance(b, dict)
            )
            or None
        )
    revision = found.get("revision")  # a single bundle, as older OPAs report it
    return f"bundle@{revision}" if isinstance(revision, str) and revision else None


def _decision(result: dict[str, Any], action: PolicyAction) -> PolicyDecision:
    """OPA's ``result`` document as a decision on ``action``."""
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
    rewrite = result.get("modify_arguments")
    if rewrite is not None and action.kind == "call_tool":
        if not isinstance(rewrite, dict):
            return PolicyDecision(
                decision="deny",
                reason="the OPA policy's modify_arguments is not an object; denied (fail closed)",
                policy_ids=ids,
            )
        arguments: dict[str, Any] = {
            **parse_arguments(action.tool or "", action.arguments),
            **cast(dict[str, Any], rewrite),
        }
        return PolicyDecision(
            decision="modify",
            reason=reason or "arguments rewritten by the OPA policy",
            arguments=json.dumps(arguments, ensure_ascii=False),
            policy_ids=ids,
        )
    return PolicyDecision(decision="allow", reason=reason, policy_ids=ids)

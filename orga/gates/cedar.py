"""The Cedar gate: policies from a directory, evaluated by cedarpy, always with the schema.

Layout of ``ORGA_POLICY_DIR``::

    schema.cedarschema.json   the Cedar schema, in Cedar's JSON schema format
    *.cedar                   policies (every file, in name order)

Request mapping (documented in docs/guides/gate-and-policies.md)::

    principal  Agent::"<config.agent_id>"
    action     Action::"call_tool"     Action::"respond" (a final answer)   Action::"review"
    resource   Tool::"<tool name>"     Answer::"final"                       Agent::"<critic>"
    action     Action::"remember" (auto_persist stores the loop's task and answer)
    resource   Knowledge::"<the agent's knowledge store>"
    principal  Approver::"<name>" (in Group::"<g>" for each of its enrolled groups)
    action     Action::"approve"   Action::"deny"   (a person's decision on a waiting call)
    resource   Call::"<call id>"
    context    { tool: String, agent: String, arguments: <as for call_tool> }
    context    of respond: { iteration, tokens_used, and, where the schema declares it,
                 answer: <a typed loop's answer (output_schema), the attributes declared> }
    context    { arguments: <the call's arguments, only the attributes the schema declares>,
                 iteration: Long, tokens_used: Long,
                 and, where the schema declares them: subject: "loop" | "task",
                 step: String (a task's step), compensation: Bool (a task's compensation) }

Decisions are judged only by a policy set whose schema declares ``Action::"approve"``
(``decides_approvals``); elsewhere every decision passes (the default gate's rule).

Everything is parsed once, when the worker starts, and validated against the schema: a
policy set that does not parse or does not validate stops the worker with the file and the
error. Every request is evaluated with the schema; an error or ``NoDecision`` is a denial.
Annotations on the determining policies shape the decision: ``@approval("required")`` on a
permit asks a human, ``@modify_arguments("{…}")`` on a permit merges that JSON object into
the call's arguments (the model then sees the call as modified), ``@reason("…")`` on a forbid
is the feedback the model reads, and ``@id("…")`` names the policy in the journal.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import cedarpy

from orga.contracts.errors import InvalidConfig
from orga.contracts.policy import DECISION_KINDS, PolicyAction, PolicyDecision, PolicyRequest
from orga.tools.sdk import parse_arguments

__all__ = ["SCHEMA_FILE", "CedarGate"]

SCHEMA_FILE = "schema.cedarschema.json"


@dataclass(frozen=True)
class _Policy:
    id: str
    """``@id`` if the policy has one, else ``<file>#<n>``."""
    file: str
    annotations: dict[str, str]


def _record(schema: dict[str, Any], namespace: dict[str, Any], node: Any) -> dict[str, Any] | None:
    """The attributes of a record type (following common-type references), or None."""
    if not isinstance(node, dict):
        return None
    node = cast(dict[str, Any], node)
    kind = node.get("type")
    if kind == "Record":
        return cast(dict[str, Any], node.get("attributes", {}))
    name = node.get("name") if kind == "EntityOrCommon" else kind
    common = cast(dict[str, Any], namespace.get("commonTypes", {}))
    if isinstance(name, str) and name in common:
        return _record(schema, namespace, common[name])
    return None


def _attributes(schema: dict[str, Any], namespace: dict[str, Any], node: Any) -> set[str] | None:
    """Attribute names of a record type (following common-type references), or None."""
    record = _record(schema, namespace, node)
    return set(record) if record is not None else None


def _arguments(action: PolicyAction) -> dict[str, Any] | None:
    if action.kind != "call_tool":
        return None
    return parse_arguments(action.tool or "", action.arguments)


def _rewrite(policy: _Policy) -> dict[str, Any]:
    """The JSON object of a policy's ``@modify_arguments`` annotation (checked at load)."""
    return cast(dict[str, Any], json.loads(policy.annotations["modify_arguments"]))


class CedarGate:
    """A parsed, validated policy set and schema; decides one turn's actions at a time."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        schema_path = directory / SCHEMA_FILE
        files = sorted(directory.glob("*.cedar"))
        if not schema_path.is_file():
            raise InvalidConfig(
                f"the Cedar policy directory {str(directory)!r} has no {SCHEMA_FILE}; orga "
                "always evaluates with a schema (without one, a forbid whose condition hits a "
                "type error is skipped and a request can be wrongly allowed)"
            )
        if not files:
            raise InvalidConfig(f"the Cedar policy directory {str(directory)!r} has no *.cedar")
        schema_text = schema_path.read_text(encoding="utf-8")
        try:
            self._schema_json = cast(dict[str, Any], json.loads(schema_text))
            self._schema = cedarpy.Schema.from_json_str(schema_text)
        except ValueError as error:
            raise InvalidConfig(
                f"{SCHEMA_FILE} is not a valid Cedar JSON schema: {error}"
            ) from error
        texts: list[str] = []
        owners: list[tuple[str, int]] = []
        for path in files:
            text = path.read_text(encoding="utf-8")
            try:
                parsed = json.loads(cedarpy.policies_to_json_str(text))
            except ValueError as error:
                raise InvalidConfig(
                    f"Cedar policy file {path.name!r} does not parse: {error}"
                ) from error
            count = len(cast(dict[str, Any], parsed.get("staticPolicies", {})))
            owners += [(path.name, i) for i in range(count)]
            texts.append(text)
        combined = "\n".join(texts)
        # cedarpy annotates its dict parameters as bare ``dict``: partially unknown to pyright.
        validation = cedarpy.validate_policies(  # pyright: ignore[reportUnknownMemberType]
            combined, self._schema
        )
        policies = cast(
            dict[str, Any], json.loads(cedarpy.policies_to_json_str(combined))["staticPolicies"]
        )
        self._policies: dict[str, _Policy] = {}
        for index, (cedar_id, body) in enumerate(
            sorted(policies.items(), key=lambda item: int(item[0].removeprefix("policy")))
        ):
            annotations = {
                str(k): str(v)
                for k, v in cast(
                    dict[str, Any], cast(dict[str, Any], body).get("annotations") or {}
                ).items()
            }
            file, n = owners[index]
            self._policies[cedar_id] = _Policy(
                annotations.get("id") or f"{file}#{n}", file, annotations
            )
        for policy in self._policies.values():
            if "modify_arguments" not in policy.annotations:
                continue
            try:
                rewrite = json.loads(policy.annotations["modify_arguments"])
            except json.JSONDecodeError as error:
                rewrite = error
            if not isinstance(rewrite, dict):
                raise InvalidConfig(
                    f"{policy.file} (policy {policy.id!r}): @modify_arguments must be a JSON "
                    f"object, got {policy.annotations['modify_arguments']!r}"
                )
        if not validation.validation_passed:
            problems = "; ".join(
                f"{self._file_of(e.policy_id)}: {e.error}" for e in validation.errors
            )
            raise InvalidConfig(
                f"the Cedar policies in {str(directory)!r} do not validate against "
                f"{SCHEMA_FILE}: {problems}"
            )
        self._policy_set = cedarpy.PolicySet.from_str(combined)
        self._entities = cedarpy.Entities.from_json_str(  # pyright: ignore[reportUnknownMemberType]
            "[]"
        )
        digest = hashlib.sha256()
        for path in [schema_path, *files]:
            digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
        self.policy_hash = digest.hexdigest()[:16]
        self._argument_names = self._declared_arguments()
        self._answer_names = self._declared_record("respond", "answer")
        self._context_names = self._declared_context()
        self.decides_approvals = any(
            isinstance(namespace, dict)
            and "approve"
            in cast(dict[str, Any], cast(dict[str, Any], namespace).get("actions", {}))
            for namespace in self._schema_json.values()
        )
        """The schema declares ``Action::"approve"``: policies say who may decide what."""

    def _file_of(self, cedar_id: str) -> str:
        policy = self._policies.get(cedar_id)
        if policy is None:
            return cedar_id or "(policies)"
        return f"{policy.file} (policy {policy.id!r})"

    def _action_context(
        self, action_id: str = "call_tool"
    ) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """The schema's namespace and an action's context type, if declared."""
        for namespace in self._schema_json.values():
            if not isinstance(namespace, dict):
                continue
            namespace = cast(dict[str, Any], namespace)
            action = cast(dict[str, Any], namespace.get("actions", {})).get(action_id)
            if not isinstance(action, dict):
                continue
            applies = cast(dict[str, Any], cast(dict[str, Any], action).get("appliesTo") or {})
            return namespace, cast(dict[str, Any], applies.get("context") or {})
        return None

    def _declared_context(self) -> set[str]:
        """The optional facts (subject, step, compensation) the schema lets a request carry."""
        found = self._action_context()
        if found is None:
            return set()
        names = _attributes(self._schema_json, found[0], found[1]) or set()
        return names & {"subject", "step", "compensation"}

    def _declared_arguments(self) -> set[str] | None:
        return self._declared_record("call_tool", "arguments")

    def _declared_record(self, action_id: str, attribute: str) -> set[str] | None:
        """The attributes of the record ``attribute`` of an action's context, if declared."""
        found = self._action_context(action_id)
        if found is None:
            return None
        namespace, context = found
        attributes = _record(self._schema_json, namespace, context)
        if attributes is None or attribute not in attributes:
            return None
        return _attributes(self._schema_json, namespace, attributes[attribute])

    def _request(self, action: PolicyAction, request: PolicyRequest) -> dict[str, Any]:
        facts: dict[str, Any] = {
            "iteration": request.iteration,
            "tokens_used": request.usage.total_tokens,
        }
        if action.kind == "respond":
            return {
                "principal": {"type": "Agent", "id": request.agent_id},
                "action": {"type": "Action", "id": "respond"},
                "resource": {"type": "Answer", "id": "final"},
                "context": {**facts, **self._answer(action)},
            }
        if action.kind == "review":  # a critic agent asked to review the final answer
            return {
                "principal": {"type": "Agent", "id": request.agent_id},
                "action": {"type": "Action", "id": "review"},
                "resource": {"type": "Agent", "id": action.tool or ""},
                "context": facts,
            }
        if action.kind == "remember":  # the loop's answer into its agent's knowledge
            return {
                "principal": {"type": "Agent", "id": request.agent_id},
                "action": {"type": "Action", "id": "remember"},
                "resource": {"type": "Knowledge", "id": action.tool or ""},
                "context": facts,
            }
        arguments = parse_arguments(action.tool or "", action.arguments)
        if self._argument_names is not None:
            arguments = {k: v for k, v in arguments.items() if k in self._argument_names}
        if action.kind in DECISION_KINDS:
            return {
                "principal": {"type": "Approver", "id": action.approver or ""},
                "action": {"type": "Action", "id": action.kind},
                "resource": {"type": "Call", "id": action.call_id or ""},
                "context": {
                    "tool": action.tool or "",
                    "agent": request.agent_id,
                    "arguments": arguments,
                },
            }
        optional = {"subject": request.subject, "compensation": action.compensation}
        if action.step is not None:
            optional["step"] = action.step
        facts.update({k: v for k, v in optional.items() if k in self._context_names})
        return {
            "principal": {"type": "Agent", "id": request.agent_id},
            "action": {"type": "Action", "id": "call_tool"},
            "resource": {"type": "Tool", "id": action.tool or ""},
            "context": {"arguments": arguments, **facts},
        }

    def _answer(self, action: PolicyAction) -> dict[str, Any]:
        """``{"answer": …}``: a typed answer's fields the schema declares (an object's; nulls
        left out, as Cedar has none), where ``respond``'s context declares ``answer``."""
        if self._answer_names is None or action.answer is None:
            return {}
        value = json.loads(action.answer)
        if not isinstance(value, dict):
            return {}
        fields = cast(dict[str, Any], value)
        names = self._answer_names
        return {"answer": {k: v for k, v in fields.items() if k in names and v is not None}}

    def asked(self, action: PolicyAction, request: PolicyRequest) -> dict[str, Any] | None:
        """The Cedar request ``decide`` evaluates for ``action`` (principal, action, resource,
        context), or None when it passes unjudged (a person's decision, unless the policies
        decide approvals)."""
        if action.kind in DECISION_KINDS and not self.decides_approvals:
            return None
        return self._request(action, request)

    def decide(self, actions: list[PolicyAction], request: PolicyRequest) -> list[PolicyDecision]:
        """One decision per action (which must already have passed the default checks); a
        person's decision passes unjudged unless the policies decide approvals."""
        judged = [
            i
            for i, a in enumerate(actions)
            if a.kind not in DECISION_KINDS or self.decides_approvals
        ]
        results = cedarpy.is_authorized_batch(  # pyright: ignore[reportUnknownMemberType]
            [self._request(actions[i], request) for i in judged],
            self._policy_set,
            self._people(actions) if self.decides_approvals else self._entities,
            schema=self._schema,
        )
        decisions = [
            PolicyDecision(decision="allow", policy_ids=["cedar.no-approval-policies"])
            for _ in actions
        ]
        for index, result in zip(judged, results, strict=True):
            decisions[index] = self._decision(result, _arguments(actions[index]))
        return decisions

    def _people(self, actions: list[PolicyAction]) -> Any:
        """The approvers the actions name, each in its groups, as Cedar entities."""
        found: dict[tuple[str, str], list[dict[str, str]]] = {}
        for action in actions:
            if action.kind not in DECISION_KINDS:
                continue
            groups = [{"type": "Group", "id": g} for g in action.approver_groups]
            found[("Approver", action.approver or "")] = groups
            for group in groups:
                found.setdefault(("Group", group["id"]), [])
        entities = [
            {"uid": {"type": kind, "id": name}, "attrs": {}, "parents": parents}
            for (kind, name), parents in found.items()
        ]
        return cedarpy.Entities.from_json_str(  # pyright: ignore[reportUnknownMemberType]
            json.dumps(entities)
        )

    def _decision(
        self, result: cedarpy.AuthzResult, arguments: dict[str, Any] | None
    ) -> PolicyDecision:
        reasons = list(result.diagnostics.reasons)
        policies = [self._policies[r] for r in reasons if r in self._policies]
        ids = [p.id for p in policies]
        errors = list(result.diagnostics.errors)
        if errors:
            return PolicyDecision(
                decision="deny",
                reason=f"the policy check failed ({'; '.join(errors)}); denied (fail closed)",
                policy_ids=ids,
            )
        if result.decision == cedarpy.Decision.Allow:
            if any(p.annotations.get("approval") == "required" for p in policies):
                return PolicyDecision(
                    decision="require_approval",
                    reason=f"policy {', '.join(ids)} requires a human approval",
                    policy_ids=ids,
                )
            rewrites = [p for p in policies if "modify_arguments" in p.annotations]
            if rewrites and arguments is not None:
                for policy in rewrites:
                    arguments = {**arguments, **_rewrite(policy)}
                return PolicyDecision(
                    decision="modify",
                    reason=f"arguments rewritten by policy {', '.join(p.id for p in rewrites)}",
                    arguments=json.dumps(arguments, ensure_ascii=False),
                    policy_ids=ids,
                )
            return PolicyDecision(decision="allow", policy_ids=ids)
        if result.decision == cedarpy.Decision.Deny and policies:
            stated = [p.annotations["reason"] for p in policies if "reason" in p.annotations]
            why = "; ".join(stated) if stated else "forbidden"
            return PolicyDecision(
                decision="deny", reason=f"{why} (policy {', '.join(ids)})", policy_ids=ids
            )
        return PolicyDecision(
            decision="deny", reason="no policy permits this action", policy_ids=ids
        )

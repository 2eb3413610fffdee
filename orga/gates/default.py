"""The ``default`` gate's rules, and how an external engine's verdict joins them (and the
verdict of a gate up a delegated loop's tree).

Fails closed: a tool that was not advertised to the loop or is not registered on the worker is
denied, and so are arguments that are not a JSON object or do not match the tool's schema; a
tool declared ``requires_approval`` needs a person; a final answer and a review are allowed.
Before any gate, arguments a tool declares as paths are normalised (``orga.core.paths``): a
path that is absolute, leaves its root or names a hidden file is denied.
"""

from __future__ import annotations

import json

from orga.contracts.errors import ToolInputError
from orga.contracts.policy import DECISION_KINDS, PolicyAction, PolicyDecision, PolicyRequest
from orga.core.paths import PathRefused, normalise
from orga.tools.sdk import ToolRegistry, parse_arguments

__all__ = ["combine", "default_decision", "inherit", "normalise_paths"]


def default_decision(
    action: PolicyAction, request: PolicyRequest, registry: ToolRegistry
) -> PolicyDecision:
    """The default gate's verdict on one action."""
    if action.kind == "respond":
        return PolicyDecision(decision="allow", policy_ids=["default.respond"])
    if action.kind == "review":
        return PolicyDecision(decision="allow", policy_ids=["default.review"])
    if action.kind == "remember":  # the agent's leave was checked when the loop started
        return PolicyDecision(decision="allow", policy_ids=["default.remember"])
    if action.kind in DECISION_KINDS:  # a person's decision: only a policy engine judges it
        return PolicyDecision(decision="allow", policy_ids=["default.decision"])
    name = action.tool or ""
    if name not in request.advertised:
        available = ", ".join(request.advertised) or "none"
        return PolicyDecision(
            decision="deny",
            reason=f"tool {name!r} is not available to this agent (available: {available})",
            policy_ids=["default.advertised"],
        )
    found = registry.get(name)
    if found is None:
        return PolicyDecision(
            decision="deny",
            reason=registry.absent(name)
            or f"tool {name!r} is not registered on the worker that checked the call",
            policy_ids=["default.registered"],
        )
    try:
        found.validate(parse_arguments(name, action.arguments))
    except ToolInputError as error:
        return PolicyDecision(
            decision="deny", reason=error.message, policy_ids=["default.arguments"]
        )
    if found.definition.requires_approval:
        return PolicyDecision(
            decision="require_approval",
            reason=f"tool {name!r} requires approval",
            policy_ids=["default.requires_approval"],
        )
    return PolicyDecision(decision="allow", policy_ids=["default.allow"])


def combine(default: PolicyDecision, external: PolicyDecision) -> PolicyDecision:
    """An external verdict on an action the default checks let through."""
    if external.decision == "allow" and default.decision == "require_approval":
        return default.model_copy(
            update={"policy_ids": [*default.policy_ids, *external.policy_ids]}
        )
    return external


def inherit(own: PolicyDecision, verdict: PolicyDecision, gate: str) -> PolicyDecision:
    """``own`` (not a deny) once the gate of a loop up the delegation tree (``gate``, for the
    reason) judged the same action as it would run: its deny wins, then either's approval,
    then its rewrite of the arguments."""
    if verdict.decision == "deny":
        return verdict.model_copy(update={"reason": f"{verdict.reason} — by {gate}"})
    ids = [*own.policy_ids, *verdict.policy_ids]
    if own.decision == "require_approval":
        return own.model_copy(update={"policy_ids": ids})
    if verdict.decision == "require_approval":
        return verdict.model_copy(
            update={"reason": f"{verdict.reason} — by {gate}", "policy_ids": ids}
        )
    chosen = verdict if verdict.decision == "modify" else own
    return chosen.model_copy(update={"policy_ids": ids})


def normalise_paths(
    action: PolicyAction, registry: ToolRegistry, *, allow_hidden: bool
) -> PolicyAction | PolicyDecision:
    """The action with its path arguments normalised, or the denial of a refused path."""
    found = registry.get(action.tool or "") if action.kind == "call_tool" else None
    if found is None or not found.definition.path_arguments:
        return action
    try:
        arguments = parse_arguments(found.name, action.arguments)
    except ToolInputError:
        return action  # the default checks explain it
    changed = False
    for name in found.definition.path_arguments:
        value = arguments.get(name)
        if not isinstance(value, str):
            continue
        try:
            normalised = normalise(value, allow_hidden=allow_hidden)
        except PathRefused as error:
            return PolicyDecision(
                decision="deny", reason=f"{name}: {error}", policy_ids=["default.path"]
            )
        if normalised != value:
            arguments[name] = normalised
            changed = True
    if not changed:
        return action
    return action.model_copy(update={"arguments": json.dumps(arguments, ensure_ascii=False)})

"""Contracts of the gate: the actions a turn proposes and the decision on each.

The gate sees every proposed action of a turn at once (one policy activity per turn) and
answers one decision per action, in the same order. A decision is ``allow``, ``deny``,
``modify`` (allow with other arguments, which the model then sees) or ``require_approval``
(wait for a human). Anything a gate cannot decide is a ``deny``: gates fail closed.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Final, Literal

from pydantic import ConfigDict, Field

from orga.contracts.conversation import ToolCall
from orga.contracts.inference import Usage
from orga.contracts.verdicts import Decision, PolicyDecision, PolicyResult
from orga.contracts.vocabulary import PolicyMode
from orga.contracts.wire import Compact, Contract

__all__ = [
    "DECISION_KINDS",
    "EVALUATE_POLICY",
    "ActionKind",
    "AncestorGate",
    "Decision",
    "PolicyAction",
    "PolicyDecision",
    "PolicyRequest",
    "PolicyResult",
]

ActionKind = Literal["call_tool", "respond", "review", "remember", "approve", "deny"]
"""``review``: a critic model is asked to review the final answer (``tool`` is its agent).
``remember``: the loop stores its task and answer in its agent's knowledge (``auto_persist``;
``tool`` is the knowledge store, ``arguments`` holds ``{"content": …}``).
``approve`` / ``deny``: a person decides on a waiting call (``approver``; ``tool``, ``call_id``
and ``arguments`` are the call's): a policy may say who may decide what."""
DECISION_KINDS: Final = frozenset({"approve", "deny"})
"""The actions that are a person's decision, not the model's."""

EVALUATE_POLICY = "evaluate_policy"
"""Name of the policy activity (run as a local activity: fast, still retried)."""


class PolicyAction(Contract):
    """One thing the model wants to do."""

    model_config = ConfigDict(frozen=True)

    kind: ActionKind
    call_id: str | None = None
    """The tool call's id (``None`` for ``respond``)."""
    tool: str | None = None
    """The tool's name as the model wrote it (``None`` for ``respond``)."""
    arguments: str = "{}"
    """The call's raw argument text."""
    step: str | None = None
    """For a task: the step whose tool call this is."""
    compensation: bool = False
    """For a task: the call undoes a step (a compensation)."""
    approver: str | None = None
    """For ``approve`` / ``deny``: who decides (an enrolled name, or the caller's claim)."""
    approver_groups: list[str] = Field(default_factory=list[str])
    """For ``approve`` / ``deny``: the enrolled approver's groups."""
    answer: str | None = None
    """For ``respond`` of a typed loop (``output_schema``): the answer's value, validated, as
    JSON text; the gate judges it (Cedar ``context.answer``, OPA ``input.answer``)."""

    # One builder per kind: an action is built only by these.

    @classmethod
    def of_call(
        cls, call: ToolCall, *, step: str | None = None, compensation: bool = False
    ) -> PolicyAction:
        """The action of a tool call: what every gate decides about a call (a task's
        ``step``, or its ``compensation``)."""
        return cls(
            kind="call_tool",
            call_id=call.id,
            tool=call.name,
            arguments=call.arguments,
            step=step,
            compensation=compensation,
        )

    @classmethod
    def of_turn(cls, calls: Sequence[ToolCall]) -> list[PolicyAction]:
        """The actions of a model's turn: its calls in order, else its final answer."""
        return [cls.of_call(c) for c in calls] or [cls.of_answer()]

    @classmethod
    def of_answer(cls, answer: str | None = None) -> PolicyAction:
        """The final answer (``respond``); a typed loop's validated value as JSON text."""
        return cls(kind="respond", answer=answer)

    @classmethod
    def of_review(cls, critic: str) -> PolicyAction:
        """A critic model (the agent ``critic``) asked to review the final answer."""
        return cls(kind="review", tool=critic)

    @classmethod
    def of_memory(cls, store: str, content: str) -> PolicyAction:
        """The loop's task and answer written to its agent's knowledge ``store``."""
        return cls(
            kind="remember",
            tool=store,
            arguments=json.dumps({"content": content}, ensure_ascii=False),
        )

    @classmethod
    def of_decision(
        cls,
        call: ToolCall,
        *,
        approved: bool,
        approver: str,
        groups: Sequence[str] = (),
    ) -> PolicyAction:
        """A person's decision on the waiting ``call`` (as it would run): who may decide what."""
        return cls(
            kind="approve" if approved else "deny",
            call_id=call.id,
            tool=call.name,
            arguments=call.arguments,
            approver=approver,
            approver_groups=list(groups),
        )

    @property
    def key(self) -> tuple[str, str | None, str | None, str]:
        """What a decision about this action was about: its kind, call, tool and arguments."""
        return (self.kind, self.call_id, self.tool, self.arguments)


class AncestorGate(Contract):
    """A gate a delegated loop runs under besides its own: the gate of a loop above it in the
    delegation tree, which judges the child's actions as that loop's agent (Cedar principal
    ``Agent::"<agent_id>"``, OPA ``agent_id``), so a forbid anywhere up the tree wins."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    agent_id: str = Field(min_length=1, max_length=200)
    """The agent the loop above runs as."""
    policy: PolicyMode
    """The gate it runs under (its client's choice within its agent's floor)."""


class PolicyRequest(Compact):
    """The input of the ``evaluate_policy`` activity: one turn's proposed actions."""

    model_config = ConfigDict(frozen=True)

    mode: PolicyMode
    agent_id: str
    workflow_id: str
    subject: Literal["loop", "task"] = "loop"
    """Whose actions these are: a loop's (the model proposed them) or a task's steps."""
    iteration: int
    usage: Usage
    advertised: list[str]
    """The tools this loop advertised to the model; any other tool is denied."""
    actions: list[PolicyAction] = Field(min_length=1)
    ancestors: list[AncestorGate] = Field(default_factory=list[AncestorGate])
    """For a delegated loop: the gates of the loops above it, nearest first. Each judges every
    action its own gate did not deny, as its agent; a deny anywhere wins, then an approval."""

"""Which metrics a journal entry makes (pure): one place that turns what a loop or task records
into counters, so the metrics say what the journal says.

Workflow code emits the points through Temporal's workflow metric meter, which skips replay, so
a count is made once however often a history is replayed. Labels stay low-cardinality: agents,
tools, providers, models, outcomes — never workflow or call ids. A tool or agent label names
only what the workflow's setup resolved (``KnownLabels``: the tools the worker described for
it, the agent it runs as and its delegates, when an agents file configures them); anything
else — a tool name a model made up, the agent id of a loop the worker refused, any id under the
implicit agent — is counted as ``other``, so no input adds a series.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final, Literal

from orga.contracts.journal import JournalEntry

__all__ = ["METRICS", "OTHER", "KnownLabels", "MetricSpec", "Point", "points"]


@dataclass(frozen=True)
class MetricSpec:
    kind: Literal["counter", "histogram"]
    description: str
    unit: str = "1"


METRICS: Final[dict[str, MetricSpec]] = {
    "orga_loops_started": MetricSpec("counter", "Reasoning loops started, by agent"),
    "orga_loops_finished": MetricSpec(
        "counter", "Reasoning loops ended, by agent and termination reason"
    ),
    "orga_tasks_finished": MetricSpec("counter", "Tasks ended, by outcome"),
    "orga_model_calls": MetricSpec("counter", "Model calls, by provider, model and stop reason"),
    "orga_tokens": MetricSpec("counter", "Tokens, by provider, model and direction", "tokens"),
    "orga_cached_input_tokens": MetricSpec(
        "counter",
        "Input tokens the provider's prompt cache served (read) or stored (write), by provider "
        "and model; part of orga_tokens' input",
        "tokens",
    ),
    "orga_model_call_latency": MetricSpec(
        "histogram", "Model call latency (one attempt), by provider and model", "ms"
    ),
    "orga_model_call_cost": MetricSpec(
        "histogram",
        "What a priced model call cost (the worker's price table), by provider and model",
        "USD",
    ),
    "orga_principal_spend": MetricSpec(
        "histogram",
        "What a model call charged its principal's spend ledger, by tenant (the tenants the "
        "operator configured; any other is `other`)",
        "USD",
    ),
    "orga_tool_calls": MetricSpec("counter", "Tool calls, by tool and outcome"),
    "orga_tool_call_latency": MetricSpec("histogram", "Tool call latency (one attempt)", "ms"),
    "orga_policy_decisions": MetricSpec(
        "counter", "Gate decisions, by engine, action and decision"
    ),
    "orga_approvals_requested": MetricSpec("counter", "Calls that began waiting for a person"),
    "orga_approvals_decided": MetricSpec("counter", "Approvals decided, by tool and verdict"),
    "orga_escalations_raised": MetricSpec("counter", "Escalations that began waiting"),
    "orga_escalations_resolved": MetricSpec("counter", "Escalations resolved, by action"),
    "orga_breaker_opened": MetricSpec("counter", "Circuit breakers that opened, by tool"),
    "orga_recoveries": MetricSpec("counter", "Recovery strategies triggered, by strategy"),
    "orga_saturations": MetricSpec(
        "counter", "Loops whose evidence saturated (no new information), by agent"
    ),
    "orga_step_limits": MetricSpec("counter", "Steps stopped by their attempt limit (stuck)"),
    "orga_delegations": MetricSpec("counter", "Delegations finished, by agent and status"),
    "orga_reviews": MetricSpec("counter", "Critic reviews, by verdict and source"),
    "orga_compensations": MetricSpec("counter", "Saga compensations settled, by how"),
    "orga_continue_as_new": MetricSpec("counter", "Runs continued as new, by workflow"),
}
"""Every metric orga emits (the SDK's own ``temporal_*`` metrics come on top)."""


OTHER: Final = "other"
"""The label of a tool or agent the workflow does not know."""


@dataclass(frozen=True)
class KnownLabels:
    """The tools and agents a workflow may name in its metrics: what its setup resolved
    (nothing before that)."""

    tools: frozenset[str] = frozenset()
    agents: frozenset[str] = frozenset()

    def bound(self, attributes: dict[str, str]) -> dict[str, str]:
        """``attributes`` with each tool or agent this workflow does not know as ``other``."""
        if "tool" not in attributes and "agent" not in attributes:
            return attributes
        known = {"tool": self.tools, "agent": self.agents}
        return {
            key: value if key not in known or value in known[key] else OTHER
            for key, value in attributes.items()
        }


@dataclass(frozen=True)
class Point:
    """One increment (counter) or observation (histogram)."""

    metric: str
    value: float
    attributes: dict[str, str] = field(default_factory=dict[str, str])


def points(
    entry: JournalEntry, *, workflow: Literal["loop", "task"], provider: str | None = None
) -> list[Point]:
    """The metric points a journal entry makes (``provider``: the loop's, for model calls)."""
    agent = entry.agent_id
    match entry.kind:
        case "Started" if workflow == "loop":
            return [Point("orga_loops_started", 1, {"agent": agent})]
        case "Terminated":
            if workflow == "loop":
                return [Point("orga_loops_finished", 1, {"agent": agent, "reason": entry.reason})]
            return [Point("orga_tasks_finished", 1, {"reason": entry.reason})]
        case "ReasoningComplete":
            labels = {"provider": provider or "unknown", "model": entry.model or "unknown"}
            return [
                Point("orga_model_calls", 1, labels | {"stop_reason": entry.stop_reason}),
                Point("orga_tokens", entry.usage.input_tokens, labels | {"direction": "input"}),
                Point("orga_tokens", entry.usage.output_tokens, labels | {"direction": "output"}),
                *(
                    Point("orga_cached_input_tokens", count, labels | {"cache": cache})
                    for cache, count in (
                        ("read", entry.usage.cache_read_input_tokens),
                        ("write", entry.usage.cache_creation_input_tokens),
                    )
                    if count > 0
                ),
            ]
        case "PolicyEvaluated":
            return [
                Point(
                    "orga_policy_decisions",
                    1,
                    {"engine": entry.engine, "action": d.action, "decision": d.decision},
                )
                for d in entry.decisions
            ]
        case "ObservationsCollected":
            return [
                Point("orga_tool_calls", 1, {"tool": o.tool, "outcome": o.status})
                for o in entry.outcomes
            ]
        case "ApprovalDecided":
            verdict = "approved" if entry.approved else "denied"
            return [Point("orga_approvals_decided", 1, {"tool": entry.tool, "verdict": verdict})]
        case "EscalationResolved":
            return [Point("orga_escalations_resolved", 1, {"action": entry.action})]
        case "RecoveryTriggered":
            return [Point("orga_recoveries", 1, {"strategy": entry.strategy})]
        case "EvidenceSaturated":
            return [Point("orga_saturations", 1, {"agent": agent})]
        case "StepLimitReached":
            return [Point("orga_step_limits", 1, {"workflow": workflow})]
        case "DelegationFinished":
            return [Point("orga_delegations", 1, {"agent": entry.agent, "status": entry.status})]
        case "ReviewDecided":
            return [Point("orga_reviews", 1, {"verdict": entry.verdict, "source": entry.source})]
        case "CompensationSettled":
            return [Point("orga_compensations", 1, {"how": entry.how})]
        case _:
            return []

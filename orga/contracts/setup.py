"""What the worker resolves when a loop or task starts: its agent, tools, gate, model, budgets.

Recorded once in history (a local activity's marker), so every later step — on any worker,
after any restart — uses the same setup, whatever the defaults of the worker that happens to
run it, and the history shows exactly which ceilings and which gate applied.
"""

from __future__ import annotations

from typing import Final

from pydantic import ConfigDict, Field

from orga.contracts.agents import AgentSpec
from orga.contracts.approvals import EnrolledApprover
from orga.contracts.config import Limits, LoopConfig
from orga.contracts.judges import JudgeSeat
from orga.contracts.principals import Principal, PrincipalClaim
from orga.contracts.tools import ToolDefinition
from orga.contracts.vocabulary import PolicyMode, ProviderName
from orga.contracts.wire import Compact

__all__ = [
    "CONTINUED_FROM",
    "CURRENT_BUILD",
    "RESOLVE_LOOP",
    "RESOLVE_TASK",
    "SETUP_ELSEWHERE",
    "SETUP_LEVEL",
    "ContinuedRun",
    "LoopSetup",
    "LoopSetupRequest",
    "ParentRun",
    "PrincipalSetup",
    "TaskSetup",
    "TaskSetupRequest",
]

RESOLVE_LOOP: Final = "resolve_loop"
"""Name of the local activity that resolves a loop's setup."""
RESOLVE_TASK: Final = "resolve_task"
"""Name of the local activity that resolves a task's setup."""
CURRENT_BUILD: Final = "current_build"
"""Name of the local activity that says which build of a worker deployment is current."""
CONTINUED_FROM: Final = "continued_from"
"""Name of the local activity that asks the server what the run a loop continues was."""
SETUP_ELSEWHERE: Final = "SetupElsewhere"
"""The failure type of a setup (or a gate's check) made on a worker without tools the loop
names that another worker of its task queue registers: the workflow asks again as a plain
activity, which a worker with the tools runs (``orga.workflows.shared.elsewhere``), instead of
the loop failing ``InvalidConfig`` (or the gate denying the call)."""
SETUP_LEVEL: Final = 2
"""Which of orga's changes to the loop's workflow a worker of this release has: the level it
sets a loop up with (``LoopSetup.level``). A change at or below a run's level takes its new
path without a patch marker (``orga.workflows.shared.patches.taken``)."""


class ParentRun(Compact):
    """The workflow that started this one as its child, as the server says (``workflow.info()
    .parent``: no client sets it)."""

    model_config = ConfigDict(frozen=True)

    workflow_id: str
    run_id: str


class ContinuedRun(Compact):
    """A run that continues an earlier one, as the server records it (``workflow.info()``: no
    client sets it): this run's workflow id, type and task queue, and the run it continues."""

    model_config = ConfigDict(frozen=True)

    workflow_id: str
    continued_run_id: str
    workflow_type: str
    task_queue: str


class PrincipalSetup(Compact):
    """Who a loop or task runs for, asked of the worker at setup."""

    model_config = ConfigDict(frozen=True)

    claim: PrincipalClaim | None = None
    """What its input says (``LoopInput.principal``); a child's is its parent's."""
    parent: ParentRun | None = None
    """Set for a child: a binding signed for an ancestor holds for it when its parent is an
    orga workflow on its own task queue."""
    execution: str | None = None
    """The first run of this workflow execution (``workflow.info().first_execution_run_id``,
    the same for every run it continues as new into): a binding admits one execution."""


class LoopSetupRequest(Compact):
    """The input of ``resolve_loop``."""

    model_config = ConfigDict(frozen=True)

    config: LoopConfig
    tools: list[str] = Field(default_factory=list[str])
    """Every tool the loop may run: its own and the fallbacks'."""
    principal: PrincipalSetup | None = None
    """Who it runs for (None: nobody, and no parent)."""


class LoopSetup(Compact):
    """What the worker resolved for a loop."""

    model_config = ConfigDict(frozen=True)

    tools: list[ToolDefinition] = Field(default_factory=list[ToolDefinition])
    agent_tools: list[str] = Field(default_factory=list[str])
    """A top-level loop that names no tools: its agent's own (the agent's globs over this
    worker's tools), which it runs and advertises. Empty where the loop names its tools, for
    the implicit agent, and in setups recorded before."""
    provider: ProviderName
    model: str
    policy: PolicyMode = "default"
    """The gate: the config's choice, or the agent's floor."""
    limits: Limits = Field(default_factory=Limits)
    agent: AgentSpec | None = None
    """The agent the loop runs as, as the worker defined it."""
    delegates: list[AgentSpec] = Field(default_factory=list[AgentSpec])
    """The agents the loop may hand work to (its agent's ``delegates``, while the loop is not
    at ``max_delegation_depth`` and its tools include ``delegate`` or name none); with any,
    ``tools`` holds the ``delegate`` tool."""
    delegate_tools: dict[str, list[str]] = Field(default_factory=dict[str, list[str]])
    """For each delegate: the tools of this worker its agent may use (its globs expanded
    against the registry, the knowledge tools left out) within what this loop may use — a
    child is never wider than its parent — and ``delegate`` where the child may delegate on.
    A child runs with these, or fewer if the call asks."""
    fallbacks: list[tuple[ProviderName, str]] = Field(
        default_factory=list[tuple[ProviderName, str]]
    )
    """The provider and model of each fallback, resolved and checked against the agent."""
    critic_provider: ProviderName | None = None
    critic_model: str | None = None
    """With a model critic: the provider and model its agent answers with."""
    model_task_queue: str | None = None
    """Where model calls run, when the worker's operator gave them a task queue of their own
    (``ORGA_MODEL_TASK_QUEUE``, rate-limited by the server: ``ORGA_MODEL_RPS``)."""
    knowledge_namespace: str | None = None
    """Whose knowledge the loop reads and writes (with ``config.knowledge``): its agent's
    store — the agent's id, or the store its agent file names."""
    approvers: list[EnrolledApprover] = Field(default_factory=list[EnrolledApprover])
    """The people the worker's operator enrolled to decide (none: decisions are unverified)."""
    approvals_by_policy: bool = False
    """The gate's policies judge each decision (Cedar ``Action::"approve"`` / ``"deny"``)."""
    judge: JudgeSeat | None = None
    """Its agent's judge, which decides held calls before a person does where it may."""
    principal: Principal | None = None
    """Who the loop runs for, as the worker resolved it (``orga.contracts.principals``)."""
    fairness_weight: float | None = None
    """The operator's weight for the principal's tenant (Temporal's fairness weight of its
    model and tool calls; None: the server's default)."""
    level: int = 0
    """The ``SETUP_LEVEL`` of the worker that set the loop up (0: a worker from before levels,
    whose runs ask ``workflow.patched``)."""


class TaskSetupRequest(Compact):
    """The input of ``resolve_task``."""

    model_config = ConfigDict(frozen=True)

    agent_id: str
    tools: list[str] = Field(default_factory=list[str])
    """Every tool the task's steps, compensations and child loops name."""
    loop_agents: list[str] = Field(default_factory=list[str])
    """The agents its loop steps run as (each must exist on the worker)."""
    principal: PrincipalSetup | None = None
    """Who it runs for (None: nobody, and no parent)."""


class TaskSetup(Compact):
    """What the worker resolved for a task."""

    model_config = ConfigDict(frozen=True)

    tools: list[ToolDefinition] = Field(default_factory=list[ToolDefinition])
    policy: PolicyMode = "default"
    """The gate every step and compensation passes: the agent's floor."""
    agent: AgentSpec | None = None
    approvers: list[EnrolledApprover] = Field(default_factory=list[EnrolledApprover])
    """The people the worker's operator enrolled to decide (none: decisions are unverified)."""
    approvals_by_policy: bool = False
    """The gate's policies judge each decision (Cedar ``Action::"approve"`` / ``"deny"``)."""
    principal: Principal | None = None
    """Who the task runs for, as the worker resolved it."""
    fairness_weight: float | None = None
    """The operator's weight for the principal's tenant (``LoopSetup.fairness_weight``)."""
    judge: JudgeSeat | None = Field(default=None, exclude_if=lambda v: v is None)
    """Its agent's judge, which decides held steps before a person does where it may."""

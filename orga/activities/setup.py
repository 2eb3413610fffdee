"""The setup activities: what the worker resolves for a loop or a task before its first step.

Local activities, run once when a loop or task starts (the result is recorded in history):
the agent it runs as, the tool definitions from this worker's registry, the gate, and — for a
loop — the budgets and the effective provider and model. The config may only narrow what the
agent allows (``orga.core.agents``); a loop keeps what was recorded here even when workers
with other defaults pick it up later. A worker without a tool the loop names, which another
live worker of the queue registers, says so (``orga.activities.elsewhere``): the workflow asks
that one, as a plain activity.
"""

from __future__ import annotations

import asyncio

from temporalio import activity

from orga.activities.elsewhere import Elsewhere, elsewhere_if_missing
from orga.activities.principals import PrincipalResolver
from orga.contracts.agents import IMPLICIT_AGENT, AgentSpec
from orga.contracts.critic import ModelCritic
from orga.contracts.delegation import DELEGATE_TOOL
from orga.contracts.errors import InvalidConfig
from orga.contracts.knowledge import RECALL_TOOL, STORE_TOOL
from orga.contracts.setup import (
    RESOLVE_LOOP,
    RESOLVE_TASK,
    SETUP_LEVEL,
    LoopSetup,
    LoopSetupRequest,
    TaskSetup,
    TaskSetupRequest,
)
from orga.contracts.vocabulary import PolicyMode, ProviderName
from orga.core.agents import (
    Offer,
    check_local,
    check_model,
    check_tools,
    choose_policy,
    delegation_bound,
    narrows_tools,
    offers_delegation,
    resolve_loop,
)
from orga.core.profile import glob_matches
from orga.runtime.json_schema import schema_problem
from orga.runtime.settings import Settings
from orga.tools.sdk import ToolRegistry
from orga.worker.agent_registry import AgentRegistry

__all__ = ["SetupActivities"]


class SetupActivities:
    """Resolves loops and tasks against one worker's agents, tools and settings."""

    def __init__(
        self,
        *,
        settings: Settings,
        registry: ToolRegistry,
        agents: AgentRegistry,
        engines: frozenset[PolicyMode],
        principals: PrincipalResolver,
        approval_policy: bool = False,
        elsewhere: Elsewhere | None = None,
    ) -> None:
        self._elsewhere = elsewhere
        """Whether a live worker of a task queue registers all of some tools (the store's
        lists): a setup landing here without them is made again there."""
        self._principals = principals
        """Who each loop and task runs for (``orga.activities.principals``)."""
        self._settings = settings
        self._approval_policy = approval_policy
        """The Cedar policies say who may decide what (their schema declares approve)."""
        self._registry = registry
        self._agents = agents
        self._offer = Offer(
            engines=engines,
            allow_permissive=settings.allow_permissive,
            default_provider=settings.default_provider_name(),
            default_model=self._default_model,
            origin=agents.origin,
        )

    def _default_model(self, provider: ProviderName) -> str:
        return self._settings.provider(provider).default_model

    @activity.defn(name=RESOLVE_LOOP)
    async def resolve_loop(self, request: LoopSetupRequest) -> LoopSetup:
        """The loop's agent, tools, gate, budgets, provider and model.

        Raises:
            InvalidConfig: the config asks for more than its agent allows, a tool is not
                registered here, its provider is not served here, or its ``output_schema``
                is refused (``orga.runtime.json_schema.schema_problem``).
        """
        agent = self._agents.get(request.config.agent_id)
        schema = request.config.output_schema
        # A client's schema: checked in a thread (bounded, but up to about a second).
        if schema is not None and (problem := await asyncio.to_thread(schema_problem, schema)):
            raise InvalidConfig(f"config.output_schema {problem}")
        principal = await self._principals.resolve(request.principal, _workflow_id())
        resolved = resolve_loop(agent, request.config, request.tools, self._offer)
        await elsewhere_if_missing(self._registry, self._elsewhere, request.tools)
        tools = self._registry.definitions(request.tools, named_by="config.tools")
        # A top-level loop that names no tools uses its agent's (the implicit agent's "every
        # tool" is never handed out unasked).
        own: list[str] = []
        if not narrows_tools(request.config) and agent.id != IMPLICIT_AGENT:
            own = [name for name in self._tools_of(agent) if name not in request.tools]
            tools += self._registry.definitions(own, named_by=f"agent {agent.id!r}")
        delegates: list[AgentSpec] = []
        delegate_tools: dict[str, list[str]] = {}
        max_depth = resolved.limits.max_delegation_depth
        if offers_delegation(agent, request.config, max_depth):
            delegates = [self._agents.get(d) for d in agent.delegates]
            bound = delegation_bound(request.config)
            depth = request.config.delegation_depth + 1
            delegate_tools = {d.id: self._handed_to(d, bound, depth, max_depth) for d in delegates}
            if DELEGATE_TOOL not in request.tools:
                tools += self._registry.definitions([DELEGATE_TOOL], named_by="delegates")
        # An agent's knowledge is its own (or the store its agent file names); the implicit
        # agent keeps each agent id's apart.
        namespace = None
        if request.config.knowledge is not None:
            namespace = agent.knowledge or request.config.agent_id
        critic_provider: ProviderName | None = None
        critic_model: str | None = None
        if isinstance(request.config.critic, ModelCritic):
            critic = self._agents.get(request.config.critic.agent)
            check_local(critic, self._offer, "config.critic.agent")
            critic_provider = critic.provider or self._offer.default_provider
            critic_model = critic.model or self._default_model(critic_provider)
            # The critic reads the loop's task and answer: they may leave only through a
            # provider and model the loop's own agent may use.
            check_model(
                agent,
                critic_provider,
                critic_model,
                self._offer,
                f" — the critic (agent {critic.id!r}) would send it the loop's conversation",
            )
        fallbacks: list[tuple[ProviderName, str]] = []
        chosen = request.config.fallbacks
        for choice in agent.fallbacks if chosen is None else chosen:
            provider = choice.provider or resolved.provider
            model = choice.model or self._default_model(provider)  # refuses one not served
            # The conversation leaves through a fallback too: within the agent's lists.
            check_model(agent, provider, model, self._offer, " — a fallback of the loop")
            fallbacks.append((provider, model))
        return LoopSetup(
            level=SETUP_LEVEL,
            tools=[t.referenced() for t in tools],  # schemas and descriptions stay on the worker
            agent_tools=own,
            provider=resolved.provider,
            model=resolved.model,
            fallbacks=fallbacks,
            policy=resolved.policy,
            limits=resolved.limits,
            agent=agent,
            knowledge_namespace=namespace,
            delegates=delegates,
            delegate_tools=delegate_tools,
            critic_provider=critic_provider,
            critic_model=critic_model,
            model_task_queue=self._settings.model_task_queue,
            approvers=self._agents.approvers,
            approvals_by_policy=self._approval_policy and resolved.policy == "cedar",
            judge=judge.seat() if (judge := self._agents.judge_of(agent)) is not None else None,
            principal=principal,
            fairness_weight=self._principals.weight(principal),
        )

    def _handed_to(
        self, child: AgentSpec, bound: list[str] | None, depth: int, max_depth: int
    ) -> list[str]:
        """A delegated child's tools: its own agent's (least privilege: the parent's agent
        need not hold them), within what the client at the top named (``bound``, when it
        named any), and ``delegate`` where it may delegate on at ``depth`` (below the
        parent's and its own agent's ``max_delegation_depth``)."""
        if child.a2a is not None:  # it has its own tools, at its endpoint
            return []
        tools = [name for name in self._tools_of(child) if bound is None or name in bound]
        if child.delegates and depth < min(max_depth, child.max_delegation_depth):
            tools.append(DELEGATE_TOOL)
        return tools

    def _tools_of(self, agent: AgentSpec) -> list[str]:
        """The registered tools ``agent`` may use: its globs over this worker's registry,
        without the tools a loop's own setup adds (knowledge, ``delegate``)."""
        own = (RECALL_TOOL, STORE_TOOL, DELEGATE_TOOL)
        return [
            name
            for name in self._registry.names()
            if name not in own and any(glob_matches(g, name) for g in agent.tools)
        ]

    @activity.defn(name=RESOLVE_TASK)
    async def resolve_task(self, request: TaskSetupRequest) -> TaskSetup:
        """The task's agent, the definitions of every tool it names, and its gate.

        Raises:
            InvalidConfig: no such agent, a tool it may not use, or one not registered here.
        """
        agent = self._agents.get(request.agent_id)
        check_local(agent, self._offer, "the task's agent_id")
        for loop_agent in request.loop_agents:
            check_local(self._agents.get(loop_agent), self._offer, "a step of the task")
        check_tools(agent, request.tools, self._offer, "the task")
        await elsewhere_if_missing(self._registry, self._elsewhere, request.tools)
        policy = choose_policy(agent, None, self._offer)
        principal = await self._principals.resolve(request.principal, _workflow_id())
        return TaskSetup(
            principal=principal,
            fairness_weight=self._principals.weight(principal),
            approvers=self._agents.approvers,
            approvals_by_policy=self._approval_policy and policy == "cedar",
            tools=[  # names and flags only: the schemas and descriptions stay on the worker
                t.referenced()
                for t in self._registry.definitions(request.tools, named_by="the task")
            ],
            policy=policy,
            agent=agent,
            judge=judge.seat() if (judge := self._agents.judge_of(agent)) is not None else None,
        )


def _workflow_id() -> str:
    """The id of the workflow this setup is for (a local activity runs in its worker)."""
    return activity.info().workflow_id or ""

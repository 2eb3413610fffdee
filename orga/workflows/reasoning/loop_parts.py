"""What a loop has to work with: its setup (agent, tools, gate, budgets, model), and what the
model sees.

Workflow code. A loop's tools are the ones its config lists; the recovery strategies' fallback
tools are resolved too (they run, but are not advertised). The worker resolves them against the
loop's agent, with the effective gate, budgets, provider and model, in the ``resolve_loop``
local activity when the loop starts (``set_up_loop``, which also gives the loop its delegates,
critic, knowledge and evidence judge: its ``LoopParts``); the tool profile then decides what is
advertised. Pre-hydration advertises nothing by itself: it may only use resolver tools the
model sees.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field

from temporalio.common import Priority
from temporalio.exceptions import FailureError

from orga.contracts.config import Limits, LoopConfig, LoopInput
from orga.contracts.conversation import Message
from orga.contracts.delegation import DELEGATE_TOOL
from orga.contracts.errors import InvalidConfig
from orga.contracts.evidence import EvidenceCollection
from orga.contracts.inference import ConversationSlice, InferenceRequest
from orga.contracts.journal import Started
from orga.contracts.knowledge import RECALL_TOOL, STORE_TOOL
from orga.contracts.principals import Principal, PrincipalClaim
from orga.contracts.setup import RESOLVE_LOOP, LoopSetup, LoopSetupRequest
from orga.contracts.tools import ToolDefinition
from orga.contracts.vocabulary import ProviderName
from orga.core.judging import loop_task
from orga.core.principals import handed_on
from orga.core.profile import visible_tools
from orga.core.typed_answers import constrains
from orga.workflows.reasoning.critic import Critic
from orga.workflows.reasoning.delegation import Delegations, introduction
from orga.workflows.reasoning.durable_conversation import Conversation
from orga.workflows.reasoning.evidence_judge import EvidenceJudge, evidence_tools
from orga.workflows.reasoning.knowledge_bridge import KnowledgeBridge
from orga.workflows.reasoning.loop_books import LoopBooks
from orga.workflows.reasoning.running_summary import RunningSummary
from orga.workflows.reasoning.tool_state import ToolState
from orga.workflows.shared import metrics
from orga.workflows.shared.elsewhere import where_the_tools_are
from orga.workflows.shared.failures import failure_of
from orga.workflows.shared.gate import Gate
from orga.workflows.shared.judging import JudgeAsker
from orga.workflows.shared.options import SETUP_TIMEOUT, SHORT_RETRY
from orga.workflows.shared.principals import fair_share, principal_setup

__all__ = [
    "LoopParts",
    "advertised_tools",
    "loop_tool_state",
    "loop_tools",
    "resolve_loop",
    "set_up_loop",
]


@dataclass
class LoopParts:
    """What a loop works with once ``set_up_loop`` set it up; before that, what its config
    says."""

    limits: Limits
    """The budgets that apply (the resolved ones once the worker set the loop up)."""
    provider: ProviderName | None
    model: str | None
    """The effective provider and model, once the worker resolved them."""
    gate_in_model_call: bool = False
    """The ``default`` gate is decided by the model call, on the worker, when the answer
    arrives (the loop then needs no policy call for that turn)."""
    model_task_queue: str | None = None
    """Where model calls run (the worker's ``ORGA_MODEL_TASK_QUEUE``), else the loop's."""
    fallbacks: list[tuple[ProviderName, str]] = field(
        default_factory=list[tuple[ProviderName, str]]
    )
    """The models still to turn to when the loop's is unavailable, in order."""
    advertised: list[str] = field(default_factory=list[str])
    """The tools the model sees."""
    evidence: EvidenceJudge | None = None
    """Judges evidence calls, for loops that advertise an evidence tool (or carried a record)."""
    critic: Critic | None = None
    """Reviews final answers, for loops with ``config.critic``."""
    knowledge: KnowledgeBridge | None = None
    """The agent's knowledge, for loops with ``config.knowledge`` (set up by the worker)."""
    principal: Principal | None = None
    """Who the loop runs for, as its worker resolved it (its calls are charged to it)."""
    claim: PrincipalClaim | None = None
    """The principal as the loop's input gave it: handed to its next run as it came."""
    priority: Priority = field(default_factory=lambda: Priority.default)
    """Its model and tool calls' fairness key (the principal's tenant) and weight."""

    def request(
        self,
        config: LoopConfig,
        *,
        iteration: int,
        conversation: ConversationSlice,
        judged_tools: list[str],
        knowledge: str | None,
        stream: bool,
        token_budget: int,
        summary: RunningSummary,
        calibration: float,
        misses: int,
    ) -> InferenceRequest:
        """The model call of ``iteration``: what the model sees and may do, within what is
        left (``token_budget``), asking the provider to hold a typed answer to its schema only
        where the model is to answer (``orga.core.typed_answers``)."""
        return InferenceRequest(
            provider=self.provider,
            model=self.model,
            iteration=iteration,
            conversation=conversation,
            tools=list(self.advertised),
            judged_tools=judged_tools,
            max_output_tokens=config.max_output_tokens,
            temperature=config.temperature,
            context_token_budget=config.context_token_budget,
            context_strategy=config.context_strategy,
            token_calibration=calibration,
            max_response_bytes=config.max_payload_bytes,
            knowledge=knowledge,
            stream=stream,
            gate=self.gate_in_model_call,
            agent_id=config.agent_id,
            prompt_cache=config.prompt_cache,
            token_budget=token_budget,
            context_summary=summary.text,
            summarised_through=summary.through,
            output_schema=config.output_schema,
            principal=self.principal,
            constrain_output=constrains(
                structured_output=config.structured_output,
                tools_offered=bool(self.advertised),
                misses=misses,
            ),
        )


def loop_tool_state(
    config: LoopConfig, books: LoopBooks, gate: Gate, *, workflow_id: str, max_concurrent: int
) -> ToolState:
    """A loop's tool state before its setup: its config's breakers, recovery and timeouts,
    reporting to its ``books`` and asking its ``gate`` (the definitions come at setup)."""
    return ToolState(
        workflow_id=workflow_id,
        definitions={},
        breaker_config=config.circuit_breaker,
        recovery=config.recovery,
        desk=books.desk,
        max_concurrent=max_concurrent,
        default_timeout=config.tool_timeout,
        approval_timeout=config.approval_timeout,
        max_payload_bytes=config.max_payload_bytes,
        record=books.record,
        stamp=books.stamp,
        gate=gate.decide_call,
        waiting_for_workers=books.waiting_for_workers,
        worker_wait_changed=books.worker_wait_changed,
        receipt=books.receipt,
        pause_recheck=config.pause_recheck,
        paused=books.call_paused,
        agent_id=config.agent_id,
        pauses_lifted=lambda: books.pauses_lifted,
        stopping=books.stopping,
    )


async def set_up_loop(
    loop: LoopInput,
    *,
    workflow_id: str,
    books: LoopBooks,
    gate: Gate,
    tools: ToolState,
    conversation: Conversation,
    evidence: EvidenceCollection | None = None,
) -> LoopParts:
    """What the worker resolves for this loop: its agent, tools, gate, budgets and model, set
    on the loop's ``books``, ``gate``, ``tools`` and ``conversation``; then ``Started`` is
    journaled (a first run) and what the model sees decided.

    Raises:
        InvalidConfig: the loop could not be set up (a tool or provider the worker lacks).
    """
    config = loop.config
    parts = LoopParts(books.limits, config.provider, config.model)
    delegates: list[str] = []
    setup = await resolve_loop(config, loop.principal)
    parts.claim, parts.principal = loop.principal, setup.principal
    parts.priority = fair_share(setup.principal, setup.fairness_weight)
    books.runs_for(setup.principal, parts.priority)
    tools.priority = parts.priority
    books.setup_level = tools.setup_level = setup.level
    tools.definitions = {d.name: d for d in setup.tools}
    parts.provider, parts.model = setup.provider, setup.model
    parts.model_task_queue = setup.model_task_queue
    parts.fallbacks = list(setup.fallbacks)
    books.provider = setup.provider
    gate.policy = setup.policy
    books.desk.enroll(setup.approvers, setup.agent.approvals_needed if setup.agent else {})
    books.desk.check_edit = gate.decide_call
    if setup.approvals_by_policy:
        books.desk.authority = functools.partial(gate.decide_one, advertised=[])
    if setup.judge is not None:
        books.desk.judge = JudgeAsker(
            setup.judge,
            workflow_id=workflow_id,
            agent=config.agent_id,
            task=lambda: loop_task(conversation.messages),
            principal=lambda: books.principal,
            charge=books.charge,
            queue=setup.model_task_queue if setup.judge.model else None,
        )
    gate.ancestors = list(config.ancestor_gates)
    # The model call decides the default gate alone: not with ancestors' engines to ask.
    parts.gate_in_model_call = setup.policy == "default" and not gate.ancestors
    parts.limits = books.limits = setup.limits
    tools.max_concurrent = setup.limits.max_concurrent_tools
    delegates = [d.id for d in setup.delegates]
    if setup.delegates:
        delegations = Delegations(
            workflow_id=workflow_id,
            config=config,
            books=books,
            limits=lambda: books.limits,
            delegates=setup.delegates,
            tools=setup.delegate_tools,
            policy=setup.policy,
            principal=handed_on(loop.principal, setup.principal),
            charged_to=setup.principal,
        )
        tools.delegate = delegations.run
        tools.plan_delegations = delegations.plan
    if config.critic is not None:
        parts.critic = Critic(
            config.critic,
            books,
            gate,
            provider=setup.critic_provider,
            model=setup.critic_model,
            timeout=config.model_timeout,
            task_queue=setup.model_task_queue,
        )
    if config.knowledge is not None and setup.knowledge_namespace is not None:
        parts.knowledge = KnowledgeBridge(config.knowledge, setup.knowledge_namespace, books, gate)
        tools.knowledge_namespace = setup.knowledge_namespace
        tools.knowledge_directory = config.knowledge.directory or ""
    agent = setup.agent
    if loop.carry is None:
        # The operator's prompt (and whom the agent may delegate to) come before anything
        # the client sent.
        first = (
            [Message(role="system", content=agent.system_prompt)]
            if (agent is not None and agent.system_prompt)
            else []
        )
        if setup.delegates:
            first.append(introduction(setup.delegates, setup.delegate_tools))
        if first:
            conversation.reset([*first, *conversation.messages])
    # Its metrics name only the tools and agents resolved here (a model's invented tool name,
    # the id of a loop refused above or one no agents file configures is counted as "other").
    metrics.know(
        tools=set(tools.definitions), agents={config.agent_id, *delegates}, runs_as=setup.agent
    )
    if loop.carry is None:
        books.record(
            Started(
                **books.stamp(),
                tools=[*config.tools, *setup.agent_tools],
                provider=parts.provider,
                model=parts.model,
                policy=gate.policy,
            )
        )
    parts.advertised = advertised_tools(config, tools.definitions, setup.agent_tools)
    if tools.delegate is not None and DELEGATE_TOOL not in parts.advertised:
        parts.advertised.append(DELEGATE_TOOL)
    # Track evidence when the loop advertises an evidence tool (or carried a record, or its
    # fork point held one: ``evidence``).
    collection = loop.carry.evidence if loop.carry is not None else evidence
    if collection is None and evidence_tools(tools.definitions, parts.advertised):
        collection = EvidenceCollection(max_no_gain=config.max_no_gain)
    if collection is not None:
        parts.evidence = EvidenceJudge(collection, tools.definitions, parts.advertised, books)
    return parts


def loop_tools(config: LoopConfig) -> list[str]:
    """The loop's tool list: its config's, and the knowledge tools when it uses them."""
    names = list(config.tools)
    if config.knowledge is not None and config.knowledge.tools:
        names += [n for n in (RECALL_TOOL, STORE_TOOL) if n not in names]
    return names


def advertised_tools(
    config: LoopConfig, definitions: dict[str, ToolDefinition], agents: Sequence[str] = ()
) -> list[str]:
    """The tools the model sees: the loop's tool list (and its agent's own, ``agents``, where
    it names none: ``LoopSetup.agent_tools``), filtered by the tool profile."""
    listed = [definitions[name] for name in [*loop_tools(config), *agents]]
    return [d.name for d in visible_tools(config.tool_profile, listed)]


def _runnable_tools(config: LoopConfig) -> list[str]:
    names = loop_tools(config)
    return names + [n for n in config.recovery.fallback_tools() if n not in names]


async def resolve_loop(config: LoopConfig, claim: PrincipalClaim | None = None) -> LoopSetup:
    """The loop's setup as this worker resolves it, recorded as one marker; ``claim``: who it
    runs for, as its input says.

    Raises:
        InvalidConfig: a tool is not registered on the worker, its provider is not served, or
            its principal is refused.
    """
    request = LoopSetupRequest(
        config=config, tools=_runnable_tools(config), principal=principal_setup(claim)
    )
    try:
        return await where_the_tools_are(
            RESOLVE_LOOP,
            request,
            LoopSetup,
            timeout=SETUP_TIMEOUT,
            retry_policy=SHORT_RETRY,
            summary=f"resolve the loop's setup · {len(request.tools)} tool(s)",
        )
    except FailureError as error:
        failure = failure_of(error)
        raise InvalidConfig(f"the loop could not be set up: {failure.message}") from error

"""The ``ReasoningLoop`` workflow: Observe → Reason → Gate → Act until the model answers.

Deterministic orchestration only; model calls, policy checks and tools are activities. The
cycle routes on the model's structured ``stop_reason`` and nothing else, moving through the
typestate phases of ``orga.core.phases``::

    run ── describe tools ── _within(timeout) ──────────────────────────────▶ LoopResult
                                  │  runs _cycle as a task and waits for it on a workflow
                                  │  timer that stops while people are asked; at the
                                  │  deadline it cancels the cycle: BudgetExceeded
                                  ▼
    _cycle   pre-hydration (once)
        ┌──▶ Observe   append the last turn; continue as new if the history is long
        │    Reason    call_model ─▶ route(stop_reason)
        │                end_turn ─▶ Gate(respond) ─┬─ allowed ─▶ Finished
        │                                           └─ denied: feedback to the model ─┐
        │                tool_use ─▶ judge evidence ─▶ Gate(calls)                    │
        │    Act       run what passed; every call id gets exactly one result         │
        └─────────────────────────────────────────────────────────────────────────────┘
                         anything else ─▶ UnhandledStopReason (no call runs)

Every exit is journaled as ``Terminated`` first: an answer that passed the gate (the result), a
``LoopFailure`` (``UnhandledStopReason``, ``BudgetExceeded``, ``ModelCallFailed``,
``Aborted``), ``InvalidConfig``, or cancellation. The parts live beside this module: the books
(``bookkeeping``), the gate (``gate``), the tools a loop has (``catalog``), acting
(``dispatcher``, ``executor``), people (``human``), pre-hydration, evidence judging and
continue-as-new.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from typing import Literal

from temporalio import workflow
from temporalio.common import RawValue
from temporalio.contrib.workflow_streams import WorkflowStream

from orga.contracts.audit import AuditChain
from orga.contracts.config import Limits, LoopInput
from orga.contracts.conversation import Message
from orga.contracts.delegation import DELEGATE_TOOL
from orga.contracts.errors import BudgetExceeded, InvalidConfig, LoopFailure
from orga.contracts.evidence import EvidenceCollection, ProgressSnapshot
from orga.contracts.inference import ConversationRange, InferenceRequest, InferenceResponse
from orga.contracts.journal import Journal, Started
from orga.contracts.policy import PolicyAction, PolicyResult
from orga.contracts.state import LoopResult, LoopState
from orga.contracts.vocabulary import ProviderName
from orga.core.ids import with_internal_ids
from orga.core.phases import (
    Answered,
    AnswerPolicyCheck,
    Observing,
    Reasoning,
    ToolDispatching,
    ToolPolicyCheck,
)
from workflows import continuation
from workflows.bookkeeping import Conversation, LoopBooks
from workflows.catalog import advertised_tools, describe_tools, resolve_loop
from workflows.common import decoded
from workflows.critic import Critic
from workflows.delegation import Delegations, introduction
from workflows.dispatcher import ToolRunner
from workflows.evidence import EvidenceJudge, evidence_tools
from workflows.gate import Gate
from workflows.human import DeskHandlers
from workflows.knowledge import KnowledgeBridge
from workflows.model import call_model
from workflows.patches import GATE_IN_MODEL_CALL, NO_CRON, RESOLVE_LOOP
from workflows.prehydration import pre_hydrate
from workflows.toolstate import ToolState

__all__ = ["ReasoningLoopWorkflow"]


@dataclass(frozen=True)
class Finished:
    """How the cycle ended, when it ended normally."""

    output: str
    reason: Literal["end_turn", "saturated", "critic_rejected"]
    snapshot: ProgressSnapshot | None = None
    critique: str | None = None


@workflow.defn(name="ReasoningLoop")
class ReasoningLoopWorkflow(DeskHandlers):
    """One agent loop. Start it with a ``LoopInput``; it returns a ``LoopResult``."""

    @workflow.init
    def __init__(self, input: RawValue) -> None:
        checked, self._invalid = decoded(LoopInput, input, "loop")
        self._input = loop = checked or LoopInput(messages=[Message(role="user", content="")])
        self._config = config = loop.config
        info = workflow.info()
        self._workflow_id = info.workflow_id
        if loop.carry is not None and info.continued_run_id is None and self._invalid is None:
            self._invalid = (
                "the loop input carries state (carry) but this run continues no earlier one: "
                "carry is set by a loop for its next run, never by a client. Nothing was run."
            )
        if info.cron_schedule and self._invalid is None and workflow.patched(NO_CRON):
            # Each cron run "continues" the one before with the client's input: a carry in it
            # would pass for the loop's own. Schedules start fresh loops instead.
            self._invalid = (
                f"loops do not run on a cron schedule ({info.cron_schedule!r}): start them "
                "from a Temporal Schedule (`orga schedule create`), which starts a fresh loop "
                "each time. Nothing was run."
            )
        self._stream = WorkflowStream() if config.stream and self._invalid is None else None
        """Where the model's text is published while it arrives (``config.stream``)."""
        self._limits = Limits.of(config)
        """The budgets that apply (the resolved ones once the worker set the loop up)."""
        self._books = books = LoopBooks(config, self._limits, started_at=workflow.now())
        self._desk = books.desk  # the people's handlers answer here
        self._conversation = Conversation()
        if config.system_prompt and loop.carry is None:
            self._conversation.append([Message(role="system", content=config.system_prompt)])
        self._conversation.append(loop.messages)
        self._gate = Gate(
            policy=config.policy or "default",
            agent_id=config.agent_id,
            workflow_id=self._workflow_id,
            record=books.record,
            stamp=books.stamp,
            facts=lambda: (books.iteration, books.usage),
        )
        self._tools = ToolState(
            workflow_id=self._workflow_id,
            definitions={},
            breaker_config=config.circuit_breaker,
            recovery=config.recovery,
            desk=books.desk,
            max_concurrent=self._limits.max_concurrent_tools,
            default_timeout=config.tool_timeout,
            approval_timeout=config.approval_timeout,
            max_payload_bytes=config.max_payload_bytes,
            record=books.record,
            stamp=books.stamp,
            gate=self._gate.decide_call,
        )
        self._advertised: list[str] = []
        self._governed = False
        """Started since ``orga-resolve-loop``: set up by ``resolve_loop`` (agent, gate,
        budgets), its own call ids. Loops recorded before keep their behaviour on replay."""
        self._provider: ProviderName | None = config.provider
        self._model: str | None = config.model
        """The effective provider and model, once the worker resolved them."""
        self._model_task_queue: str | None = None
        """Where model calls run (the worker's ``ORGA_MODEL_TASK_QUEUE``), else the loop's."""
        self._gate_in_model_call = False
        """The ``default`` gate is decided by the model call (``GATE_IN_MODEL_CALL``)."""
        self._decided: tuple[list[tuple[str, str]], PolicyResult] | None = None
        """The last model call's gate decisions, with the actions they are for."""
        self._evidence: EvidenceJudge | None = None
        self._critic: Critic | None = None
        """Reviews final answers, for loops with ``config.critic``."""
        self._knowledge: KnowledgeBridge | None = None
        """The agent's knowledge, for loops with ``config.knowledge`` (set up by the worker)."""
        self._collection: EvidenceCollection | None = None
        self._calibration = 1.0
        self._runs = 1
        if loop.carry is not None and self._invalid is None:
            self._runs = loop.carry.runs + 1
            self._collection = loop.carry.evidence
            self._calibration = loop.carry.calibration
            try:
                continuation.restore(loop.carry, books, self._conversation, self._tools)
            except ValueError as error:
                self._invalid = str(error)

    # ---- queries and people ----------------------------------------------------------------

    @workflow.query(name="state")
    def state(self) -> LoopState:
        """Phase, iteration, usage, last stop reason, tool calls so far and status."""
        books, desk = self._books, self._books.desk
        evidence = self._evidence.collection if self._evidence is not None else None
        return LoopState(
            workflow_id=self._workflow_id,
            agent_id=self._config.agent_id,
            status=books.status,
            phase=books.phase,
            iteration=books.iteration,
            usage=books.usage,
            started_at=books.started_at,
            last_stop_reason=books.last_stop_reason,
            tool_call_count=books.tool_call_count,
            tool_calls=list(books.tool_calls),
            messages=len(self._conversation.messages),
            output=books.output,
            termination_reason=books.termination_reason,
            termination_message=books.termination_message,
            provider=self._provider,
            model=self._model,
            pending_approvals=list(desk.approvals.values()),
            pending_escalations=list(desk.escalations.values()),
            breakers={name: b.model_copy() for name, b in self._tools.breakers.items()},
            dead_letters=list(self._tools.dead_letters),
            evidence=evidence.model_copy() if evidence is not None else None,
            advertised=list(self._advertised),
            delegations=list(books.delegations),
            pending_review=desk.review_pending,
            reviews=list(books.reviews),
            knowledge_context=self._knowledge.context if self._knowledge is not None else None,
        )

    @workflow.query(name="journal")
    def journal(self) -> Journal:
        """The typed journal (bounded; ``dropped`` counts entries dropped to bound it)."""
        return self._books.journal

    @workflow.query(name="audit")
    def audit(self) -> AuditChain:
        """This run's audit chain (after the earlier runs' head): every governance record."""
        return self._books.audit.chain()

    @workflow.query(name="conversation")
    def conversation(self, window: ConversationRange | None = None) -> list[Message]:
        """Messages ``[start, end)`` of the durable conversation (all by default)."""
        window = window or ConversationRange()
        return self._conversation.messages[window.start : window.end]

    # ---- the loop --------------------------------------------------------------------------

    @workflow.run
    async def run(self, input: RawValue) -> LoopResult:
        books, config = self._books, self._config
        if self._invalid is not None:
            invalid = InvalidConfig(self._invalid)
            books.failed(invalid)
            raise invalid
        # Checked before the first command (a patch marker after the set-up's local activity
        # does not replay).
        self._gate_in_model_call = workflow.patched(GATE_IN_MODEL_CALL)
        books.started()
        try:
            await self._set_up()
            if self._input.carry is None:
                books.record(
                    Started(
                        **books.stamp(),
                        tools=list(config.tools),
                        provider=self._provider,
                        model=self._model,
                        policy=self._gate.policy,
                    )
                )
            legacy = not self._governed
            self._advertised = advertised_tools(config, self._tools.definitions, legacy=legacy)
            if self._tools.delegate is not None and DELEGATE_TOOL not in self._advertised:
                self._advertised.append(DELEGATE_TOOL)
            self._start_evidence()
            finished = await self._within(self._limits.timeout.total_seconds())
            if self._knowledge is not None and self._knowledge.config.auto_persist:
                await self._knowledge.remember(self._task(), finished.output)
        except TimeoutError:
            limit = self._limits.timeout.total_seconds()
            failure = BudgetExceeded(
                f"the loop ran out of time: timeout is {limit:g} s "
                f"(config.timeout), reached at iteration {books.iteration}",
                {"budget": "timeout", "limit": limit, "state": self.state()},
            )
            books.failed(failure)
            raise failure from None
        except (LoopFailure, InvalidConfig, asyncio.CancelledError) as error:
            books.failed(error)  # a cancellation by a user is journaled, then let through
            raise
        message = {
            "end_turn": "the model answered",
            "saturated": "evidence stopped telling the model anything new",
            "critic_rejected": f"the critic did not accept the answer: {finished.critique}",
        }[finished.reason]
        books.completed(finished.output, finished.reason, message)
        await workflow.wait_condition(workflow.all_handlers_finished)
        return LoopResult(
            output=finished.output,
            iterations=books.iteration,
            usage=books.usage,
            termination_reason=finished.reason,
            tool_call_count=books.tool_call_count,
            workflow_id=self._workflow_id,
            messages=len(self._conversation.messages),
            snapshot=finished.snapshot,
            critique=finished.critique,
            provider=self._provider,
            model=self._model,
        )

    async def _within(self, limit: float) -> Finished:
        """Run the cycle under the loop's hard timeout, counting working time only.

        The cycle runs as its own task and the loop waits for it with a workflow timer; at the
        deadline the cycle is cancelled (with whatever activity it awaits) and the loop fails
        with ``BudgetExceeded``, however the cycle reacts to its cancellation. While the loop
        waits for a person the clock stops: there is no timer then, only the wait's own.
        """
        desk = self._books.desk
        cycle = asyncio.create_task(self._cycle())
        try:
            while not cycle.done():
                if desk.waiting:
                    await workflow.wait_condition(lambda: cycle.done() or not desk.waiting)
                    continue
                remaining = limit - self._books.working_seconds()
                if remaining <= 0:
                    raise TimeoutError
                await workflow.wait_condition(
                    lambda: cycle.done() or desk.waiting,
                    timeout=remaining,
                    timeout_summary="loop timeout",
                )
        except (TimeoutError, asyncio.CancelledError):
            # The deadline, or the loop itself was cancelled: stop the cycle and wait for it.
            # (Any other BaseException is the worker evicting this workflow: touch nothing.)
            cycle.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await cycle
            raise
        return cycle.result()

    async def _cycle(self) -> Finished:
        """Observe → Reason → Gate → Act, until an answer passes the gate."""
        config, books, limits = self._config, self._books, self._limits
        if config.pre_hydration is not None and self._input.carry is None:
            await self._pre_hydrate()
        observing = Observing(books.iteration)
        while True:
            # Observe: the last turn joins the conversation; a long history starts afresh.
            self._conversation.append(observing.new_messages)
            books.set_phase("observing")
            if continuation.should_continue_as_new(books, config):
                await self._continue_as_new()
            # Reason: one model call, routed on its stop_reason.
            reasoning = observing.reason()
            if reasoning.iteration > limits.max_iterations:
                raise self._budget(
                    "max_iterations",
                    limits.max_iterations,
                    f"the loop reached max_iterations={limits.max_iterations} model calls "
                    "without a final answer",
                )
            books.iteration = reasoning.iteration
            routed = reasoning.route(await self._reason(reasoning))
            # Gate the answer: allowed ends the loop, denied goes back to the model.
            if isinstance(routed, AnswerPolicyCheck):
                outcome = routed.gate(await self._gate_turn(routed))
                if isinstance(outcome, Answered):
                    self._conversation.append([outcome.message])
                    if self._evidence is not None and self._evidence.saturated:
                        snapshot = self._evidence.tracker.snapshot()
                        return Finished(outcome.output, "saturated", snapshot)
                    if self._critic is None:
                        return Finished(outcome.output, "end_turn")
                    reviewed = await self._reviewed(outcome.output, outcome.iteration)
                    if isinstance(reviewed, Finished):
                        return reviewed
                    outcome = reviewed
                observing = outcome
                continue
            if books.iteration >= limits.max_iterations:
                raise self._budget(
                    "max_iterations",
                    limits.max_iterations,
                    f"the model asked for {len(routed.calls)} tool call(s) at iteration "
                    f"{books.iteration}, the last one max_iterations allows; they were not run "
                    "because no model call would be left to read their results",
                )
            # Gate the calls (evidence calls are judged first), then Act on what passed.
            if self._evidence is not None and self._evidence.track(routed):
                return self._saturated(routed)
            dispatching = routed.gate(await self._gate_turn(routed))
            observing = await self._act(dispatching)
            if self._evidence is not None:
                self._evidence.observe(dispatching, observing, routed)

    # ---- the steps -------------------------------------------------------------------------

    async def _reason(self, reasoning: Reasoning) -> InferenceResponse:
        config, books = self._config, self._books
        books.set_phase("reasoning")
        knowledge = None
        if self._knowledge is not None:
            knowledge = await self._knowledge.before_step(
                self._conversation.messages, reasoning.iteration
            )
        request = InferenceRequest(
            provider=self._provider,
            model=self._model,
            iteration=reasoning.iteration,
            conversation=self._conversation.unsent(self._workflow_id),
            tools=list(self._advertised),
            judged_tools=evidence_tools(self._tools.definitions, self._advertised),
            max_output_tokens=config.max_output_tokens,
            temperature=config.temperature,
            context_token_budget=config.context_token_budget,
            context_strategy=config.context_strategy,
            token_calibration=self._calibration,
            max_response_bytes=config.max_payload_bytes,
            knowledge=knowledge,
            stream=self._stream is not None,
            gate=self._gate_in_model_call,
            agent_id=config.agent_id,
        )
        response = await call_model(request, config.model_timeout, self._model_task_queue)
        self._decided = None
        if response.gate is not None:
            self._decided = (_signature_of_answer(response), response.gate)
        if self._governed:  # the loop's own call ids: providers may repeat theirs
            response = with_internal_ids(response, reasoning.iteration)
        self._conversation.mark_sent()
        if response.estimated_input_tokens > 0 and response.usage.input_tokens > 0:
            # Calibrate the byte-based estimate by what the provider counted (bounded).
            ratio = response.usage.input_tokens / response.estimated_input_tokens
            self._calibration = min(4.0, max(0.25, ratio))
        books.reasoned(response)
        limit = self._limits.max_total_tokens
        if books.usage.total_tokens > limit:
            raise self._budget(
                "max_total_tokens",
                limit,
                f"the loop used {books.usage.total_tokens} tokens, over max_total_tokens="
                f"{limit}, at iteration {books.iteration}",
            )
        return response

    async def _gate_turn(self, check: ToolPolicyCheck | AnswerPolicyCheck) -> PolicyResult:
        self._books.set_phase("policy_check")
        actions = check.actions()
        decided = None
        if self._decided is not None and self._decided[0] == _signature(actions):
            decided = self._decided[1]  # the model call decided exactly these actions
        self._decided = None
        return await self._gate.decide(actions, list(self._advertised), decided)

    async def _act(self, dispatching: ToolDispatching) -> Observing:
        self._books.set_phase("dispatching")
        runner = ToolRunner(self._tools, self._books.iteration)
        await runner.run_turn(dispatching, list(self._advertised))
        observed = dispatching.collect()
        results = observed.new_messages[-1].tool_results
        self._books.observed(results)
        if self._knowledge is not None:
            self._knowledge.observed([p.call for p in dispatching.planned], results)
        return observed

    async def _pre_hydrate(self) -> None:
        assert self._config.pre_hydration is not None
        self._books.set_phase("observing")
        message = await pre_hydrate(
            self._config.pre_hydration,
            self._conversation.messages,
            tools=self._tools,
            gate=self._gate,
            books=self._books,
            advertised=list(self._advertised) if self._governed else None,
        )
        if message is not None:
            self._conversation.append([message])

    async def _reviewed(self, output: str, iteration: int) -> Finished | Observing:
        """The critic's review of an answer: accepted, rejected for good, or feedback that
        sends the loop round again."""
        assert self._critic is not None
        record = await self._critic.review(self._task(), output)
        if record.verdict == "approve":
            return Finished(output, "end_turn")
        if record.verdict == "reject" or self._critic.rounds_left <= 0:
            return Finished(output, "critic_rejected", critique=record.feedback)
        feedback = Message(
            role="user",
            content=(
                f"[orga critic] Your answer was not accepted yet (review {record.round} of at "
                f"most {self._critic.config.max_rounds}). Revise it: {record.feedback}"
            ),
        )
        return Observing(iteration, [feedback])

    def _saturated(self, check: ToolPolicyCheck) -> Finished:
        assert self._evidence is not None
        closing, snapshot = self._evidence.end_saturated(check)
        self._conversation.append(closing)
        return Finished(snapshot.render(), "saturated", snapshot)

    # ---- helpers ---------------------------------------------------------------------------

    async def _set_up(self) -> None:
        """What the worker resolves for this loop: its agent, tools, gate, budgets and model."""
        if not workflow.patched(RESOLVE_LOOP):  # recorded before: tools only, as configured
            self._tools.definitions = await describe_tools(self._config)
            return
        self._governed = True
        setup = await resolve_loop(self._config)
        self._tools.definitions = {d.name: d for d in setup.tools}
        self._provider, self._model = setup.provider, setup.model
        self._model_task_queue = setup.model_task_queue
        self._books.provider = setup.provider
        self._gate.policy = setup.policy
        self._gate_in_model_call = self._gate_in_model_call and setup.policy == "default"
        self._limits = self._books.limits = setup.limits
        self._tools.max_concurrent = setup.limits.max_concurrent_tools
        if setup.delegates:
            delegations = Delegations(
                workflow_id=self._workflow_id,
                config=self._config,
                books=self._books,
                limits=lambda: self._limits,
                delegates=setup.delegates,
            )
            self._tools.delegate = delegations.run
            self._tools.plan_delegations = delegations.plan
        if self._config.critic is not None:
            self._critic = Critic(
                self._config.critic,
                self._books,
                self._gate,
                provider=setup.critic_provider,
                model=setup.critic_model,
                timeout=self._config.model_timeout,
                task_queue=setup.model_task_queue,
            )
        if self._config.knowledge is not None and setup.knowledge_namespace is not None:
            self._knowledge = KnowledgeBridge(
                self._config.knowledge, setup.knowledge_namespace, self._books
            )
            self._tools.knowledge_namespace = setup.knowledge_namespace
        agent = setup.agent
        if self._input.carry is None:
            # The operator's prompt (and whom the agent may delegate to) come before anything
            # the client sent.
            first = (
                [Message(role="system", content=agent.system_prompt)]
                if (agent is not None and agent.system_prompt)
                else []
            )
            if setup.delegates:
                first.append(introduction(setup.delegates))
            if first:
                self._conversation.reset([*first, *self._conversation.messages])

    def _start_evidence(self) -> None:
        """Track evidence when the loop advertises an evidence tool (or carried a record)."""
        collection = self._collection
        if collection is None and evidence_tools(self._tools.definitions, self._advertised):
            collection = EvidenceCollection(max_no_gain=self._config.max_no_gain)
        if collection is not None:
            self._evidence = EvidenceJudge(
                collection, self._tools.definitions, self._advertised, self._books
            )

    async def _continue_as_new(self) -> None:
        collection = self._evidence.collection if self._evidence is not None else None
        carry = continuation.carried(
            self._runs, self._books, self._conversation, self._tools, collection, self._calibration
        )
        # The next run keeps this run's gate, budgets, provider and model, whatever its
        # worker's defaults (its setup is resolved again, and can only narrow them).
        pinned = self._config.model_copy(
            update={
                "provider": self._provider,
                "model": self._model,
                "policy": self._gate.policy,
                **self._limits.model_dump(),
            }
        )
        if self._stream is not None:  # release long-polling readers: they follow the next run
            self._stream.detach_pollers()
        await continuation.continue_as_new(pinned, self._conversation, carry)

    def _task(self) -> str:
        """What the loop was asked: its first user message."""
        first = next((m for m in self._conversation.messages if m.role == "user"), None)
        return first.content if first is not None else ""

    def _budget(self, budget: str, limit: int, message: str) -> BudgetExceeded:
        return BudgetExceeded(message, {"budget": budget, "limit": limit, "state": self.state()})


def _signature(actions: list[PolicyAction]) -> list[tuple[str, str]]:
    """What a gate decision is about: each action's kind or tool, and its arguments."""
    return [(a.tool or a.kind, a.arguments if a.kind == "call_tool" else "") for a in actions]


def _signature_of_answer(response: InferenceResponse) -> list[tuple[str, str]]:
    if response.tool_calls:
        return [(c.name, c.arguments) for c in response.tool_calls]
    return [("respond", "")]

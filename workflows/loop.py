"""The ``ReasoningLoop`` workflow: Observe → Reason → Gate → Act until the model answers.

Deterministic orchestration only. Model calls, policy checks and tools are activities; the
conversation, usage, journal and budgets live here, in workflow state. The loop routes on the
model's structured ``stop_reason`` and nothing else (``orga.routing``), moves through the
typestate phases of ``orga.phases``, and ends in one of three ways, each journaled as
``Terminated`` first: an answer that passed the gate (the result), a ``LoopFailure``
(``UnhandledStopReason``, ``BudgetExceeded``, ``ModelCallFailed``), or cancellation.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from temporalio import workflow
from temporalio.common import SearchAttributeUpdate
from temporalio.exceptions import ActivityError, ApplicationError, FailureError

with workflow.unsafe.imports_passed_through():
    from orga import search_attributes as sa
    from orga.approvals import (
        ApprovalDecision,
        ApprovalRecord,
    )
    from orga.carry import LoopCarry
    from orga.config import LoopConfig, LoopInput
    from orga.conversation import Message, ToolCall, ToolResult, chain_digest
    from orga.dispatch import DESCRIBE_TOOLS, DescribeToolsRequest
    from orga.errors import (
        BudgetExceeded,
        InvalidConfig,
        LoopFailure,
        ModelCallFailed,
    )
    from orga.evidence import EvidenceTracker, ProgressSnapshot
    from orga.inference import (
        CALL_MODEL,
        ConversationRange,
        ConversationSlice,
        InferenceRequest,
        InferenceResponse,
        Usage,
    )
    from orga.journal import (
        ApprovalDecided,
        CallOutcome,
        DecisionRecord,
        EvidenceJudged,
        EvidenceSaturated,
        Journal,
        JournalEntry,
        ObservationsCollected,
        PolicyEvaluated,
        PreHydrationComplete,
        ReasoningComplete,
        Stamp,
        Started,
        Terminated,
        ToolsDispatched,
    )
    from orga.phases import (
        Answered,
        AnswerPolicyCheck,
        Observing,
        PlannedCall,
        Reasoning,
        ToolDispatching,
        ToolPolicyCheck,
    )
    from orga.policy import (
        EVALUATE_POLICY,
        PolicyAction,
        PolicyDecision,
        PolicyRequest,
        PolicyResult,
    )
    from orga.prehydration import PreHydrationConfig, Reference, extract, render
    from orga.state import LoopResult, LoopState, LoopStatus, Phase, ToolCallRecord
    from orga.text import estimate_tokens
    from orga.tools import ToolDefinition

    # Stateless helpers of this workflow: imported once, not re-executed for every run.
    from workflows.common import upsert, validated
    from workflows.dispatcher import PendingWait, ToolRunner
    from workflows.executor import CallExecutor
    from workflows.human import EscalationHandlers, HumanDesk
    from workflows.options import (
        DESCRIBE_TOOLS_TIMEOUT,
        MODEL_HEARTBEAT_TIMEOUT,
        MODEL_RETRY,
        POLICY_RETRY,
        POLICY_TIMEOUT,
        SHORT_RETRY,
    )
    from workflows.toolstate import ToolState

__all__ = ["ReasoningLoopWorkflow"]

_RECENT_CALLS = 100


@dataclass(frozen=True)
class Finished:
    """How the cycle ended, when it ended normally."""

    output: str
    reason: Literal["end_turn", "saturated"]
    snapshot: ProgressSnapshot | None = None


@workflow.defn(name="ReasoningLoop")
class ReasoningLoopWorkflow(EscalationHandlers):
    """One agent loop. Start it with a ``LoopInput``; it returns a ``LoopResult``."""

    @workflow.init
    def __init__(self, input: LoopInput | dict[str, Any]) -> None:
        checked, self._invalid = validated(LoopInput, input, "loop")
        input = checked or LoopInput(messages=[Message(role="user", content="")])
        self._input = input
        self._config: LoopConfig = input.config
        info = workflow.info()
        self._workflow_id = info.workflow_id
        self._started_at = workflow.now()
        initial: list[Message] = []
        if self._config.system_prompt and input.carry is None:
            initial.append(Message(role="system", content=self._config.system_prompt))
        initial.extend(input.messages)
        self._conversation: list[Message] = []
        self._digest = ""
        self._sent = 0
        self._append(initial)
        self._usage = Usage()
        self._iteration = 0
        self._phase: Phase = "starting"
        self._status: LoopStatus = "running"
        self._journal = Journal(limit=self._config.journal_limit)
        self._tool_calls: list[ToolCallRecord] = []
        self._tool_call_count = 0
        self._last_stop_reason: str | None = None
        self._output: str | None = None
        self._termination_reason: str | None = None
        self._desk = HumanDesk(on_change=self._on_waiting_change)
        self._tools = ToolState(
            workflow_id=self._workflow_id,
            definitions={},
            breaker_config=self._config.circuit_breaker,
            recovery=self._config.recovery,
            desk=self._desk,
            max_concurrent=self._config.max_concurrent_tools,
            default_timeout=self._config.tool_timeout,
            approval_timeout=self._config.approval_timeout,
            max_payload_bytes=self._config.max_payload_bytes,
            record=self._record,
            stamp=self._stamp,
            gate=self._gate_extra_call,
        )
        self._advertised: list[str] = []
        self._evidence: EvidenceTracker | None = None
        self._calibration = 1.0
        self._runs = 1
        if input.carry is not None:
            self._restore(input.carry)
        self._human_wait = timedelta(0)
        """Time spent waiting for people, which the loop's timeout does not count."""
        self._human_wait_since: datetime | None = None

    # ---- queries -------------------------------------------------------------------------

    @workflow.query(name="state")
    def state(self) -> LoopState:
        """Phase, iteration, usage, last stop reason, tool calls so far and status."""
        return LoopState(
            workflow_id=self._workflow_id,
            agent_id=self._config.agent_id,
            status=self._status,
            phase=self._phase,
            iteration=self._iteration,
            usage=self._usage,
            started_at=self._started_at,
            last_stop_reason=self._last_stop_reason,
            tool_call_count=self._tool_call_count,
            tool_calls=list(self._tool_calls),
            messages=len(self._conversation),
            output=self._output,
            termination_reason=self._termination_reason,
            pending_approvals=list(self._desk.approvals.values()),
            pending_escalations=list(self._desk.escalations.values()),
            breakers={name: b.model_copy() for name, b in self._tools.breakers.items()},
            dead_letters=list(self._tools.dead_letters),
            evidence=self._evidence.model_copy() if self._evidence is not None else None,
            advertised=list(self._advertised),
        )

    @workflow.query(name="journal")
    def journal(self) -> Journal:
        """The typed journal (bounded; ``dropped`` counts entries dropped to bound it)."""
        return self._journal

    @workflow.query(name="conversation")
    def conversation(self, window: ConversationRange | None = None) -> list[Message]:
        """Messages ``[start, end)`` of the durable conversation (all by default)."""
        window = window or ConversationRange()
        return self._conversation[window.start : window.end]

    # ---- people --------------------------------------------------------------------------

    @workflow.signal(name="approval")
    def approval(self, decision: ApprovalDecision) -> None:
        """Approve or deny a pending call (``{"call_id", "approved", "reason"?, "approver"?}``)."""
        try:
            self._desk.decide(decision, "signal")
        except ValueError as error:
            workflow.logger.warning("approval signal ignored: %s", error)

    @workflow.update(name="approve")
    def approve(self, decision: ApprovalDecision) -> ApprovalRecord:
        """Approve or deny a pending call; returns the decision as recorded."""
        return self._desk.decide(decision, "update")

    @approve.validator
    def _check_approve(self, decision: ApprovalDecision) -> None:
        self._desk.check_approval(decision)

    def _on_waiting_change(self) -> None:
        waiting = self._desk.waiting
        now = workflow.now()
        if waiting and self._human_wait_since is None:
            self._human_wait_since = now
        elif not waiting and self._human_wait_since is not None:
            self._human_wait += now - self._human_wait_since
            self._human_wait_since = None
        status: LoopStatus = "awaiting_approval" if waiting else "running"
        if status != self._status:
            self._status = status
            self._upsert([sa.STATUS.value_set(status)])
        self._set_phase(self._phase)

    def _working_seconds(self) -> float:
        """Seconds the loop has run, not counting time spent waiting for people."""
        waited = self._human_wait
        if self._human_wait_since is not None:
            waited += workflow.now() - self._human_wait_since
        return (workflow.now() - self._started_at - waited).total_seconds()

    # ---- the loop ------------------------------------------------------------------------

    @workflow.run
    async def run(self, input: LoopInput | dict[str, Any]) -> LoopResult:
        if self._invalid is not None:
            invalid = InvalidConfig(self._invalid)
            self._finish_failed(invalid)
            raise invalid
        self._upsert(
            [
                sa.AGENT_ID.value_set(self._config.agent_id),
                sa.STATUS.value_set("running"),
                sa.ITERATION.value_set(0),
                sa.TOTAL_TOKENS.value_set(0),
            ]
        )
        if self._input.carry is None:
            self._record(
                Started(
                    **self._stamp(),
                    tools=list(self._config.tools),
                    provider=self._config.provider,
                    model=self._config.model,
                    policy=self._config.policy,
                )
            )
        limit = self._config.timeout.total_seconds()
        try:
            self._tools.definitions = await self._describe_tools()
            self._advertised = self._advertise()
            if self._evidence is None and any(self._is_evidence(n) for n in self._advertised):
                self._evidence = EvidenceTracker(max_no_gain=self._config.max_no_gain)
            finished = await self._within(limit)
        except TimeoutError:
            failure = BudgetExceeded(
                f"the loop ran out of time: timeout is {limit:g} s "
                f"(config.timeout), reached at iteration {self._iteration}",
                {"budget": "timeout", "limit": limit, "state": self.state()},
            )
            self._finish_failed(failure)
            raise failure from None
        except (LoopFailure, InvalidConfig) as error:
            self._finish_failed(error)
            raise
        except asyncio.CancelledError as error:
            # Cancelled by a user: journal the exit, then let the cancellation through.
            self._finish_failed(error)
            raise
        self._output = finished.output
        self._termination_reason = finished.reason
        self._set_phase("completed")
        self._status = "completed"
        message = (
            "the model answered"
            if finished.reason == "end_turn"
            else "evidence stopped telling the model anything new"
        )
        self._record(Terminated(**self._stamp(), reason=finished.reason, message=message))
        self._upsert([sa.STATUS.value_set("completed")])
        await workflow.wait_condition(workflow.all_handlers_finished)
        return LoopResult(
            output=finished.output,
            iterations=self._iteration,
            usage=self._usage,
            termination_reason=finished.reason,
            tool_call_count=self._tool_call_count,
            workflow_id=self._workflow_id,
            messages=len(self._conversation),
            snapshot=finished.snapshot,
        )

    async def _within(self, limit: float) -> Finished:
        """Run the cycle under the loop's hard timeout.

        The cycle runs as its own task and the loop waits for it with a workflow timer; at the
        deadline the cycle is cancelled (with whatever activity it awaits) and the loop fails
        with ``BudgetExceeded``, however the cycle reacts to its cancellation. While the loop
        waits for a person the clock stops: there is no timer then, only the wait's own.
        """
        cycle = asyncio.create_task(self._cycle())
        try:
            while not cycle.done():
                if self._desk.waiting:
                    await workflow.wait_condition(lambda: cycle.done() or not self._desk.waiting)
                    continue
                remaining = limit - self._working_seconds()
                if remaining <= 0:
                    raise TimeoutError
                await workflow.wait_condition(
                    lambda: cycle.done() or self._desk.waiting, timeout=remaining
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
        if self._config.pre_hydration is not None and self._input.carry is None:
            await self._pre_hydrate(self._config.pre_hydration)
        observing = Observing(self._iteration)
        while True:
            self._append(observing.new_messages)
            self._set_phase("observing")
            if self._should_continue_as_new():
                await self._continue_as_new()
            reasoning = observing.reason()
            if reasoning.iteration > self._config.max_iterations:
                raise self._budget(
                    "max_iterations",
                    self._config.max_iterations,
                    f"the loop reached max_iterations={self._config.max_iterations} model calls "
                    "without a final answer",
                )
            self._iteration = reasoning.iteration
            response = await self._reason(reasoning)
            routed = reasoning.route(response)
            if isinstance(routed, AnswerPolicyCheck):
                outcome = routed.gate(await self._gate(routed))
                if isinstance(outcome, Answered):
                    self._append([outcome.message])
                    if self._evidence is not None and self._evidence.saturated:
                        return Finished(outcome.output, "saturated", self._evidence.snapshot())
                    return Finished(outcome.output, "end_turn")
                observing = outcome
                continue
            if self._iteration >= self._config.max_iterations:
                raise self._budget(
                    "max_iterations",
                    self._config.max_iterations,
                    f"the model asked for {len(routed.calls)} tool call(s) at iteration "
                    f"{self._iteration}, the last one max_iterations allows; they were not run "
                    "because no model call would be left to read their results",
                )
            if self._evidence is not None and self._track(routed):
                return self._saturated(routed)
            dispatching = routed.gate(await self._gate(routed))
            await self._act(dispatching)
            observing = dispatching.collect()
            if self._evidence is not None:
                self._observe_evidence(dispatching, observing, routed)

    # ---- pre-hydration -------------------------------------------------------------------

    async def _pre_hydrate(self, config: PreHydrationConfig) -> None:
        """Resolve the task's references through the gate, in parallel; inject the results."""
        self._set_phase("observing")
        text = "\n".join(m.content for m in self._conversation if m.role == "user")
        references = extract(text, config)
        planned: list[tuple[Reference, ToolCall]] = []
        for reference in references:
            resolver = config.resolvers.get(reference.ref_type)
            if resolver is None or resolver.tool not in self._tools.definitions:
                continue
            arguments = json.dumps({resolver.argument: reference.value}, ensure_ascii=False)
            planned.append(
                (
                    reference,
                    ToolCall(
                        id=f"prehydrate-{reference.id}", name=resolver.tool, arguments=arguments
                    ),
                )
            )
        resolved: list[tuple[Reference, str]] = []
        if planned:
            actions = [
                PolicyAction(kind="call_tool", call_id=c.id, tool=c.name, arguments=c.arguments)
                for _, c in planned
            ]
            verdict = await self._ask_gate(actions, sorted({c.name for _, c in planned}))
            executor = CallExecutor(self._tools, self._iteration)

            async def resolve(call: ToolCall, decision: PolicyDecision) -> ToolResult | None:
                if not decision.permits:
                    return None  # denied, or needs a person: not worth waiting for here
                if decision.decision == "modify" and decision.arguments is not None:
                    call = call.model_copy(update={"arguments": decision.arguments})
                result = await executor.run(call)
                return result if result.status in ("ok", "recovered") else None

            results = await asyncio.gather(
                *(resolve(c, d) for (_, c), d in zip(planned, verdict.decisions, strict=False))
            )
            resolved = [
                (reference, result.content)
                for (reference, _), result in zip(planned, results, strict=True)
                if result is not None
            ]
        tokens = 0
        if resolved:
            content = render(resolved, config.max_context_tokens)
            tokens = estimate_tokens(content)
            self._append([Message(role="system", content=content)])
        self._record(
            PreHydrationComplete(
                **self._stamp(),
                found=len(references),
                resolved=len(resolved),
                failed=len(references) - len(resolved),
                tokens=tokens,
            )
        )

    # ---- evidence ------------------------------------------------------------------------

    def _is_evidence(self, name: str) -> bool:
        definition = self._tools.definitions.get(name)
        return definition is not None and definition.evidence and name in self._advertised

    def _track(self, check: ToolPolicyCheck) -> bool:
        """Judge the turn's evidence calls before the gate; True ends the loop (saturated)."""
        tracker = self._evidence
        assert tracker is not None
        for call in check.calls:
            if not self._is_evidence(call.name):
                continue
            was_saturated = tracker.saturated
            verdict = tracker.admit(call)
            if verdict.end_loop:
                return True
            outcome = verdict.judgement or (verdict.refusal or "").split(":")[0] or "FIRST"
            self._record(
                EvidenceJudged(
                    **self._stamp(),
                    call_id=call.id,
                    tool=call.name,
                    judgement=outcome,
                    consecutive_no_gain=tracker.consecutive_no_gain,
                    state=tracker.state,
                )
            )
            if tracker.saturated and not was_saturated:
                self._record(
                    EvidenceSaturated(**self._stamp(), reason=tracker.stop_reason or "saturated")
                )
            if verdict.refusal is not None:
                check.refuse(
                    call.id,
                    ToolResult(
                        call_id=call.id,
                        name=call.name,
                        content=verdict.refusal,
                        is_error=True,
                        status="refused",
                    ),
                )
            else:
                check.run_with(call.id, verdict.arguments)
        return False

    def _observe_evidence(
        self, dispatching: ToolDispatching, observed: Observing, check: ToolPolicyCheck
    ) -> None:
        """Tell the tracker about the evidence calls that ran this turn."""
        tracker = self._evidence
        assert tracker is not None
        results = {r.call_id: r for r in observed.new_messages[-1].tool_results}
        for planned in dispatching.planned:
            call = planned.execute
            if self._is_evidence(call.name) and call.id not in check.refused:
                tracker.completed_call(call, call.arguments, results[call.id])

    def _saturated(self, check: ToolPolicyCheck) -> Finished:
        """The model kept calling evidence tools after STOP_REQUIRED: end, normally."""
        tracker = self._evidence
        assert tracker is not None
        snapshot = tracker.snapshot()
        results = [
            ToolResult(
                call_id=c.id,
                name=c.name,
                content="Not run: the loop ended because evidence collection is saturated.",
                is_error=True,
                status="not_run",
            )
            for c in check.calls
        ]
        self._append([check.response.as_message(), Message(role="tool", tool_results=results)])
        return Finished(snapshot.render(), "saturated", snapshot)

    # ---- reason --------------------------------------------------------------------------

    async def _reason(self, reasoning: Reasoning) -> InferenceResponse:
        self._set_phase("reasoning")
        config = self._config
        window = ConversationSlice(
            workflow_id=self._workflow_id,
            start=self._sent,
            length=len(self._conversation),
            digest=self._digest,
            messages=self._conversation[self._sent :],
        )
        request = InferenceRequest(
            provider=config.provider,
            model=config.model,
            iteration=reasoning.iteration,
            conversation=window,
            tools=list(self._advertised),
            judged_tools=[n for n in self._advertised if self._is_evidence(n)],
            max_output_tokens=config.max_output_tokens,
            temperature=config.temperature,
            context_token_budget=config.context_token_budget,
            context_strategy=config.context_strategy,
            token_calibration=self._calibration,
            max_response_bytes=config.max_payload_bytes,
        )
        model = config.model or f"{config.provider or 'default provider'}'s default model"
        try:
            response = await workflow.execute_activity(
                CALL_MODEL,
                request,
                result_type=InferenceResponse,
                start_to_close_timeout=config.model_timeout,
                heartbeat_timeout=MODEL_HEARTBEAT_TIMEOUT,
                retry_policy=MODEL_RETRY,
                summary=f"model {model} · iteration {reasoning.iteration}",
            )
        except ActivityError as error:
            cause = error.cause
            kind = cause.type if isinstance(cause, ApplicationError) else type(cause).__name__
            message = cause.message if isinstance(cause, ApplicationError) else str(error)
            raise ModelCallFailed(
                f"the model call at iteration {reasoning.iteration} failed for good "
                f"({kind}): {message}",
                {"iteration": reasoning.iteration, "error_type": kind, "error": message},
            ) from error
        self._sent = len(self._conversation)
        self._usage = self._usage + response.usage
        if response.estimated_input_tokens > 0 and response.usage.input_tokens > 0:
            # Calibrate the byte-based estimate by what the provider counted (bounded).
            ratio = response.usage.input_tokens / response.estimated_input_tokens
            self._calibration = min(4.0, max(0.25, ratio))
        self._last_stop_reason = response.stop_reason
        self._record(
            ReasoningComplete(
                **self._stamp(),
                stop_reason=response.stop_reason,
                raw_stop_reason=response.raw_stop_reason,
                model=response.model,
                tool_calls=[c.name for c in response.tool_calls],
                usage=response.usage,
                blob_ref=response.blob_ref,
            )
        )
        self._upsert(
            [
                sa.ITERATION.value_set(self._iteration),
                sa.TOTAL_TOKENS.value_set(self._usage.total_tokens),
            ]
        )
        if self._usage.total_tokens > config.max_total_tokens:
            raise self._budget(
                "max_total_tokens",
                config.max_total_tokens,
                f"the loop used {self._usage.total_tokens} tokens, over max_total_tokens="
                f"{config.max_total_tokens}, at iteration {self._iteration}",
            )
        return response

    # ---- gate ----------------------------------------------------------------------------

    async def _gate(self, check: ToolPolicyCheck | AnswerPolicyCheck) -> PolicyResult:
        self._set_phase("policy_check")
        return await self._ask_gate(check.actions(), list(self._advertised))

    async def _gate_extra_call(self, call: ToolCall) -> PolicyDecision:
        """Gate one call the loop itself makes (a fallback), advertised by the loop's config."""
        action = PolicyAction(
            kind="call_tool", call_id=call.id, tool=call.name, arguments=call.arguments
        )
        result = await self._ask_gate([action], [call.name])
        return result.decisions[0]

    async def _ask_gate(self, actions: list[PolicyAction], advertised: list[str]) -> PolicyResult:
        if not actions:  # every call was answered before the gate (the evidence tracker)
            return PolicyResult(engine=self._config.policy, decisions=[])
        request = PolicyRequest(
            mode=self._config.policy,
            agent_id=self._config.agent_id,
            workflow_id=self._workflow_id,
            iteration=self._iteration,
            usage=self._usage,
            advertised=advertised,
            actions=actions,
        )
        try:
            result = await workflow.execute_local_activity(
                EVALUATE_POLICY,
                request,
                result_type=PolicyResult,
                start_to_close_timeout=POLICY_TIMEOUT,
                retry_policy=POLICY_RETRY,
                summary=f"policy {self._config.policy} · {len(actions)} action(s)",
            )
        except FailureError as error:
            # A local activity's failure arrives as the error itself, not wrapped in an
            # ActivityError; a timeout as a TimeoutError. Either way: deny (fail closed).
            cause = error.cause if isinstance(error, ActivityError) else error
            reason = f"the policy check failed ({cause or error}); denied (fail closed)"
            result = PolicyResult(
                engine=self._config.policy,
                decisions=[PolicyDecision(decision="deny", reason=reason) for _ in actions],
            )
        self._record(
            PolicyEvaluated(
                **self._stamp(),
                engine=result.engine,
                policy_hash=result.policy_hash,
                decisions=[
                    DecisionRecord(
                        action=action.kind,
                        call_id=action.call_id,
                        tool=action.tool,
                        decision=decision.decision,
                        reason=decision.reason,
                        policy_ids=list(decision.policy_ids),
                    )
                    for action, decision in zip(actions, result.decisions, strict=False)
                ],
            )
        )
        return result

    # ---- act -----------------------------------------------------------------------------

    async def _act(self, dispatching: ToolDispatching) -> None:
        self._set_phase("dispatching")
        runner = ToolRunner(
            self._tools, iteration=self._iteration, on_approval=self._approval_recorded
        )
        runnable: list[PlannedCall] = []
        waiting = set(dispatching.missing())  # the evidence tracker may have answered some
        for planned in dispatching.planned:
            if planned.call.id not in waiting:
                continue
            refused = runner.refuse(planned, list(self._advertised))
            if refused is None:
                runnable.append(planned)
            else:
                dispatching.record(refused)
        self._record(
            ToolsDispatched(
                **self._stamp(),
                call_ids=[p.call.id for p in runnable],
                tools=[p.call.name for p in runnable],
            )
        )
        await runner.run(dispatching, runnable)
        observed = dispatching.collect()
        results = observed.new_messages[-1].tool_results
        self._record(
            ObservationsCollected(
                **self._stamp(),
                outcomes=[
                    CallOutcome(
                        call_id=r.call_id,
                        tool=r.name,
                        is_error=r.is_error,
                        status=r.status,
                        blob_ref=r.blob_ref,
                    )
                    for r in results
                ],
            )
        )
        for result in results:
            self._tool_call_count += 1
            self._tool_calls.append(
                ToolCallRecord(
                    iteration=self._iteration,
                    call_id=result.call_id,
                    tool=result.name,
                    status=result.status,
                    is_error=result.is_error,
                )
            )
        del self._tool_calls[:-_RECENT_CALLS]

    def _approval_recorded(self, record: ApprovalRecord, wait: PendingWait) -> None:
        self._record(
            ApprovalDecided(
                **self._stamp(),
                call_id=record.call_id,
                tool=record.tool,
                approved=record.approved,
                approver=record.approver,
                reason=record.reason,
                source=record.source,
                waited_seconds=(record.at - wait.asked).total_seconds(),
            )
        )

    def _tool_list(self) -> list[str]:
        """The loop's complete tool list: its tools, then the tools pre-hydration uses."""
        names = list(self._config.tools)
        if self._config.pre_hydration is not None:
            for resolver in self._config.pre_hydration.resolvers.values():
                if resolver.tool not in names:
                    names.append(resolver.tool)
        return names

    def _advertise(self) -> list[str]:
        """The tools the model sees: the complete tool list, filtered by the tool profile."""
        listed = [self._tools.definitions[n] for n in self._tool_list()]
        return [d.name for d in self._config.tool_profile.apply(listed)]

    async def _describe_tools(self) -> dict[str, ToolDefinition]:
        """Definitions of the loop's tools and of the fallback tools recovery may use."""
        names = self._tool_list()
        names += [n for n in self._config.recovery.fallback_tools() if n not in names]
        if not names:
            return {}
        try:
            # A local activity: a registry lookup on the worker, recorded as one marker.
            found = await workflow.execute_local_activity(
                DESCRIBE_TOOLS,
                DescribeToolsRequest(names=names),
                result_type=list[ToolDefinition],
                start_to_close_timeout=DESCRIBE_TOOLS_TIMEOUT,
                retry_policy=SHORT_RETRY,
                summary=f"describe {len(names)} tool(s)",
            )
        except FailureError as error:  # a local activity: the error itself, or a timeout
            cause = error.cause if isinstance(error, ActivityError) else error
            message = cause.message if isinstance(cause, FailureError) else str(error)
            raise InvalidConfig(f"the loop's tools could not be resolved: {message}") from error
        return {definition.name: definition for definition in found}

    # ---- continue-as-new -----------------------------------------------------------------

    def _should_continue_as_new(self) -> bool:
        """At an iteration boundary (nothing is pending mid-batch): is the history long?"""
        if self._desk.waiting:
            return False
        info = workflow.info()
        return (
            info.is_continue_as_new_suggested()
            or info.get_current_history_length() >= self._config.max_history_events
        )

    async def _continue_as_new(self) -> None:
        await workflow.wait_condition(workflow.all_handlers_finished)
        carry = LoopCarry(
            runs=self._runs,
            digest=self._digest,
            sent=self._sent,
            usage=self._usage,
            iteration=self._iteration,
            started_at=self._started_at,
            human_wait=self._human_wait,
            last_stop_reason=self._last_stop_reason,
            journal=self._journal,
            tool_calls=self._tool_calls,
            tool_call_count=self._tool_call_count,
            tools=self._tools.snapshot(),
            evidence=self._evidence,
        )
        workflow.logger.info(
            "continuing as new at iteration %d (%d events)",
            self._iteration,
            workflow.info().get_current_history_length(),
        )
        workflow.continue_as_new(
            LoopInput(messages=self._conversation, config=self._config, carry=carry)
        )

    def _restore(self, carry: LoopCarry) -> None:
        """Pick up where the previous run stopped (its conversation is ``input.messages``)."""
        if carry.digest != self._digest:
            self._invalid = (
                "the conversation carried into this run does not match its digest; "
                "refusing to continue with a different conversation"
            )
        self._runs = carry.runs + 1
        self._sent = carry.sent
        self._usage = carry.usage
        self._iteration = carry.iteration
        self._started_at = carry.started_at
        self._human_wait = carry.human_wait
        self._last_stop_reason = carry.last_stop_reason
        self._journal = carry.journal
        self._tool_calls = list(carry.tool_calls)
        self._tool_call_count = carry.tool_call_count
        self._tools.restore(carry.tools)
        self._evidence = carry.evidence

    # ---- bookkeeping ---------------------------------------------------------------------

    def _append(self, messages: list[Message]) -> None:
        if messages:
            self._conversation.extend(messages)
            self._digest = chain_digest(self._digest, messages)

    def _set_phase(self, phase: Phase) -> None:
        self._phase = phase
        pending = [f"approval of {p.tool} ({p.call_id})" for p in self._desk.approvals.values()] + [
            f"operator for {e.tool} ({e.escalation_id})" for e in self._desk.escalations.values()
        ]
        waiting = f" · waiting for {', '.join(pending)}" if pending else ""
        workflow.set_current_details(
            f"**{phase}** · iteration {self._iteration}/{self._config.max_iterations} · "
            f"{self._usage.total_tokens}/{self._config.max_total_tokens} tokens · "
            f"{self._tool_call_count} tool call(s){waiting}"
        )

    def _stamp(self) -> Stamp:
        """The fields every journal event carries: taken at the moment of the event."""
        return Stamp(
            seq=self._journal.take_seq(),
            at=workflow.now(),
            agent_id=self._config.agent_id,
            iteration=self._iteration,
        )

    def _upsert(self, updates: Sequence[SearchAttributeUpdate[Any]]) -> None:
        upsert(updates)

    def _record(self, entry: JournalEntry) -> None:
        self._journal.append(entry)

    def _budget(self, budget: str, limit: int, message: str) -> BudgetExceeded:
        return BudgetExceeded(message, {"budget": budget, "limit": limit, "state": self.state()})

    def _finish_failed(self, error: BaseException) -> None:
        kind = error.type if isinstance(error, ApplicationError) else type(error).__name__
        self._termination_reason = kind
        self._status = "failed"
        self._set_phase("failed")
        message = error.message if isinstance(error, ApplicationError) else str(error)
        self._record(Terminated(**self._stamp(), reason=kind or "failed", message=message))
        self._upsert([sa.STATUS.value_set("failed")])

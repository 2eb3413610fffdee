"""One tool call, from the circuit breaker to the recovery strategy: always one result.

Workflow code. ``CallExecutor.run`` asks the tool's breaker, runs the tool activity with the
retry policy its strategy calls for, records the outcome on the breaker, and when the call
failed (raised or timed out) applies the tool's recovery strategy: ``retry`` (Temporal already
retried), ``fallback``, ``cached_result``, ``llm_recovery``, ``escalate`` or ``dead_letter``.
Each use is journaled as ``RecoveryTriggered``. Only ``escalate`` → ``abort`` raises.
"""

from __future__ import annotations

import json

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.workflow import ActivityCancellationType

from orga.contracts.approvals import PendingEscalation
from orga.contracts.conversation import ToolCall, ToolResult, ToolStatus
from orga.contracts.errors import Aborted
from orga.contracts.journal import RecoveryTriggered
from orga.contracts.resilience import (
    CachedResult,
    DeadLetter,
    DeadLetterEntry,
    Escalate,
    Fallback,
    RecoveryStrategy,
    Retry,
)
from orga.contracts.tools import ToolInvocation
from orga.core import breaker as breakers
from orga.core.receipts import receipt_fields
from orga.workflows.reasoning.tool_state import ToolState, cache_key
from orga.workflows.shared.metrics import count
from orga.workflows.shared.options import TOOL_RETRY, non_retryable, tool_heartbeat_timeout
from orga.workflows.shared.patches import CALL_RECEIPTS, STOP_MEANS_STOP, taken
from orga.workflows.shared.pause_wait import wait_out_pause
from orga.workflows.shared.tool_calls import WorkerWait, run_tool

__all__ = ["CallExecutor", "error_result"]

_FAILURES: frozenset[ToolStatus] = frozenset({"failed", "timed_out"})
"""Statuses that count against a tool's breaker and trigger its recovery strategy."""


def error_result(call: ToolCall, status: ToolStatus, content: str) -> ToolResult:
    """The ``is_error`` result of a call that did not succeed."""
    return ToolResult(
        call_id=call.id, name=call.name, content=content, is_error=True, status=status
    )


def _said_rerun(result: ToolResult) -> ToolResult:
    """The result of a call a person ran again after its attempt was lost: the model reads
    that it was (never a silent retry: the effect may have happened twice)."""
    note = (
        "[an earlier attempt of this call was lost after it began; a person chose to run it "
        "again, so its effect may have happened twice]"
    )
    return result.model_copy(update={"content": f"{note}\n{result.content}"})


def _recovered(call: ToolCall, content: str) -> ToolResult:
    return ToolResult(call_id=call.id, name=call.name, content=content, status="recovered")


class CallExecutor:
    """Runs calls for one turn of one loop."""

    def __init__(self, state: ToolState, iteration: int) -> None:
        self._state = state
        self._iteration = iteration

    async def run(self, call: ToolCall) -> ToolResult:
        """The call's one result (raises ``Aborted`` only when an operator aborts)."""
        strategy = self._state.recovery.for_tool(call.name)
        escalations = 0
        paused = False
        rerun = False  # a person chose to run again a call whose attempt was lost
        while True:
            lifted = self._state.pauses_lifted
            asked = lifted() if lifted is not None else 0
            result = await self._guarded(call, strategy)
            if self._state.stopping.stops():  # as it ended: no recovery, nobody waited for
                return result
            if result.status == "paused":  # not run: wait for the pause to end, then again
                first, paused = not paused, True
                if self._state.paused is not None:  # journaled CallPaused when it begins
                    self._state.paused(call.id, call.name, result.content)
                await wait_out_pause(
                    lifted,
                    self._state.pause_recheck,
                    first=first,
                    summary=f"tool {call.name} paused · {call.id}",
                    asked=asked,
                )
                continue
            if paused and self._state.paused is not None:  # journaled CallResumed
                self._state.paused(call.id, call.name, None)
                paused = False
            if result.status == "unknown":  # its effect may have happened: a person settles it
                level = self._state.setup_level
                if taken(CALL_RECEIPTS, level) and self._state.receipt is not None:
                    self._state.receipt(receipt_fields(result))
                escalations += 1
                decided = await self._escalate(call, result, escalations)
                if decided is None:
                    rerun = True
                    continue  # run it again: a new attempt, which runs the tool
                return decided
            if result.status not in _FAILURES:
                return _said_rerun(result) if rerun else result
            self._journal_recovery(call, strategy.strategy, result.content)
            match strategy:
                case Fallback():
                    return await self._fallback(call, strategy, result)
                case CachedResult():
                    return self._cached(call, strategy, result)
                case DeadLetter():
                    return self._dead_letter(call, result)
                case Escalate():
                    escalations += 1
                    decided = await self._escalate(call, result, escalations)
                    if decided is None:
                        continue  # the operator asked for another attempt
                    return decided
                case _:  # Retry (Temporal has retried already) and LlmRecovery
                    return result

    # ---- one attempt ---------------------------------------------------------------------

    async def _guarded(self, call: ToolCall, strategy: RecoveryStrategy) -> ToolResult:
        """Ask the breaker, run the activity, tell the breaker how it went."""
        breaker = self._state.breaker(call.name)
        config = self._state.breaker_config
        if not breakers.admit(breaker, workflow.now(), config):
            until = breakers.reopens_at(breaker, config)
            when = until.isoformat(timespec="seconds") if until else "its probes finish"
            return error_result(
                call,
                "circuit_open",
                f"Tool {call.name!r} is unavailable: its circuit is open after "
                f"{breaker.consecutive_failures} consecutive failures, until {when}. "
                "Try another approach or come back later.",
            )
        result = await self._execute(call, strategy)
        if result.status in _FAILURES:
            opened = breaker.times_opened
            breakers.record(breaker, False, workflow.now(), config)
            if breaker.times_opened > opened:
                count("orga_breaker_opened", tool=call.name)
        elif result.status == "ok":
            breakers.record(breaker, True, workflow.now(), config)
            if isinstance(strategy, CachedResult):
                self._state.remember(call, result.content)
        else:  # never ran the tool's code (invalid arguments, unknown tool): no verdict
            breakers.withdraw(breaker)
        return result

    async def _execute(self, call: ToolCall, strategy: RecoveryStrategy) -> ToolResult:
        definition = self._state.definitions[call.name]
        timeout = definition.timeout or self._state.default_timeout
        retry = TOOL_RETRY
        if isinstance(strategy, Retry):
            retry = RetryPolicy(
                initial_interval=strategy.initial_interval,
                backoff_coefficient=strategy.backoff,
                maximum_attempts=strategy.max_attempts,
                non_retryable_error_types=non_retryable(),
            )
        invocation = ToolInvocation(
            call=call,
            workflow_id=self._state.workflow_id,
            chain=workflow.info().first_execution_run_id,
            retry_tool_errors=isinstance(strategy, Retry),
            max_result_bytes=self._state.max_payload_bytes,
            knowledge_namespace=self._state.knowledge_namespace,
            knowledge_directory=self._state.knowledge_directory,
            agent_id=self._state.agent_id,
        )
        # A call of a tool with effects is cancelled waiting for the tool to say how it
        # stopped (patch stop-means-stop), so its receipt says what happened, not a guess.
        effects = definition.serial or definition.requires_approval
        waits = self._state.wait_for_cancelled_tools or (
            effects and taken(STOP_MEANS_STOP, self._state.setup_level)
        )
        cancellation = (
            ActivityCancellationType.WAIT_CANCELLATION_COMPLETED
            if waits
            else ActivityCancellationType.TRY_CANCEL
        )
        # No worker that took it registers the tool: wait for one that does (the loop's
        # timeout bounds the wait), never handing the model an error for it.
        wait = WorkerWait(call.name, self._state.waiting_for_workers, self._worker_wait_changed)
        while True:
            wait.asking()
            outcome = await run_tool(
                invocation,
                timeout=timeout,
                retry=retry,
                summary=f"tool {call.name} · {call.id}",
                heartbeat=tool_heartbeat_timeout(timeout),
                cancellation=cancellation,
                local=definition.local,  # a short pure tool: in this worker, as a marker
                priority=self._state.priority,
            )
            if isinstance(outcome, ToolResult) or not outcome.elsewhere:
                break
            if self._state.stopping.stops():
                break
            await wait.pause()
        wait.end()
        if isinstance(outcome, ToolResult):
            return outcome
        stopped = self._state.stopping.now
        why = self._state.stopping.why if stopped else "cancelled"
        if outcome.cancelled and effects and waits:
            # The tool stopped before its effect began (or never started): nothing ran.
            return error_result(
                call,
                "failed",
                f"Tool {call.name!r} did not run: its call was cancelled before its effect "
                f"began ({why}).",
            )
        if effects and (
            outcome.cancelled or (stopped and (outcome.timed_out or not outcome.typed))
        ):
            # The loop stopped while it ran and nothing says how the tool ended (a cancel not
            # waited for, a worker lost meanwhile): its effect may have landed (its receipt
            # says unknown; a person finds out by its idempotency key).
            failed = error_result(call, "failed", f"Tool {call.name!r} failed: {outcome.message}")
            return failed.model_copy(update={"settled": "cancelled"})
        if outcome.timed_out:
            return error_result(
                call,
                "timed_out",
                f"Tool {call.name!r} did not finish within {timeout.total_seconds():g} s.",
            )
        if outcome.cancelled:
            return error_result(
                call, "failed", f"Tool {call.name!r} was cancelled while it ran ({why})."
            )
        if not outcome.typed:
            return error_result(call, "failed", f"Tool {call.name!r} failed: {outcome.message}")
        return error_result(call, outcome.status, outcome.message)

    def _worker_wait_changed(self) -> None:
        if self._state.worker_wait_changed is not None:
            self._state.worker_wait_changed()

    # ---- strategies ----------------------------------------------------------------------

    async def _fallback(self, call: ToolCall, strategy: Fallback, failed: ToolResult) -> ToolResult:
        errors = [f"{call.name}: {failed.content}"]
        for alternative in strategy.tools:
            if alternative not in self._state.definitions:
                errors.append(f"{alternative}: not registered on this worker")
                continue
            substitute = call.model_copy(update={"name": alternative})
            decision = await self._state.gate(substitute)
            if not decision.permits:
                errors.append(f"{alternative}: denied ({decision.reason})")
                continue
            if decision.decision == "modify" and decision.arguments is not None:
                substitute = substitute.model_copy(update={"arguments": decision.arguments})
            result = await self._guarded(substitute, self._state.recovery.for_tool(alternative))
            if result.status == "ok":
                return _recovered(
                    call,
                    f"[answered by fallback tool {alternative!r} because {call.name!r} failed: "
                    f"{failed.content}]\n{result.content}",
                )
            errors.append(f"{alternative}: {result.content}")
        return error_result(
            call, failed.status, "The call and every fallback failed: " + " | ".join(errors)
        )

    def _cached(self, call: ToolCall, strategy: CachedResult, failed: ToolResult) -> ToolResult:
        entry = self._state.cache.get(cache_key(call))
        if entry is not None and workflow.now() - entry.at <= strategy.max_age:
            return _recovered(
                call,
                f"[cached result from {entry.at.isoformat(timespec='seconds')}, because the call "
                f"failed: {failed.content}]\n{entry.content}",
            )
        return error_result(
            call,
            failed.status,
            f"{failed.content} (no cached result younger than "
            f"{strategy.max_age.total_seconds():g} s to fall back on)",
        )

    def _dead_letter(self, call: ToolCall, failed: ToolResult) -> ToolResult:
        self._state.dead_letters.append(
            DeadLetterEntry(
                call_id=call.id,
                tool=call.name,
                arguments=call.arguments,
                error=failed.content,
                iteration=self._iteration,
                at=workflow.now(),
            )
        )
        return error_result(
            call,
            failed.status,
            f"{failed.content} (the call was set aside in the dead-letter list for an operator)",
        )

    async def _escalate(self, call: ToolCall, failed: ToolResult, count: int) -> ToolResult | None:
        """Wait for an operator. ``None`` means: try the call again."""
        pending = PendingEscalation(
            escalation_id=f"{call.id}#{count}",
            tool=call.name,
            arguments=call.arguments,
            error=failed.content,
            since=workflow.now(),
            iteration=self._iteration,
        )
        record = await self._state.desk.escalation(pending)
        who = f" by {record.operator}" if record.operator else ""
        match record.action:
            case "retry" | "mark_compensated" | "give_up":  # the last two: never offered here
                return None
            case "skip":
                return error_result(
                    call,
                    "skipped",
                    f"The call failed ({failed.content}) and was skipped{who}"
                    + (f": {record.reason}" if record.reason else "."),
                )
            case "result":
                value = record.result
                content = value if isinstance(value, str) else json.dumps(value, default=str)
                return _recovered(call, f"[result supplied by an operator{who}]\n{content}")
            case "abort":
                raise Aborted(
                    f"an operator{who} aborted the loop at the failing call {call.id!r} "
                    f"({call.name}): {record.reason or failed.content}",
                    {"call_id": call.id, "tool": call.name, "error": failed.content},
                )

    def _journal_recovery(self, call: ToolCall, strategy: str, error: str) -> None:
        self._state.record(
            RecoveryTriggered(**self._state.stamp(), tool=call.name, strategy=strategy, error=error)
        )

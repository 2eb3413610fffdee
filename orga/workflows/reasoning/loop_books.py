"""What a loop records about itself: its journal, counters, status and phase.

Workflow code. ``LoopBooks`` keeps everything the ``state`` and ``journal`` queries show and the
search attributes and current details the Web UI shows, in one place, so the cycle itself only
says what happened (``reasoned``, ``observed``, ``completed``, ``failed``). It also owns the
``HumanDesk`` (pending approvals and escalations) and the loop's working clock, which stops
while the loop waits for people: the loop's ``timeout`` counts working time only.

Over 400 lines: everything the queries, the Web UI and the journal say of a loop is kept here,
so that every turn records itself in one place.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import Priority
from temporalio.exceptions import ApplicationError

from orga.contracts.audit import AUDITED_KINDS
from orga.contracts.config import Limits, LoopConfig
from orga.contracts.conversation import ToolResult
from orga.contracts.critic import ReviewRecord
from orga.contracts.delegation import DelegationRecord, RemoteWaits
from orga.contracts.evidence import EvidenceCollection
from orga.contracts.inference import InferenceResponse, Usage
from orga.contracts.journal import (
    CallOutcome,
    CallPaused,
    CallReceipt,
    CallResumed,
    Journal,
    JournalEntry,
    ObservationsCollected,
    ReasoningComplete,
    Stamp,
    Terminated,
)
from orga.contracts.principals import Principal
from orga.contracts.state import LoopState, LoopStatus, Phase, ToolCallRecord
from orga.contracts.threads import ThreadState
from orga.contracts.vocabulary import ProviderName
from orga.core.audit import AuditLog
from orga.core.receipts import receipt_fields
from orga.workflows.reasoning.loop_attributes import LoopAttributes, LoopFacts
from orga.workflows.reasoning.progress import ProgressStream
from orga.workflows.reasoning.tool_state import ToolState
from orga.workflows.shared.human_desk import HumanDesk
from orga.workflows.shared.metrics import emit_entry
from orga.workflows.shared.patches import CALL_RECEIPTS, PAUSE_STOPS_THE_CLOCK, taken
from orga.workflows.shared.stopping import Stopping

__all__ = ["LoopBooks"]

_RECENT_CALLS = 100
"""Tool-call records the ``state`` query keeps (the count covers all of them)."""


def _first(text: str, limit: int = 300) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


class LoopBooks:
    """The loop's record of itself, and the desk where people answer it."""

    def __init__(self, config: LoopConfig, limits: Limits, started_at: datetime) -> None:
        self.config = config
        self.limits = limits
        """The budgets that apply (replaced by the resolved ones once the loop is set up)."""
        self.journal = Journal(limit=config.journal_limit)
        self.usage = Usage()
        self.iteration = 0
        self.other_calls = 0
        """Model calls of its critic and delegated children that its budget paid for."""
        self.phase: Phase = "starting"
        self.status: LoopStatus = "running"
        self.last_stop_reason: str | None = None
        self.tool_calls: list[ToolCallRecord] = []
        self.moved_from: str | None = None  # the build the previous run asked to move off
        self.leaving: str | None = None  # the build this run is to move off (continuation)
        self.paused_calls: dict[str, str] = {}
        """Calls waiting for their paused tool: call id → who paused it and why."""
        self.remote_waiting: dict[str, str] = {}
        """Remote delegations whose task waits for a person there: call id → what it says."""
        self.pauses_lifted = 0
        """``pause_lifted`` signals so far: a call held by a pause waits for the next."""
        self._pause_stops_clock = False
        """A held call stops the deadline's timer too (patch ``pause-stops-the-clock``)."""
        self.receipts: list[CallReceipt] = []
        """What became of the most recent calls (``CallReceipt``)."""
        self.tool_call_count = 0
        self.delegations: list[DelegationRecord] = []
        """The loop's children (``delegate``), newest last."""
        self.provider: str | None = None  # once resolved (a label of its model metrics)
        self.audit = AuditLog()
        """The hash chain of the loop's governance records (``orga.core.audit``)."""
        self.reviews: list[ReviewRecord] = []  # the critic's reviews of the loop's answers
        self.output: str | None = None
        self.termination_reason: str | None = None
        self.termination_message: str | None = None
        self.started_at = started_at
        self.human_wait = timedelta(0)
        """Time spent waiting for people, which the loop's timeout does not count."""
        self._human_wait_since: datetime | None = None
        self._awaiting_message = False
        """A thread between turns: waiting for a person's next message."""
        self.waiting_for_workers: dict[str, int] = {}
        """Tools whose calls wait for a worker that registers them, and how many calls each
        (``ToolState.waiting_for_workers`` is this dict)."""
        self.turn: int | None = None
        """A thread's turn (the Web UI's current details name it)."""
        self.principal: Principal | None = None
        """Who the loop runs for, once its worker resolved it (``runs_for``)."""
        self.priority = Priority.default
        """The fairness key and weight of its model and tool calls (the principal's tenant)."""
        self._principal_known = False
        self.setup_level = 0  # the worker's SETUP_LEVEL when it set the loop up (patches.taken)
        self._attributes = LoopAttributes(self._facts(), started_at)
        """Its search attributes (``loop_attributes``)."""
        self.desk = HumanDesk(on_change=self._waiting_changed, record=self.record, stamp=self.stamp)
        self.stopping = Stopping(lambda: self.setup_level)
        """Whether the loop is stopping (cancelled, or its timeout passed): nothing new runs."""
        self.progress: ProgressStream | None = None
        """Where a streamed loop publishes its steps (``config.stream``)."""

    # ---- journal -------------------------------------------------------------------------

    def stamp(self) -> Stamp:
        """The fields every journal event carries: taken at the moment of the event."""
        return Stamp(
            seq=self.journal.take_seq(),
            at=workflow.now(),
            agent_id=self.config.agent_id,
            iteration=self.iteration,
        )

    def record(self, entry: JournalEntry) -> None:
        self.journal.append(entry)
        if entry.kind in AUDITED_KINDS:  # a governance record: onto the audit chain too
            self.audit.add(entry.kind, entry)
        emit_entry(entry, "loop", self.provider)

    # ---- what happened -------------------------------------------------------------------

    def started(self) -> None:
        self._publish()

    def runs_for(self, principal: Principal | None, priority: Priority) -> None:
        """The worker resolved who the loop runs for: its search attributes say so."""
        self.principal, self.priority, self._principal_known = principal, priority, True
        self._publish()

    def reasoned(self, response: InferenceResponse) -> None:
        """A model call came back: count its tokens and journal it."""
        self.usage = self.usage + response.usage
        self.last_stop_reason = response.stop_reason
        self.record(
            ReasoningComplete(
                **self.stamp(),
                stop_reason=response.stop_reason,
                raw_stop_reason=response.raw_stop_reason,
                model=response.model,
                tool_calls=[c.name for c in response.tool_calls],
                usage=response.usage,
                blob_ref=response.blob_ref,
            )
        )
        if self.progress is not None:
            self.progress.calls(response.tool_calls)
        self._publish()

    @property
    def model_calls(self) -> int:
        """Model calls this loop's budget paid for: its own and its critic's and children's."""
        return self.iteration + self.other_calls

    def charge(self, usage: Usage, calls: int = 0) -> None:
        """Add what a child loop or a critic spent — tokens and ``calls`` model calls — to
        this loop's (its budget is shared)."""
        self.usage = self.usage + usage
        self.other_calls += calls
        self._publish()

    def observed(self, results: Sequence[ToolResult]) -> None:
        """A turn's tool results are in: journal them and keep a record of each call."""
        self.record(
            ObservationsCollected(
                **self.stamp(),
                outcomes=[
                    CallOutcome(
                        call_id=r.call_id,
                        tool=r.name,
                        is_error=r.is_error,
                        status=r.status,
                        blob_ref=r.blob_ref,
                        error=_first(r.content) if r.is_error else None,
                    )
                    for r in results
                ],
            )
        )
        for result in results:
            self.tool_call_count += 1
            self.tool_calls.append(
                ToolCallRecord(
                    iteration=self.iteration,
                    call_id=result.call_id,
                    tool=result.name,
                    status=result.status,
                    is_error=result.is_error,
                )
            )
        del self.tool_calls[:-_RECENT_CALLS]
        if taken(CALL_RECEIPTS, self.setup_level):
            for result in results:
                if result.settled not in (None, "cancelled"):  # lost: unknown, then settled
                    self.receipt(receipt_fields(result, lost=True))
                self.receipt(receipt_fields(result))
        if self.progress is not None:
            self.progress.results(results)

    def receipt(self, fields: dict[str, Any]) -> None:
        """Journal (and keep for the state query) what became of a call."""
        receipt = CallReceipt(**self.stamp(), **fields)
        self.record(receipt)
        self.receipts.append(receipt)
        del self.receipts[:-_RECENT_CALLS]

    def completed(self, output: str, reason: str, message: str) -> None:
        self.output = output
        self.termination_reason = reason
        self.termination_message = message
        self.set_phase("completed")
        self.status = "completed"
        self.record(Terminated(**self.stamp(), reason=reason, message=message))
        if self.progress is not None:
            self.progress.ended(message)
        self._publish()

    def failed(self, error: BaseException) -> None:
        """Journal why the loop ended without an answer (a failure or a cancellation)."""
        if isinstance(error, asyncio.CancelledError):
            kind, status = "cancelled", "cancelled"
            message = workflow.cancellation_reason() or "cancelled"
        else:
            kind = error.type if isinstance(error, ApplicationError) else type(error).__name__
            status = "failed"
            message = error.message if isinstance(error, ApplicationError) else str(error)
        self.termination_reason = kind
        self.status = status
        self.set_phase("failed")
        self.termination_message = message or "cancelled"
        self.record(Terminated(**self.stamp(), reason=kind or "failed", message=message))
        if self.progress is not None:
            self.progress.ended(self.termination_message)
        self._publish()

    # ---- the state query -----------------------------------------------------------------

    def state(
        self,
        *,
        workflow_id: str,
        messages: int,
        provider: ProviderName | None,
        model: str | None,
        tools: ToolState,
        evidence: EvidenceCollection | None,
        advertised: list[str],
        knowledge_context: str | None,
        thread: ThreadState | None = None,
    ) -> LoopState:
        """What the ``state`` query shows: these books, and what of the loop they do not keep
        (copied: the answer does not change with the loop)."""
        desk = self.desk
        return LoopState(
            workflow_id=workflow_id,
            agent_id=self.config.agent_id,
            status=self.status,
            phase=self.phase,
            iteration=self.iteration,
            usage=self.usage,
            model_calls=self.model_calls,
            started_at=self.started_at,
            last_stop_reason=self.last_stop_reason,
            tool_call_count=self.tool_call_count,
            tool_calls=list(self.tool_calls),
            receipts=list(self.receipts),
            paused_calls=dict(self.paused_calls),
            messages=messages,
            output=self.output,
            termination_reason=self.termination_reason,
            termination_message=self.termination_message,
            provider=provider,
            model=model,
            pending_approvals=list(desk.approvals.values()),
            pending_escalations=list(desk.escalations.values()),
            breakers={name: b.model_copy() for name, b in tools.breakers.items()},
            dead_letters=list(tools.dead_letters),
            waiting_for_workers=sorted(tools.waiting_for_workers),
            evidence=evidence.model_copy() if evidence is not None else None,
            advertised=list(advertised),
            delegations=list(self.delegations),
            pending_review=desk.review_pending,
            reviews=list(self.reviews),
            knowledge_context=knowledge_context,
            thread=thread,
            principal=self.principal,
        )

    # ---- phase, status and the working clock ---------------------------------------------

    def set_phase(self, phase: Phase) -> None:
        """Move to ``phase`` and say so in the Web UI's current details."""
        self.phase = phase
        limits = self.limits
        turn = f"turn {self.turn} · " if self.turn is not None else ""
        workflow.set_current_details(
            f"**{phase}** · {turn}iteration {self.iteration}/{limits.max_iterations} · "
            f"{self.usage.total_tokens}/{limits.max_total_tokens} tokens · "
            f"{self.tool_call_count} tool call(s){self._waiting_for()}"
        )

    def _waiting_for(self) -> str:
        """What the loop waits for, as its current details end (empty while it runs)."""
        desk = self.desk
        if not (
            desk.waiting
            or self._awaiting_message
            or self.waiting_for_workers
            or self.paused_calls
            or self.remote_waiting
        ):
            return ""
        pending = [f"approval of {p.tool} ({p.call_id})" for p in desk.approvals.values()] + [
            f"operator for {e.tool} ({e.escalation_id})" for e in desk.escalations.values()
        ]
        if desk.review_pending is not None:
            pending.append(f"a review of answer {desk.review_pending.round}")
        if self._awaiting_message:
            pending.append("the next message")
        pending += [f"a worker with tool {tool}" for tool in sorted(self.waiting_for_workers)]
        pending += [f"a paused tool ({call_id})" for call_id in sorted(self.paused_calls)]
        pending += [f"a person at a remote agent ({c})" for c in sorted(self.remote_waiting)]
        return f" · waiting for {', '.join(pending)}"

    def remote_waits(self, waits: RemoteWaits) -> None:
        """A remote delegation's task waits for a person there, or no longer: shown on its
        record and the loop's status (its working clock stops, as for people here). A call
        that is no running remote delegation changes nothing."""
        call_id = waits.call_id
        running = [
            r
            for r in self.delegations
            if r.call_id == call_id and r.status == "running" and r.workflow_id.startswith("a2a:")
        ]
        if not running:
            return
        if waits.says is None:
            self.remote_waiting.pop(call_id, None)
        else:
            self.remote_waiting[call_id] = waits.says
        self.delegations = [
            r.model_copy(update={"waiting": waits.says}) if r.call_id == call_id else r
            for r in self.delegations
        ]
        self._waiting_changed()

    def working_seconds(self) -> float:
        """Seconds the loop has run, not counting time spent waiting for people."""
        waited = self.human_wait
        if self._human_wait_since is not None:
            waited += workflow.now() - self._human_wait_since
        return (workflow.now() - self.started_at - waited).total_seconds()

    def awaiting_message(self, waiting: bool) -> None:
        """A thread waits for its next message (the working clock stops), or goes on."""
        self._awaiting_message = waiting
        if waiting:
            self.set_phase("awaiting_message")
        self._waiting_changed()

    def call_paused(self, call_id: str, tool: str, reason: str | None) -> None:
        """A call began (``reason``) or ended (``None``) waiting for its paused tool (or a model
        call for its paused loop): journaled at either end; the loop's status says ``paused``
        and its working clock stops, as for people."""
        if reason is None:
            if self.paused_calls.pop(call_id, None) is not None:
                self.record(CallResumed(**self.stamp(), call_id=call_id, tool=tool))
        else:
            if call_id not in self.paused_calls:
                self.record(CallPaused(**self.stamp(), call_id=call_id, tool=tool, reason=reason))
                self._pause_stops_clock = self._pause_stops_clock or workflow.patched(
                    PAUSE_STOPS_THE_CLOCK
                )
            self.paused_calls[call_id] = reason
        self._waiting_changed()

    def clock_stopped(self) -> bool:
        """Whether the loop's working clock stands still: a person is asked, or a call waits
        for its pause to end (the loop's ``timeout`` counts neither)."""
        return self.desk.waiting or (self._pause_stops_clock and bool(self.paused_calls))

    def worker_wait_changed(self) -> None:
        """A tool call began or ended waiting for a worker with its tool."""
        self._waiting_changed()

    def _waiting_changed(self) -> None:
        waiting = (
            self.desk.waiting
            or self._awaiting_message
            or bool(self.paused_calls)
            or bool(self.remote_waiting)
        )
        now = workflow.now()
        if waiting and self._human_wait_since is None:
            self._human_wait_since = now
        elif not waiting and self._human_wait_since is not None:
            self.human_wait += now - self._human_wait_since
            self._human_wait_since = None
        status: LoopStatus = (
            "awaiting_review"
            if self.desk.review_pending is not None
            else "awaiting_approval"
            if self.desk.waiting
            else "awaiting_message"
            if self._awaiting_message
            else "awaiting_worker"
            if self.waiting_for_workers
            else "awaiting_remote"
            if self.remote_waiting
            else "paused"
            if self.paused_calls
            else "running"
        )
        if status != self.status:
            self.status = status
            self._publish()
        self.set_phase(self.phase)
        if self.progress is not None:
            self.progress.desk_changed()

    # ---- search attributes -----------------------------------------------------------------

    def _facts(self) -> LoopFacts:
        return LoopFacts(
            agent_id=self.config.agent_id,
            status=self.status,
            iteration=self.iteration,
            total_tokens=self.usage.total_tokens,
            principal=self.principal,
            principal_known=self._principal_known,
        )

    def _publish(self) -> None:
        self._attributes.publish(self._facts())

"""One run of a reasoning loop: its state and the Observe → Reason → Gate → Act cycle.

Workflow code, shared by every run (passed through the sandbox): the ``ReasoningLoop``
workflow definition (``orga/workflows/loop.py``) holds one ``AgentLoop``, runs it and answers
queries and people from it.

Deterministic orchestration only; model calls, policy checks and tools are activities. The
cycle routes on the model's structured ``stop_reason`` and nothing else, moving through the
typestate phases of ``orga.core.phases``::

    run ── set_up_loop ── within(timeout) ──────────────────────────────────▶ LoopResult
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
and the ``state`` query (``loop_books``), the setup, the tools a loop has and its model call's
request (``loop_parts``), where budgets end it (``loop_budgets``), the model call and its
fallbacks (``model_call``), the answer branch (``answering``), the timeout (``deadline``),
acting (``tool_runner``, ``call_executor``), pre-hydration, evidence judging, threads, forks
and continue-as-new; the gate and people (``gate``, ``human_desk``) are
``orga.workflows.shared``.

Over 400 lines: the loop's state, the run, the cycle and the Reason step on one screen; each
other step is in its own module of ``orga.workflows.reasoning``.
"""

from __future__ import annotations

import asyncio

from temporalio import workflow
from temporalio.common import RawValue
from temporalio.contrib.workflow_streams import WorkflowStream

from orga.contracts.config import Limits, LoopInput
from orga.contracts.conversation import Message
from orga.contracts.errors import BudgetExceeded, InvalidConfig, LoopFailure
from orga.contracts.forks import ForkPoint, ForkPointAsk
from orga.contracts.inference import InferenceResponse
from orga.contracts.policy import PolicyResult
from orga.contracts.progress import ProgressView
from orga.contracts.state import LoopResult, LoopState
from orga.contracts.threads import THREAD_MEMO
from orga.core.genai import invocation_attributes
from orga.core.ids import with_internal_ids
from orga.core.knowledge import with_knowledge
from orga.core.phases import (
    AnswerPolicyCheck,
    Observing,
    Reasoning,
    ToolPolicyCheck,
)
from orga.workflows.reasoning import continuation
from orga.workflows.reasoning.answering import FinalAnswers
from orga.workflows.reasoning.deadline import within
from orga.workflows.reasoning.durable_conversation import Conversation
from orga.workflows.reasoning.evidence_judge import evidence_tools
from orga.workflows.reasoning.finish import Finished
from orga.workflows.reasoning.forks import ForkMarks, forked_summary, start_fork
from orga.workflows.reasoning.loop_books import LoopBooks
from orga.workflows.reasoning.loop_budgets import LoopBudgets, of_which
from orga.workflows.reasoning.loop_parts import LoopParts, loop_tool_state, set_up_loop
from orga.workflows.reasoning.loop_view import loop_view
from orga.workflows.reasoning.model_call import call_with_fallbacks
from orga.workflows.reasoning.prehydration import pre_hydrate_loop
from orga.workflows.reasoning.progress import ProgressStream
from orga.workflows.reasoning.running_summary import RunningSummary
from orga.workflows.reasoning.steering import Steering
from orga.workflows.reasoning.thread import Thread
from orga.workflows.reasoning.tool_runner import act
from orga.workflows.shared.common import decoded
from orga.workflows.shared.gate import Gate, ModelCallDecisions

__all__ = ["AgentLoop"]


class AgentLoop:
    """One run of a loop: built from the workflow's raw input when the run starts."""

    def __init__(self, input: RawValue) -> None:
        checked, self._invalid = decoded(LoopInput, input, "loop")
        self._input = loop = checked or LoopInput(messages=[Message(role="user", content="")])
        """The run's input (a stand-in when it is invalid: the run then fails at once)."""
        self._config = config = loop.config
        info = workflow.info()
        self._workflow_id = info.workflow_id
        self._refused_start = continuation.start_problem(loop, info)
        """Why a run may not start with this input, whatever it carries (a fresh or cron run)."""
        self._invalid = self._invalid or self._refused_start
        carried = loop.carry.stream if loop.carry is not None else None
        self._stream = (
            WorkflowStream(carried.state if carried is not None else None)
            if config.stream and self._invalid is None
            else None
        )
        """Where the model's text and the loop's steps are published (``config.stream``)."""
        self._parts = LoopParts(Limits.of(config), config.provider, config.model)
        """What the loop works with: budgets, model, tools shown, critic, … (``loop_parts``)."""
        self.books = books = LoopBooks(config, self._parts.limits, started_at=workflow.now())
        """The loop's record of itself, and the desk where people answer it."""
        self.steering = Steering(books)
        """Messages people send while the loop runs (``steering``)."""
        if self._stream is not None:
            books.progress = ProgressStream(self._stream, self._view, carried)
        self._thread = Thread(config.thread, books, self.steering) if config.thread else None
        """A conversation's turns, for loops with ``config.thread``."""
        self._budgets = LoopBudgets(books, lambda: self._parts.limits, self._thread, self.state)
        """Where its budgets end it (``loop_budgets``)."""
        if self._thread is not None and not loop.messages and loop.carry is None and not loop.fork:
            self._thread.wait_for_first()
        self._marks = ForkMarks()
        """Where each turn of this run ended (the ``fork_point`` query)."""
        self._turn_limits = self._parts.limits
        """The budgets of the loop (of each turn, in a thread) once it is set up."""
        self.conversation = Conversation()
        """The durable conversation."""
        if config.system_prompt and loop.carry is None:
            self.conversation.append([Message(role="system", content=config.system_prompt)])
        self.conversation.append(loop.messages)
        self._answers = FinalAnswers(
            config,
            self.conversation,
            self.steering,
            self._budgets,
            gate=self._gate_turn,
            mark=lambda: self._mark(answered=True),
            task=self._task,
        )
        """Its final answers: checked, gated, reviewed (``answering``)."""
        self._gate = Gate(
            policy=config.policy or "default",
            agent_id=config.agent_id,
            workflow_id=self._workflow_id,
            record=books.record,
            stamp=books.stamp,
            facts=lambda: (books.iteration, books.usage),
            stopping=books.stopping,
        )
        self._tools = loop_tool_state(
            config,
            books,
            self._gate,
            workflow_id=self._workflow_id,
            max_concurrent=self._parts.limits.max_concurrent_tools,
        )
        self._decided: ModelCallDecisions | None = None
        """The ``default`` gate's decisions the last model call made, until the gate asks."""
        self._calibration = 1.0
        self._runs = 1
        self._summary = RunningSummary(books)
        """The running summary of what left the context window (``anchored_summary``)."""
        if loop.carry is not None and self._invalid is None:
            self._runs = loop.carry.runs + 1
            self._calibration = loop.carry.calibration
            carry = loop.carry
            self._summary = RunningSummary(
                books, carry.context_summary, carry.summarised_through, carry.unsummarised_through
            )
            try:
                continuation.restore(loop.carry, books, self.conversation, self._tools)
            except ValueError as error:
                self._invalid = str(error)
            if self._thread is not None and carry.thread is not None:
                self._thread.restore(carry.thread)
            if carry.inbox is not None:
                self.steering.restore(carry.inbox)

    def state(self) -> LoopState:
        """Phase, iteration, usage, last stop reason, tool calls so far and status."""
        parts = self._parts
        thread = self._thread.state() if self._thread is not None else None
        return self.books.state(
            workflow_id=self._workflow_id,
            messages=len(self.conversation.messages),
            provider=parts.provider,
            model=parts.model,
            tools=self._tools,
            evidence=parts.evidence.collection if parts.evidence is not None else None,
            advertised=parts.advertised,
            knowledge_context=parts.knowledge.context if parts.knowledge is not None else None,
            thread=thread,
        )

    def _view(self) -> ProgressView:
        """The loop as a stream's reader shows it (``ProgressItem.view``)."""
        return loop_view(self.books, self._thread, self._config.max_cost)

    def ended(self) -> bool:
        """Whether the loop has ended (a waiting ``turn`` update then lets go)."""
        return self.books.status in ("completed", "failed", "cancelled")

    def fork_point(self, ask: ForkPointAsk) -> ForkPoint:
        """This loop's state after turn ``ask.at`` (``orga fork``)."""
        return self._marks.point(ask, self.conversation, self._config)

    def _mark(self, *, answered: bool) -> None:
        """This turn ends here: note its state for a fork after it."""
        evidence = self._parts.evidence
        self._marks.note(
            self.books,
            self.conversation,
            answered=answered,
            tools=self._tools,
            evidence=evidence.collection if evidence is not None else None,
            summary=self._summary.marks,
            calibration=self._calibration,
        )

    def a_thread(self) -> Thread:
        """This loop's thread (for a thread's updates).

        Raises:
            ValueError: the loop is not a thread.
        """
        if self._thread is None:
            raise ValueError(
                "this loop is not a thread (config.thread): it answers once, and its answer "
                "is its result"
            )
        return self._thread

    def trace_root(self) -> dict[str, str]:
        """The GenAI attributes of the span this loop's trace starts with when its start
        carried no trace context (``orga.runtime.tracing``): only what the client said."""
        return invocation_attributes(
            self._config, self._workflow_id, agent_known=self._invalid is None
        )

    async def run(self) -> LoopResult:
        """The loop, from its setup to its result (or its typed failure)."""
        books = self.books
        if self._input.carry is not None and self._refused_start is None:
            # The server's word on whose the carry is comes before what the carry says.
            self._invalid = await continuation.foreign_carry() or self._invalid
            if self._invalid is not None:  # nothing of the carry is shown, let alone used
                continuation.forget(books, self._tools, self._config)
        if self._invalid is None and self._input.carry is None:  # a next run's are the loop's
            self._invalid = self.steering.refused_task(self._input.messages)
        if self._invalid is not None:
            invalid = InvalidConfig(self._invalid)
            books.failed(invalid)
            raise invalid
        if workflow.info().parent is not None:
            self._tools.wait_for_cancelled_tools = True  # a task's step: see ToolState
        books.started()
        if self._thread is not None and self._input.carry is None:
            workflow.upsert_memo({THREAD_MEMO: True})  # `orga list` shows it as a thread
        try:
            evidence, point = None, None
            if (fork := self._input.fork) is not None and self._input.carry is None:
                point = await start_fork(fork, books, self.conversation, self._tools, self.steering)
                evidence, self._calibration = point.evidence, point.calibration
                if self._thread is not None and fork.say is None:
                    self._thread.wait_for_first()  # forked after an answer: it waits
            self._parts = parts = await set_up_loop(
                self._input,
                workflow_id=self._workflow_id,
                books=books,
                gate=self._gate,
                tools=self._tools,
                conversation=self.conversation,
                evidence=evidence,
            )
            self._turn_limits = parts.limits
            if point is not None:
                self._summary = forked_summary(books, point, self.conversation)
            if self._thread is None:
                cycle = self._cycle(first=self._input.fork is None)
                finished = await within(cycle, books, parts.limits.timeout.total_seconds())
                self.steering.closed = "it has answered"
            else:
                finished = await self._converse(self._thread)
            if parts.knowledge is not None and parts.knowledge.config.auto_persist:
                await parts.knowledge.remember(self._task(), finished.output)
        except TimeoutError:
            failure = self._budgets.timed_out()
            books.failed(failure)
            raise failure from None
        except (LoopFailure, InvalidConfig, asyncio.CancelledError) as error:
            books.failed(error)  # a cancellation by a user is journaled, then let through
            raise
        books.completed(finished.output, finished.reason, finished.message)
        if self._stream is not None:  # a reader that went away mid-poll leaves its poll waiting
            self._stream.detach_pollers()
        await workflow.wait_condition(workflow.all_handlers_finished)
        return finished.result(
            books,
            workflow_id=self._workflow_id,
            messages=len(self.conversation.messages),
            provider=self._parts.provider,
            model=self._parts.model,
        )

    async def _converse(self, thread: Thread) -> Finished:
        """A thread: its turns, each run as a loop is, with the waits for messages between."""
        if not thread.between_turns:  # the first turn, or one this run continues
            fresh = self._input.carry is None
            if fresh:
                thread.begin()
            await self._turn(thread, first=fresh and self._input.fork is None)
        while await thread.next_message():
            await continuation.check_upgrade(self.books, self._config)
            thread.begin()
            await self._turn(thread, first=False)
        return thread.last_finished()

    async def _turn(self, thread: Thread, *, first: bool) -> None:
        """One turn of a thread, within its budgets; a long history then starts afresh."""
        self._answers.misses = 0
        self._parts.limits = self.books.limits = thread.limits(self._turn_limits)
        try:
            finished = await within(
                self._cycle(first=first), self.books, thread.deadline(self._turn_limits)
            )
        except TimeoutError:
            finished = self._budgets.turn_over(
                self._budgets.timed_out(), self._turn_limits, self.conversation
            )
        except BudgetExceeded as exceeded:
            finished = self._budgets.turn_over(exceeded, self._turn_limits, self.conversation)
        thread.answer(finished)
        if continuation.should_continue_as_new(self.books, self._config):
            await self._continue_as_new()  # between turns: the next run waits on

    async def _cycle(self, *, first: bool = True) -> Finished:
        """Observe → Reason → Gate → Act, until an answer passes the gate."""
        config, books, parts = self._config, self.books, self._parts
        limits, evidence = parts.limits, parts.evidence
        if config.pre_hydration is not None and self._input.carry is None and first:
            await pre_hydrate_loop(
                config.pre_hydration,
                self.conversation,
                tools=self._tools,
                gate=self._gate,
                books=books,
                advertised=list(parts.advertised),
            )
        observing = Observing(books.iteration)
        while True:
            books.stopping.check()  # a stopping loop asks and runs nothing new
            # Observe: the last turn joins the conversation, then what people sent meanwhile;
            # a long history starts afresh.
            self.conversation.append(observing.new_messages)
            if observing.new_messages or not self._marks.holds(books.iteration):
                self._mark(answered=False)
            if self.steering.waiting:
                self.conversation.append(self.steering.take())
            books.set_phase("observing")
            if continuation.should_continue_as_new(books, config):
                await self._continue_as_new()
            # Reason: one model call, routed on its stop_reason.
            reasoning = observing.reason()
            others = books.other_calls
            if reasoning.iteration + others > limits.max_iterations:
                raise self._budgets.exceeded(
                    "max_iterations",
                    limits.max_iterations,
                    f"the loop reached max_iterations={limits.max_iterations} model calls "
                    f"{of_which(others)}without a final answer",
                )
            books.iteration = reasoning.iteration
            routed = reasoning.route(await self._reason(reasoning))
            # Gate the answer: allowed ends the loop, denied goes back to the model.
            if isinstance(routed, AnswerPolicyCheck):
                answered = await self._answers.judge(routed, parts)
                if isinstance(answered, Finished):
                    return answered
                observing = answered
                continue
            others = books.other_calls
            if books.iteration + others >= limits.max_iterations:
                raise self._budgets.exceeded(
                    "max_iterations",
                    limits.max_iterations,
                    f"the model asked for {len(routed.calls)} tool call(s) at iteration "
                    f"{books.iteration}, the last one max_iterations={limits.max_iterations} "
                    f"allows {of_which(others)}— they were not run because no model call "
                    "would be left to read their results",
                )
            # Gate the calls (evidence calls are judged first), then Act on what passed.
            if evidence is not None and evidence.track(routed):
                return self._saturated(routed)
            dispatching = routed.gate(await self._gate_turn(routed))
            observing = await act(
                dispatching, self._tools, books, list(parts.advertised), parts.knowledge
            )
            if evidence is not None:
                evidence.observe(dispatching, observing, routed)

    # ---- the steps -------------------------------------------------------------------------

    async def _reason(self, reasoning: Reasoning) -> InferenceResponse:
        config, books, parts = self._config, self.books, self._parts
        books.set_phase("reasoning")
        knowledge = None
        if parts.knowledge is not None:
            knowledge = await parts.knowledge.before_step(
                self.conversation.messages, reasoning.iteration
            )
        conversation = self.conversation.unsent(self._workflow_id)
        if config.context_strategy == "anchored_summary":
            await self._summary.prepare(
                with_knowledge(self.conversation.messages, knowledge),
                conversation,
                budget=config.context_token_budget,
                calibration=self._calibration,
                provider=parts.provider,
                model=parts.model,
                timeout=config.model_timeout,
                task_queue=parts.model_task_queue,
                iteration=reasoning.iteration,
            )
        request = parts.request(
            config,
            iteration=reasoning.iteration,
            conversation=conversation,
            judged_tools=evidence_tools(self._tools.definitions, parts.advertised),
            knowledge=knowledge,
            stream=self._stream is not None,
            token_budget=parts.limits.max_total_tokens - books.usage.total_tokens,
            summary=self._summary,
            calibration=self._calibration,
            misses=self._answers.misses,
        )
        limit = parts.limits.max_total_tokens
        books.stopping.check()  # what came before may have been cut short by a stop
        try:
            response = await call_with_fallbacks(request, config.model_timeout, parts, books)
        except BudgetExceeded as refused:
            own = (
                f"the loop has {request.token_budget} of max_total_tokens={limit} tokens left "
                f"at iteration {reasoning.iteration}"
            )
            said: object = refused.details[0] if refused.details else None
            why = (  # a principal's spend limit first: the loop's own budget was not the cause
                f"{refused.message} ({own})"
                if isinstance(said, dict) and "principal" in said
                else f"{own}, not enough for its next model call: {refused.message}"
            )
            raise self._budgets.exceeded("max_total_tokens", limit, why) from None
        response = with_internal_ids(response, reasoning.iteration)  # providers may repeat ids
        self._decided = ModelCallDecisions.of(response)
        self.conversation.mark_sent()
        self.conversation.expect(response.as_message())
        if response.estimated_input_tokens > 0 and response.usage.input_tokens > 0:
            # Calibrate the byte-based estimate by what the provider counted (bounded).
            ratio = response.usage.input_tokens / response.estimated_input_tokens
            # Four digits are plenty for an estimate, and each later request carries it.
            self._calibration = round(min(4.0, max(0.25, ratio)), 4)
        books.reasoned(response)
        self._budgets.check_spent(response, config)
        return response

    async def _gate_turn(self, check: ToolPolicyCheck | AnswerPolicyCheck) -> PolicyResult:
        self.books.set_phase("policy_check")
        decided, self._decided = self._decided, None
        return await self._gate.decide(check.actions(), list(self._parts.advertised), decided)

    def _saturated(self, check: ToolPolicyCheck) -> Finished:
        assert self._parts.evidence is not None
        closing, snapshot = self._parts.evidence.end_saturated(check)
        self.conversation.append(closing)
        return Finished(snapshot.render(), "saturated", snapshot)

    # ---- helpers ---------------------------------------------------------------------------

    async def _continue_as_new(self) -> None:
        thread = self._thread
        await continuation.next_run(
            continuation.carried(
                self._runs,
                self.books,
                self.conversation,
                self._tools,
                self._parts.evidence.collection if self._parts.evidence is not None else None,
                self._calibration,
                summary=(
                    self._summary.text,
                    self._summary.through,
                    self._summary.unsummarised_through,
                ),
                thread=thread.carry() if thread is not None else None,
            ),
            self._config,
            self._parts,
            policy=self._gate.policy,
            turn_limits=self._turn_limits,
            conversation=self.conversation,
            steering=self.steering,
            thread=thread,
            progress=self.books.progress,
        )

    def _task(self) -> str:
        """What the loop was asked: its first user message."""
        first = next((m for m in self.conversation.messages if m.role == "user"), None)
        return first.content if first is not None else ""

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
and the ``state`` query (``loop_books``), the setup and the tools a loop has (``loop_parts``),
the timeout (``deadline``), acting (``tool_runner``, ``call_executor``), pre-hydration,
evidence judging and continue-as-new; the gate and people (``gate``, ``human_desk``) are
``orga.workflows.shared``.

Over 400 lines: the loop's state, the run and the cycle on one screen, with the budget checks
that end it; everything else is in the other modules of ``orga.workflows.reasoning``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import Final, cast

from temporalio import workflow
from temporalio.common import RawValue
from temporalio.contrib.workflow_streams import WorkflowStream

from orga.contracts.config import Limits, LoopInput
from orga.contracts.conversation import Message
from orga.contracts.errors import BudgetExceeded, InvalidConfig, LoopFailure, ModelCallFailed
from orga.contracts.forks import ForkPoint, ForkPointAsk
from orga.contracts.inference import InferenceRequest, InferenceResponse
from orga.contracts.journal import ModelSwitched
from orga.contracts.policy import PolicyResult
from orga.contracts.state import LoopResult, LoopState
from orga.contracts.threads import THREAD_MEMO, CloseThread, ThreadClosed, TurnResult, TurnWait
from orga.core.genai import invocation_attributes
from orga.core.ids import with_internal_ids
from orga.core.knowledge import with_knowledge
from orga.core.phases import (
    Answered,
    AnswerPolicyCheck,
    Observing,
    Reasoning,
    ToolDispatching,
    ToolPolicyCheck,
)
from orga.core.typed_answers import constrains
from orga.workflows.reasoning import continuation
from orga.workflows.reasoning.deadline import within
from orga.workflows.reasoning.durable_conversation import Conversation
from orga.workflows.reasoning.evidence_judge import evidence_tools
from orga.workflows.reasoning.finish import Finished, review_answer, typed_answer
from orga.workflows.reasoning.forks import ForkMarks, forked_summary, start_fork
from orga.workflows.reasoning.loop_books import LoopBooks
from orga.workflows.reasoning.loop_parts import LoopParts, set_up_loop
from orga.workflows.reasoning.model_call import call_model
from orga.workflows.reasoning.prehydration import pre_hydrate
from orga.workflows.reasoning.running_summary import RunningSummary
from orga.workflows.reasoning.steering import Steering
from orga.workflows.reasoning.thread import Thread
from orga.workflows.reasoning.tool_runner import ToolRunner
from orga.workflows.reasoning.tool_state import ToolState
from orga.workflows.shared.common import decoded
from orga.workflows.shared.gate import Gate, ModelCallDecisions
from orga.workflows.shared.patches import (
    ELIDE_REFUSED_ARGUMENTS,
    GATE_TYPED_ANSWER,
    TURN_BUDGET_ENDS_TURN,
)

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
        if loop.carry is not None and info.continued_run_id is None and self._invalid is None:
            self._invalid = (
                "the loop input carries state (carry) but this run continues no earlier one: "
                "carry is set by a loop for its next run, never by a client. Nothing was run."
            )
        if info.cron_schedule and self._invalid is None:
            # Each cron run "continues" the one before with the client's input: a carry in it
            # would pass for the loop's own. Schedules start fresh loops instead.
            self._invalid = (
                f"loops do not run on a cron schedule ({info.cron_schedule!r}): start them "
                "from a Temporal Schedule (`orga schedule create`), which starts a fresh loop "
                "each time. Nothing was run."
            )
        self._stream = WorkflowStream() if config.stream and self._invalid is None else None
        """Where the model's text is published while it arrives (``config.stream``)."""
        self._parts = LoopParts(Limits.of(config), config.provider, config.model)
        """What the loop works with: budgets, model, tools shown, critic, … (``loop_parts``)."""
        self.books = books = LoopBooks(config, self._parts.limits, started_at=workflow.now())
        """The loop's record of itself, and the desk where people answer it."""
        self.steering = Steering(books)
        """Messages people send while the loop runs (``steering``)."""
        self._thread = Thread(config.thread, books, self.steering) if config.thread else None
        """A conversation's turns, for loops with ``config.thread``."""
        if self._thread is not None and not loop.messages and loop.carry is None and not loop.fork:
            self._thread.wait_for_first()
        self._marks = ForkMarks()
        """Where each turn of this run ended (the ``fork_point`` query)."""
        self._turn_limits = self._parts.limits
        """The budgets of the loop (of each turn, in a thread) once it is set up."""
        self._misses = 0
        """Answers of a typed loop that did not match its ``output_schema``, this turn."""
        self.conversation = Conversation()
        """The durable conversation."""
        if config.system_prompt and loop.carry is None:
            self.conversation.append([Message(role="system", content=config.system_prompt)])
        self.conversation.append(loop.messages)
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
            max_concurrent=self._parts.limits.max_concurrent_tools,
            default_timeout=config.tool_timeout,
            approval_timeout=config.approval_timeout,
            max_payload_bytes=config.max_payload_bytes,
            record=books.record,
            stamp=books.stamp,
            gate=self._gate.decide_call,
            waiting_for_workers=books.waiting_for_workers,
            worker_wait_changed=books.worker_wait_changed,
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

    # ---- a thread's updates ----------------------------------------------------------------

    def check_turn(self, wait: TurnWait) -> None:
        """Raise ``ValueError`` unless the ``turn`` update can wait for ``wait.turn``."""
        self._a_thread().check_wait(wait)

    async def turn_result(self, wait: TurnWait) -> TurnResult:
        """Turn ``wait.turn``'s answer, once the thread has it."""
        return await self._a_thread().result_of(
            wait, lambda: self.books.status in ("completed", "failed", "cancelled")
        )

    def check_close(self, close: CloseThread) -> None:
        """Raise ``ValueError`` unless the thread can be closed."""
        self._a_thread().check_close(close)

    def close(self, close: CloseThread) -> ThreadClosed:
        return self._a_thread().close(close)

    def fork_point(self, ask: ForkPointAsk) -> ForkPoint:
        """This loop's state after turn ``ask.at`` (``orga fork``)."""
        return self._marks.point(ask, self.conversation, self._config)

    def _mark(self, *, answered: bool) -> None:
        """This turn ends here: note its state for a fork after it."""
        summary = self._summary
        evidence = self._parts.evidence
        self._marks.note(
            self.books,
            self.conversation,
            answered=answered,
            tools=self._tools,
            evidence=evidence.collection if evidence is not None else None,
            summary=(summary.text, summary.through, summary.unsummarised_through),
            calibration=self._calibration,
        )

    def _a_thread(self) -> Thread:
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
        if self._invalid is None:
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
            failure = self._timed_out()
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
            thread.begin()
            await self._turn(thread, first=False)
        return thread.last_finished()

    async def _turn(self, thread: Thread, *, first: bool) -> None:
        """One turn of a thread, within its budgets; a long history then starts afresh."""
        self._misses = 0
        self._parts.limits = self.books.limits = thread.limits(self._turn_limits)
        try:
            finished = await within(
                self._cycle(first=first), self.books, thread.deadline(self._turn_limits)
            )
        except TimeoutError:
            finished = self._turn_over(thread, self._timed_out())
        except BudgetExceeded as exceeded:
            finished = self._turn_over(thread, exceeded)
        thread.answer(finished)
        if continuation.should_continue_as_new(self.books, self._config):
            await self._continue_as_new()  # between turns: the next run waits on

    async def _cycle(self, *, first: bool = True) -> Finished:
        """Observe → Reason → Gate → Act, until an answer passes the gate."""
        config, books, parts = self._config, self.books, self._parts
        limits, evidence = parts.limits, parts.evidence
        if config.pre_hydration is not None and self._input.carry is None and first:
            await self._pre_hydrate()
        observing = Observing(books.iteration)
        while True:
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
                raise self._budget(
                    "max_iterations",
                    limits.max_iterations,
                    f"the loop reached max_iterations={limits.max_iterations} model calls "
                    f"{_of_which(others)}without a final answer",
                )
            books.iteration = reasoning.iteration
            routed = reasoning.route(await self._reason(reasoning))
            # Gate the answer: allowed ends the loop, denied goes back to the model.
            if isinstance(routed, AnswerPolicyCheck):
                value = None
                typed_first = config.output_schema is not None and workflow.patched(
                    GATE_TYPED_ANSWER
                )
                if typed_first:  # a typed answer, or a miss; the gate then judges the value
                    value, missed = await typed_answer(config, routed, self._misses)
                    if missed is not None:
                        self._misses += 1
                        observing = missed
                        continue
                    routed.answer = json.dumps(value, sort_keys=True, ensure_ascii=False)
                outcome = routed.gate(await self._gate_turn(routed))
                if isinstance(outcome, Answered) and self.steering.waiting:
                    observing = Observing(outcome.iteration, [outcome.message])
                    continue  # a person spoke while the answer was on its way: go on
                if isinstance(outcome, Answered):
                    if config.output_schema is not None and not typed_first:  # before the patch
                        value, missed = await typed_answer(config, outcome, self._misses)
                        if missed is not None:
                            self._misses += 1
                            observing = missed
                            continue
                    self.conversation.append([outcome.message])
                    self._mark(answered=True)
                    if evidence is not None and evidence.saturated:
                        snapshot = evidence.tracker.snapshot()
                        return Finished(outcome.output, "saturated", snapshot, value=value)
                    if parts.critic is None:
                        return Finished(outcome.output, "end_turn", value=value)
                    try:
                        reviewed = await review_answer(
                            parts.critic, self._task(), outcome.output, outcome.iteration, value
                        )
                    except BudgetExceeded as exceeded:  # the critic's review is the loop's spend
                        raise self._over(exceeded) from None
                    if isinstance(reviewed, Finished):
                        return dataclasses.replace(reviewed, value=value)
                    outcome = reviewed
                observing = outcome
                continue
            others = books.other_calls
            if books.iteration + others >= limits.max_iterations:
                raise self._budget(
                    "max_iterations",
                    limits.max_iterations,
                    f"the model asked for {len(routed.calls)} tool call(s) at iteration "
                    f"{books.iteration}, the last one max_iterations={limits.max_iterations} "
                    f"allows {_of_which(others)}— they were not run because no model call "
                    "would be left to read their results",
                )
            # Gate the calls (evidence calls are judged first), then Act on what passed.
            if evidence is not None and evidence.track(routed):
                return self._saturated(routed)
            dispatching = routed.gate(await self._gate_turn(routed))
            observing = await self._act(dispatching)
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
        request = InferenceRequest(
            provider=parts.provider,
            model=parts.model,
            iteration=reasoning.iteration,
            conversation=conversation,
            tools=list(parts.advertised),
            judged_tools=evidence_tools(self._tools.definitions, parts.advertised),
            max_output_tokens=config.max_output_tokens,
            temperature=config.temperature,
            context_token_budget=config.context_token_budget,
            context_strategy=config.context_strategy,
            token_calibration=self._calibration,
            max_response_bytes=config.max_payload_bytes,
            knowledge=knowledge,
            stream=self._stream is not None,
            gate=parts.gate_in_model_call,
            agent_id=config.agent_id,
            prompt_cache=config.prompt_cache,
            token_budget=parts.limits.max_total_tokens - books.usage.total_tokens,
            context_summary=self._summary.text,
            summarised_through=self._summary.through,
            output_schema=config.output_schema,
            constrain_output=constrains(
                structured_output=config.structured_output,
                tools_offered=bool(parts.advertised),
                misses=self._misses,
            ),
        )
        limit = parts.limits.max_total_tokens
        try:
            response = await self._call_model(request)
        except BudgetExceeded as refused:
            raise self._budget(
                "max_total_tokens",
                limit,
                f"the loop has {request.token_budget} of max_total_tokens={limit} tokens left "
                f"at iteration {reasoning.iteration}, not enough for its next model call: "
                f"{refused.message}",
            ) from None
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
        if response.budget_capped and response.stop_reason == "max_tokens":
            raise self._budget(
                "max_total_tokens",
                limit,
                f"the model's answer at iteration {books.iteration} was cut at the tokens left "
                f"of max_total_tokens={limit} ({books.usage.total_tokens} used)",
            )
        if books.usage.total_tokens > limit:
            raise self._budget(
                "max_total_tokens",
                limit,
                f"the loop used {books.usage.total_tokens} tokens, over max_total_tokens="
                f"{limit}, at iteration {books.iteration}",
            )
        if config.max_cost is not None:
            self._keep_max_cost(config.max_cost, response)
        thread = self._thread
        if thread is not None and thread.config.max_cost is not None:
            self._keep_max_cost(thread.config.max_cost, response, whole_thread=True)
        return response

    async def _call_model(self, request: InferenceRequest) -> InferenceResponse:
        """The model's answer; when the loop's model is unavailable after its retries (not
        for a request it refused), the next fallback's, which the loop keeps from then on."""
        parts, books = self._parts, self.books
        while True:
            try:
                return await call_model(
                    request,
                    self._config.model_timeout,
                    parts.model_task_queue,
                    waiting=books.waiting_for_workers,
                    waiting_changed=books.worker_wait_changed,
                )
            except ModelCallFailed as failed:
                details: object = failed.details[0] if failed.details else None
                kind = (
                    cast(dict[str, object], details).get("error_type")
                    if isinstance(details, dict)
                    else None
                )
                if kind not in _UNAVAILABLE or not parts.fallbacks:
                    raise
                provider, model = parts.fallbacks.pop(0)
                books.record(
                    ModelSwitched(
                        **books.stamp(),
                        from_provider=parts.provider,
                        from_model=parts.model,
                        to_provider=provider,
                        to_model=model,
                        error=failed.message,
                    )
                )
                parts.provider, parts.model = provider, model
                books.provider = provider
                request = request.model_copy(update={"provider": provider, "model": model})

    def _keep_max_cost(
        self, max_cost: float, response: InferenceResponse, *, whole_thread: bool = False
    ) -> None:
        """End the loop once what its calls cost passes ``max_cost`` (USD), or once a call's
        price is unknown: it cannot be kept then. In a thread, the config's ``max_cost`` is
        each turn's; ``whole_thread``: the thread's own (``ThreadConfig.max_cost``)."""
        usage, iteration = self.books.usage, self.books.iteration
        if self._thread is not None and not whole_thread:  # a thread's budgets are each turn's
            usage = usage.since(self._thread.spent_before)
        budget = "thread.max_cost" if whole_thread else "max_cost"
        if usage.unpriced_calls:
            raise self._budget(
                budget,
                max_cost,
                f"{budget}={max_cost:g} USD cannot be kept: the price of "
                + (
                    f"model {response.model!r}"
                    if response.usage.unpriced_calls
                    else "a model its critic, summaries or children called"
                )
                + " is unknown to the worker's price table (give it in "
                f"ORGA_MODEL_PRICES); {usage.cost_usd:.6f} USD counted so far, at iteration "
                f"{iteration}",
            )
        if usage.cost_usd > max_cost:
            spent = "the thread" if whole_thread else "the loop"
            raise self._budget(
                budget,
                max_cost,
                f"{spent} cost {usage.cost_usd:.6f} USD, over {budget}={max_cost:g} USD, at "
                f"iteration {iteration}",
            )

    async def _gate_turn(self, check: ToolPolicyCheck | AnswerPolicyCheck) -> PolicyResult:
        self.books.set_phase("policy_check")
        decided, self._decided = self._decided, None
        return await self._gate.decide(check.actions(), list(self._parts.advertised), decided)

    async def _act(self, dispatching: ToolDispatching) -> Observing:
        self.books.set_phase("dispatching")
        runner = ToolRunner(self._tools, self.books.iteration)
        await runner.run_turn(dispatching, list(self._parts.advertised))
        # Refused arguments (a 5 MB one) leave the conversation: no later call could pay for them.
        elide = dispatching.refused_arguments() and workflow.patched(ELIDE_REFUSED_ARGUMENTS)
        observed = dispatching.collect(elide)
        results = observed.new_messages[-1].tool_results
        self.books.observed(results)
        if self._parts.knowledge is not None:
            self._parts.knowledge.observed([p.call for p in dispatching.planned], results)
        return observed

    async def _pre_hydrate(self) -> None:
        assert self._config.pre_hydration is not None
        self.books.set_phase("observing")
        message = await pre_hydrate(
            self._config.pre_hydration,
            self.conversation.messages,
            tools=self._tools,
            gate=self._gate,
            books=self.books,
            advertised=list(self._parts.advertised),
        )
        if message is not None:
            self.conversation.append([message])

    def _saturated(self, check: ToolPolicyCheck) -> Finished:
        assert self._parts.evidence is not None
        closing, snapshot = self._parts.evidence.end_saturated(check)
        self.conversation.append(closing)
        return Finished(snapshot.render(), "saturated", snapshot)

    # ---- helpers ---------------------------------------------------------------------------

    async def _continue_as_new(self) -> None:
        # Messages that arrive while the run waits for its handlers are refused, to be sent
        # again to the next run: the carried conversation is sealed by its digest.
        self.steering.closed = "it is moving to its next run: send the message again"
        parts = self._parts
        collection = parts.evidence.collection if parts.evidence is not None else None
        thread = self._thread
        if thread is not None:
            thread.moving = True  # waiting `turn` updates let go: they ask the next run
        carry = continuation.carried(
            self._runs,
            self.books,
            self.conversation,
            self._tools,
            collection,
            self._calibration,
            summary=(self._summary.text, self._summary.through, self._summary.unsummarised_through),
            thread=thread.carry() if thread is not None else None,
        )
        # The next run keeps this run's gate, budgets, provider and model, whatever its
        # worker's defaults (its setup is resolved again, and can only narrow them).
        pinned = self._config.model_copy(
            update={
                "provider": parts.provider,
                "model": parts.model,
                "policy": self._gate.policy,
                **self._turn_limits.model_dump(),  # a thread's per turn, not shifted
            }
        )
        if self._stream is not None:  # release long-polling readers: they follow the next run
            self._stream.detach_pollers()
        await continuation.continue_as_new(pinned, self.conversation, carry)

    def _task(self) -> str:
        """What the loop was asked: its first user message."""
        first = next((m for m in self.conversation.messages if m.role == "user"), None)
        return first.content if first is not None else ""

    def _budget(self, budget: str, limit: float, message: str) -> BudgetExceeded:
        message += self._turn_note()
        return BudgetExceeded(message, {"budget": budget, "limit": limit, "state": self.state()})

    def _turn_note(self) -> str:
        return self._thread.describe() if self._thread is not None else ""

    def _timed_out(self) -> BudgetExceeded:
        limit = self._parts.limits.timeout.total_seconds()
        return BudgetExceeded(
            f"the loop ran out of time: timeout is {limit:g} s (config.timeout), reached at "
            f"iteration {self.books.iteration}{self._turn_note()}",
            {"budget": "timeout", "limit": limit, "state": self.state()},
        )

    def _turn_over(self, thread: Thread, exceeded: BudgetExceeded) -> Finished:
        """A thread's turn ran out of a budget: of its own, it ends unanswered (the model is
        told at its next turn) and the thread waits on; of the thread's, it ends the thread.

        Raises:
            BudgetExceeded: ``exceeded``, when it is the thread's budget (or before the patch).
        """
        details: object = exceeded.details[0] if exceeded.details else None
        named = (
            cast(dict[str, object], details).get("budget") if isinstance(details, dict) else None
        )
        if thread.binds(str(named or "max_total_tokens"), self._turn_limits) or not (
            workflow.patched(TURN_BUDGET_ENDS_TURN)
        ):
            raise exceeded
        self.conversation.append(
            [
                Message(
                    role="user",
                    content=f"[orga] Your last turn ended unanswered: {exceeded.message}",
                )
            ]
        )
        return Finished("", "budget_exceeded", unanswered=exceeded.message)

    def _over(self, exceeded: BudgetExceeded) -> BudgetExceeded:
        """``exceeded`` (raised by a part of the loop) with the limit and the loop's state."""
        details: object = exceeded.details[0] if exceeded.details else None
        named = (
            cast(dict[str, object], details).get("budget") if isinstance(details, dict) else None
        )
        budget = str(named or "max_total_tokens")
        limits = self._parts.limits
        limit = limits.max_iterations if budget == "max_iterations" else limits.max_total_tokens
        return self._budget(budget, limit, exceeded.message)


_UNAVAILABLE: Final = frozenset({"ProviderUnavailable", "TimeoutError"})
"""Failures of a model call after its retries that a fallback model may not share (5xx, 429,
network errors, timeouts); never a refusal of the request itself (4xx, bad credentials)."""


def _of_which(others: int) -> str:
    return (
        f"({others} of them by its critic and delegated children or its context summaries) "
        if others
        else ""
    )

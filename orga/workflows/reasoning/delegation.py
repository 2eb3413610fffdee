"""Delegation: a ``delegate`` call runs a child loop of another agent on a shared budget.

Workflow code. The call has passed the gate like any tool call (Cedar resource
``Tool::"delegate"``, its arguments in the context). Then the child's budget is carved from
what the parent has left — tokens and model calls not yet spent (by the parent, its critic or
earlier children) *or reserved by a sibling running in the same turn*, and working time —
capped by the child agent's own ceilings and by what the call asks for; a child that would get
less than ``MIN_DELEGATION_TOKENS`` tokens or no model call is refused. The child is a
``ReasoningLoop`` child workflow (``<parent>/delegate/<call id>``) of that agent at depth + 1:
with that agent's own tools within what the client at the top of the tree named (as the worker
resolved them for the parent: ``LoopSetup.delegate_tools``; the call may ask for fewer, never
others; ``LoopConfig.client_tools`` carries the client's narrowing down the tree), that
agent's gate *and* the parent's and every ancestor's
(``LoopConfig.ancestor_gates``: each judges the child's calls as its own agent, a forbid
anywhere up the tree wins), its models and system prompt; cancelling the parent cancels it
(and waits). What it spent — tokens and model calls — is charged to the parent when it
returns; the answer, or its typed failure, is the call's result. Several delegations of one
turn run in parallel like any calls. A delegate at an A2A endpoint (``AgentSpec.a2a``) gets
the same share; the task goes there (``remote_delegation``), charged what the remote reports.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import Any, cast

from pydantic import ValidationError
from temporalio import workflow
from temporalio.exceptions import ActivityError, ChildWorkflowError
from temporalio.workflow import ChildWorkflowCancellationType

from orga.contracts.agents import AgentSpec
from orga.contracts.config import Limits, LoopConfig, LoopInput
from orga.contracts.conversation import Message, ToolCall, ToolResult
from orga.contracts.delegation import (
    DELEGATE_TOOL,
    MIN_DELEGATION_TOKENS,
    DelegationArguments,
    DelegationRecord,
    DelegationStatus,
    RemoteDelegation,
    RemoteWaits,
)
from orga.contracts.errors import describe_validation_error
from orga.contracts.inference import Usage
from orga.contracts.journal import DelegationFinished, DelegationStarted
from orga.contracts.messages import LOOP_WORKFLOW
from orga.contracts.policy import AncestorGate
from orga.contracts.principals import Principal, PrincipalClaim
from orga.contracts.state import LoopResult
from orga.contracts.vocabulary import PolicyMode
from orga.core.agents import delegation_bound
from orga.core.ids import a2a_context
from orga.workflows.reasoning.call_executor import error_result
from orga.workflows.reasoning.loop_books import LoopBooks
from orga.workflows.reasoning.remote_delegation import ask_remote, remote_result
from orga.workflows.shared.failures import failure_of

__all__ = ["Delegations", "introduction"]


def introduction(delegates: Sequence[AgentSpec], tools: Mapping[str, Sequence[str]]) -> Message:
    """The system message that tells the model whom it may hand work to, and what each can
    do: its description and the tools it will have."""
    lines = [f"You may hand self-contained tasks to these agents with the {DELEGATE_TOOL} tool:"]
    for agent in delegates:
        has = tools.get(agent.id) or []
        with_tools = f"tools: {', '.join(has)}" if has else "no tools: it can only reason"
        if agent.a2a is not None:
            with_tools = "a remote agent, with tools of its own"
        lines.append(f"- {agent.id}: {agent.description or 'no description'} ({with_tools})")
    lines.append(
        "Each works on its own with the tools listed (or fewer, if you name them), on part of "
        "your remaining budget, and answers once; its tokens and model calls count against "
        "your budget."
    )
    return Message(role="system", content="\n".join(lines))


class Delegations:
    """The delegations of one loop."""

    def __init__(
        self,
        *,
        workflow_id: str,
        config: LoopConfig,
        books: LoopBooks,
        limits: Callable[[], Limits],
        delegates: Sequence[AgentSpec],
        tools: Mapping[str, Sequence[str]],
        policy: PolicyMode,
        principal: PrincipalClaim | None = None,
        charged_to: Principal | None = None,
    ) -> None:
        self._workflow_id = workflow_id
        self._principal = principal
        """What a child is told it runs for: this loop's principal (``core.principals``)."""
        self._charged_to = charged_to
        """Whose spend ledger a remote delegate's cost goes to: this loop's principal."""
        self._config = config
        self._gates = [
            AncestorGate(agent_id=config.agent_id, policy=policy),
            *config.ancestor_gates,
        ]
        """The gates a child runs under besides its own: this loop's and its ancestors'."""
        self._books = books
        self._limits = limits
        self._delegates = {a.id: a for a in delegates}
        self._tools = {agent: list(names) for agent, names in tools.items()}
        self._reserved_tokens = 0
        self._reserved_cost = 0.0
        self._reserved_iterations = 0
        self._unstarted = 0
        """``delegate`` calls of this turn that have not been given a budget yet."""

    def plan(self, count: int) -> None:
        """A turn is about to run ``count`` delegations: by default they share what is left."""
        self._unstarted = count

    async def run(self, call: ToolCall) -> ToolResult:
        """The result of one ``delegate`` call (raises only on cancellation)."""
        try:
            asked = DelegationArguments.model_validate_json(call.arguments)
        except ValidationError as error:
            return error_result(
                call,
                "invalid_arguments",
                f"The arguments of {DELEGATE_TOOL} are invalid: "
                f"{describe_validation_error(error)}. Call it again with agent and task.",
            )
        spec = self._delegates.get(asked.agent)
        if spec is None:
            return error_result(
                call,
                "denied",
                f"You may not delegate to {asked.agent!r}; you may delegate to: "
                f"{', '.join(self._delegates)}.",
            )
        has = self._tools.get(asked.agent, [])
        tools = has if asked.tools is None else list(dict.fromkeys(asked.tools))
        others = [name for name in tools if name not in has]
        if others:
            return error_result(
                call,
                "denied",
                f"{asked.agent!r} may not use {others!r}; its tools: {has!r}. Name fewer of "
                "them, or none for all.",
            )
        books, limits = self._books, self._limits()
        left_tokens = limits.max_total_tokens - books.usage.total_tokens - self._reserved_tokens
        # One model call stays with the parent, to read the answer.
        left_calls = (
            limits.max_iterations
            - books.iteration
            - books.other_calls
            - 1
            - self._reserved_iterations
        )
        left_seconds = limits.timeout.total_seconds() - books.working_seconds()
        share = max(1, self._unstarted)  # siblings of this turn not yet started share it
        self._unstarted = max(0, self._unstarted - 1)
        tokens = min(
            v
            for v in (left_tokens, asked.max_tokens or left_tokens // share, spec.max_total_tokens)
            if v is not None
        )
        calls = min(
            v
            for v in (left_calls, asked.max_iterations or left_calls // share, spec.max_iterations)
            if v is not None
        )
        if spec.timeout is not None:
            left_seconds = min(left_seconds, spec.timeout.total_seconds())
        money: float | None = None  # the parent's max_cost, shared as its tokens are
        if self._config.max_cost is not None:
            left_money = self._config.max_cost - books.usage.cost_usd - self._reserved_cost
            money = left_money / share
        if (
            tokens < MIN_DELEGATION_TOKENS
            or calls < 1
            or left_seconds < 1
            or (money is not None and money <= 0)
        ):
            why = (
                f"the parent has {max(left_tokens, 0)} token(s), {max(left_calls, 0)} model "
                f"call(s) and {max(left_seconds, 0):.0f} s left to share (a child needs at least "
                f"{MIN_DELEGATION_TOKENS} tokens, one model call and a second)"
            )
            if money is not None and money <= 0:
                why = f"the parent has no money left of its max_cost={self._config.max_cost:g} USD"
            self._finish(call, asked.agent, None, "refused", Usage(), 0, why)
            return error_result(
                call, "denied", f"The delegation to {asked.agent!r} was refused: {why}."
            )
        if spec.a2a is not None:
            return await self._remote(call, asked, tokens, calls, left_seconds, money)
        return await self._child(call, asked, tools, tokens, calls, left_seconds, money)

    async def _remote(
        self,
        call: ToolCall,
        asked: DelegationArguments,
        tokens: int,
        calls: int,
        seconds: float,
        money: float | None,
    ) -> ToolResult:
        """A delegation to an agent at an A2A endpoint (see the module)."""
        where = f"a2a:{a2a_context(self._workflow_id, call.id)}"
        self._started(call, asked.agent, where, tokens, calls, seconds, money)
        try:
            answer = await ask_remote(
                RemoteDelegation(
                    agent=asked.agent,
                    task=asked.task,
                    call_id=call.id,
                    deadline=workflow.now() + timedelta(seconds=seconds),
                    max_tokens=tokens,
                    max_cost=money,
                    principal=self._charged_to,
                ),
                timedelta(seconds=seconds),
                f"{asked.agent} (remote, delegated by {self._config.agent_id})",
            )
        except ActivityError as error:
            failed = failure_of(error)
            why = "cancelled" if failed.cancelled else f"{failed.kind}: {failed.message}"
            self._finish(call, asked.agent, where, "failed", Usage(), 0, why)
            if failed.cancelled:
                raise asyncio.CancelledError from error
            said = f"The delegated task to {asked.agent!r} failed ({why})"
            return error_result(
                call, "unknown" if failed.kind == "OutcomeUnknown" else "failed", said
            )
        finally:
            self._reserved(-tokens, -calls, -(money or 0.0))
        unreported = None if answer.reported else "the remote reported no cost: none charged"
        self._finish(
            call, asked.agent, where, "completed", answer.usage, answer.model_calls, unreported
        )
        return remote_result(call, answer)

    async def _child(
        self,
        call: ToolCall,
        asked: DelegationArguments,
        tools: list[str],
        tokens: int,
        calls: int,
        seconds: float,
        money: float | None = None,
    ) -> ToolResult:
        child_id = f"{self._workflow_id}/delegate/{call.id}"
        self._started(call, asked.agent, child_id, tokens, calls, seconds, money)
        try:
            result = await workflow.execute_child_workflow(
                LOOP_WORKFLOW,
                LoopInput(
                    messages=[Message(role="user", content=asked.task)],
                    config=LoopConfig(
                        agent_id=asked.agent,
                        tools=tools,
                        max_total_tokens=tokens,
                        max_iterations=calls,
                        max_cost=money,
                        timeout=timedelta(seconds=seconds),
                        delegation_depth=self._config.delegation_depth + 1,
                        ancestor_gates=self._gates,
                        client_tools=delegation_bound(self._config),
                        max_delegation_depth=min(
                            self._limits().max_delegation_depth,
                            self._delegates[asked.agent].max_delegation_depth,
                        ),
                    ),
                    principal=self._principal,
                ),
                id=child_id,
                result_type=LoopResult,
                memo=workflow.memo() or None,
                cancellation_type=ChildWorkflowCancellationType.WAIT_CANCELLATION_COMPLETED,
                static_summary=f"{asked.agent} (delegated by {self._config.agent_id})",
            )
        except ChildWorkflowError as error:
            if failure_of(error).cancelled:
                self._finish(call, asked.agent, child_id, "failed", Usage(), 0, "cancelled")
                raise asyncio.CancelledError from error
            kind, message, spent, spent_calls = _failure(error, tokens, calls)
            self._finish(
                call, asked.agent, child_id, "failed", spent, spent_calls, f"{kind}: {message}"
            )
            return error_result(
                call, "failed", f"The delegated task to {asked.agent!r} failed ({kind}): {message}"
            )
        finally:
            self._reserved(-tokens, -calls, -(money or 0.0))
        spent_calls = max(result.model_calls, result.iterations)  # results before model_calls
        self._finish(call, asked.agent, child_id, "completed", result.usage, spent_calls, None)
        return ToolResult(call_id=call.id, name=call.name, content=result.output)

    def _started(
        self,
        call: ToolCall,
        agent: str,
        where: str,
        tokens: int,
        calls: int,
        seconds: float,
        money: float | None,
    ) -> None:
        """Record a delegation that begins, and reserve its share until it ends."""
        books = self._books
        books.record(
            DelegationStarted(
                **books.stamp(),
                call_id=call.id,
                agent=agent,
                workflow_id=where,
                max_tokens=tokens,
                max_iterations=calls,
                timeout_seconds=seconds,
            )
        )
        books.delegations.append(
            DelegationRecord(
                call_id=call.id,
                agent=agent,
                workflow_id=where,
                status="running",
                max_tokens=tokens,
                max_iterations=calls,
            )
        )
        self._reserved(tokens, calls, money or 0.0)

    def _reserved(self, tokens: int, calls: int, money: float) -> None:
        self._reserved_tokens += tokens
        self._reserved_iterations += calls
        self._reserved_cost += money

    def _finish(
        self,
        call: ToolCall,
        agent: str,
        child_id: str | None,
        status: DelegationStatus,
        usage: Usage,
        calls: int,
        error: str | None,
    ) -> None:
        """Charge what the child spent (tokens and model calls), and record how it went."""
        books = self._books
        books.remote_waits(RemoteWaits(call_id=call.id))  # a remote one waits no longer
        if usage.total_tokens or calls:
            books.charge(usage, calls)
        books.record(
            DelegationFinished(
                **books.stamp(),
                call_id=call.id,
                agent=agent,
                workflow_id=child_id,
                status=status,
                usage=usage,
                error=error,
            )
        )
        previous = next((r for r in books.delegations if r.call_id == call.id), None)
        record = DelegationRecord(
            call_id=call.id,
            agent=agent,
            workflow_id=child_id or "",
            status=status,
            max_tokens=previous.max_tokens if previous else 0,
            max_iterations=previous.max_iterations if previous else 0,
            usage=usage,
            error=error,
        )
        books.delegations = [r for r in books.delegations if r.call_id != call.id] + [record]


def _failure(error: ChildWorkflowError, budget: int, calls: int) -> tuple[str, str, Usage, int]:
    """The child's failure type and message, and what it spent (tokens, model calls): from its
    failure's details when they carry its state, else its whole budget (a child may not seem
    cheaper than it could have been)."""
    failure = failure_of(error)
    usage = Usage(total_tokens=budget)
    details: object = failure.details[0] if failure.details else None
    state = cast(dict[str, Any], details).get("state") if isinstance(details, dict) else None
    if isinstance(state, dict):
        held = cast(dict[str, Any], state)
        spent = held.get("usage")
        if isinstance(spent, dict):
            usage = Usage.model_validate(spent)
        counted = held.get("model_calls") or held.get("iteration")
        if isinstance(counted, int):
            calls = counted
    return failure.kind, failure.message, usage, calls

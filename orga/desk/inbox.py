"""What waits for a person, across loops and tasks: the inbox the CLI, the desk page and
``orga mcp`` list.

``inbox`` lists every item a person can act on — approvals, escalations, answers to review,
threads waiting for a message, calls waiting for a worker with their tool — each with the exact
``orga`` commands that act on it; a workflow whose state cannot be read is listed as such,
without hiding the others.
"""

from __future__ import annotations

import asyncio
import re
import shlex
from collections.abc import Collection
from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from temporalio.client import Client
from temporalio.service import RPCError

from orga.contracts import search_attributes as sa
from orga.contracts.approvals import PendingEscalation
from orga.contracts.messages import LOOP_WORKFLOW, TASK_WORKFLOW
from orga.contracts.principals import NAME_PATTERN
from orga.contracts.state import LoopState
from orga.contracts.task import TaskState
from orga.desk.facts import DeskError, read_state
from orga.desk.inbox_text import decided_by
from orga.runtime.pause_targets import Pause, split_target

__all__ = ["InboxItem", "ItemKind", "inbox"]

ItemKind = Literal[
    "approval", "escalation", "review", "message", "worker", "paused", "remote", "unreadable"
]
"""What an inbox item is: a decision (approval, escalation, review), a thread waiting for its
next message, a call waiting for a worker or held by a pause, a remote agent's task waiting for
a person at its endpoint (shown: they decide there), or a workflow not read."""


class InboxItem(BaseModel):
    """One thing a person can act on (or a workflow whose waiting items cannot be read)."""

    model_config = ConfigDict(frozen=True)

    kind: ItemKind
    workflow_id: str
    workflow_type: str
    item_id: str | None = None
    """The call id (approval) or escalation id (escalation)."""
    tool: str | None = None
    arguments: str | None = None
    reason: str | None = None
    """Why it waits: the gate's reason (approval) or the failure (escalation)."""
    since: datetime | None = None
    options: list[str] = Field(default_factory=list[str])
    """What the person may answer."""
    commands: list[str] = Field(default_factory=list[str])
    """The exact ``orga`` commands that act on it."""
    error: str | None = None
    """Why the workflow's state could not be read (``unreadable``)."""
    principal: str | None = None
    """Whom the workflow runs for (``ann@acme``; ``(claimed)`` where no issuer vouched)."""
    decided_by: str | None = None
    """Of an approval, who may decide and what it needs: ``signed by an enrolled approver``
    (approvers are enrolled), or ``unverified`` (none are: the name recorded is the caller's
    claim); and how many approvals it still needs, when more than one."""
    pause: str | None = None
    """Of a paused item, the pause that holds it (``tool:issue_refund``, ``agent:NAME``,
    ``loop:ID``), read from its reason; None where the reason names none."""


def _approval_commands(workflow_id: str, call_id: str) -> list[str]:
    ids = f"{shlex.quote(workflow_id)} {shlex.quote(call_id)}"
    return [f"orga approve {ids} --reason '…'", f"orga deny {ids} --reason '…'"]


def _resume_commands(target: str | None) -> list[str]:
    """The command that ends ``target``'s pause; without one, the command that lists the
    pauses (never a guessed one)."""
    parts = split_target(target) if target is not None else None
    if parts is None:
        return ["orga pause"]
    kind, name = parts
    named = shlex.quote(name) if kind == "loop" else f"--{kind} {shlex.quote(name)}"
    return [f"orga resume {named}"]


def _escalation_commands(workflow_id: str, escalation: PendingEscalation) -> list[str]:
    ids = f"{shlex.quote(workflow_id)} {shlex.quote(escalation.escalation_id)}"
    commands: list[str] = []
    for action in escalation.options:
        extra = " --result '…'" if action == "result" else ""
        commands.append(f"orga resolve {ids} --action {action}{extra} --reason '…'")
    return commands


def _items_of(
    workflow_id: str, workflow_type: str, state: LoopState | TaskState
) -> list[InboxItem]:
    items: list[InboxItem] = []
    for approval in state.pending_approvals:
        items.append(
            InboxItem(
                kind="approval",
                workflow_id=workflow_id,
                workflow_type=workflow_type,
                item_id=approval.call_id,
                tool=approval.tool,
                arguments=approval.arguments,
                reason=approval.reason,
                since=approval.since,
                options=["approve", "deny"],
                commands=_approval_commands(workflow_id, approval.call_id),
                decided_by=decided_by(approval),
            )
        )
    for remote in state.delegations if isinstance(state, LoopState) else []:
        if remote.waiting is not None:
            items.append(
                InboxItem(
                    kind="remote",
                    workflow_id=workflow_id,
                    workflow_type=workflow_type,
                    item_id=remote.call_id,
                    tool="delegate",
                    reason=f"the remote agent {remote.agent!r} waits for a person at its "
                    f"endpoint, who decides there: {remote.waiting}",
                    commands=[f"orga state {shlex.quote(workflow_id)}"],
                )
            )
    for tool in state.waiting_for_workers if isinstance(state, LoopState) else []:
        items.append(
            InboxItem(
                kind="worker",
                workflow_id=workflow_id,
                workflow_type=workflow_type,
                item_id=f"tool:{tool}",
                tool=tool,
                reason=f"waiting for a worker with `{tool}`: the workers of its task queue that "
                "took the call do not register it; start one with the tool's module "
                "(ORGA_TOOL_MODULES), or give every worker the same tools",
                commands=[f"orga state {shlex.quote(workflow_id)}"],
            )
        )
    for call_id, why in state.paused_calls.items():
        target = Pause.target_in(why)
        kind, _, name = (target or "").partition(":")
        items.append(
            InboxItem(
                kind="paused",
                workflow_id=workflow_id,
                workflow_type=workflow_type,
                item_id=call_id,
                tool=name if kind == "tool" else None,
                reason=why,
                since=Pause.since_in(why),
                commands=_resume_commands(target),
                pause=target,
            )
        )
    thread = state.thread if isinstance(state, LoopState) else None
    if thread is not None and thread.waiting_for_message and thread.ended is None:
        ids = shlex.quote(workflow_id)
        last = thread.last_turn
        until = thread.idle_until.isoformat(timespec="seconds") if thread.idle_until else None
        items.append(
            InboxItem(
                kind="message",
                workflow_id=workflow_id,
                workflow_type=workflow_type,
                item_id=f"message#{thread.turn + 1}",
                tool="(thread)",
                arguments=last.output if last is not None else "",
                reason=f"the thread waits for message {thread.turn + 1}"
                + (f"; it ends if nobody writes by {until}" if until else ""),
                since=last.ended_at if last is not None else None,
                options=["say", "close"],
                commands=[f"orga say {ids} '…'", f"orga chat {ids}", f"orga close {ids}"],
            )
        )
    review = state.pending_review if isinstance(state, LoopState) else None
    if review is not None:
        ids = shlex.quote(workflow_id)
        items.append(
            InboxItem(
                kind="review",
                workflow_id=workflow_id,
                workflow_type=workflow_type,
                item_id=f"answer#{review.round}",
                tool="(final answer)",
                arguments=review.answer,
                reason=f"review {review.round}: approve the answer, or ask for a revision",
                since=review.since,
                options=["approve", "revise"],
                commands=[
                    f"orga review {ids} --verdict approve",
                    f"orga review {ids} --verdict revise --feedback '…'",
                ],
            )
        )
    for escalation in state.pending_escalations:
        items.append(
            InboxItem(
                kind="escalation",
                workflow_id=workflow_id,
                workflow_type=workflow_type,
                item_id=escalation.escalation_id,
                tool=escalation.tool,
                arguments=escalation.arguments,
                reason=escalation.error,
                since=escalation.since,
                options=list(escalation.options),
                commands=_escalation_commands(workflow_id, escalation),
            )
        )
    if state.principal is not None:
        who = state.principal.describe()
        items = [item.model_copy(update={"principal": who}) for item in items]
    return items


INBOX_QUERY_TIMEOUT = 3.0
"""Seconds the inbox waits for one workflow's state: a workflow whose worker is gone shows as
unreadable after this, and the others are not held up longer (the desk page polls every 3 s)."""


async def inbox(
    client: Client,
    *,
    limit: int = 100,
    principal: str | None = None,
    kinds: Collection[ItemKind] | None = None,
) -> list[InboxItem]:
    """Everything waiting for a person, oldest first — threads idle for their next message
    after what waits for a decision, so a day of idle threads does not bury a refund; with
    ``principal``, only what waits in that user's loops (``OrgaPrincipal``); with ``kinds``,
    only items of those kinds (and only workflows that can hold them are listed).

    Raises:
        DeskError: Temporal's visibility could not be listed, or ``principal`` is not a
            plain name.
    """
    query = (
        f"WorkflowType IN ('{LOOP_WORKFLOW}', '{TASK_WORKFLOW}') AND ExecutionStatus = 'Running' "
        "AND OrgaStatus IN ('awaiting_approval', 'awaiting_review', 'awaiting_message', "
        "'awaiting_worker', 'awaiting_remote', 'paused')"
    )
    if kinds is not None and "message" not in kinds:  # idle threads take no room in `limit`
        query = query.replace("'awaiting_message', ", "")
    if principal is not None:
        if not re.fullmatch(NAME_PATTERN, principal):  # plain names only: nothing to escape
            raise DeskError(f"{principal!r} is not a user's name")
        query += f" AND {sa.PRINCIPAL.name} = '{principal}'"
    found: list[InboxItem] = []
    try:
        executions = [e async for e in client.list_workflows(query, limit=limit)]
    except RPCError as error:
        raise DeskError(f"listing waiting workflows failed: {error.message}") from error

    served: dict[str, bool] = {}

    async def items(workflow_id: str, workflow_type: str) -> list[InboxItem]:
        result_type = TaskState if workflow_type == TASK_WORKFLOW else LoopState
        try:
            state = await read_state(
                client,
                workflow_id,
                result_type,
                workflow_type,
                timeout=INBOX_QUERY_TIMEOUT,
                served=served,
            )
        except DeskError as error:
            return [
                InboxItem(
                    kind="unreadable",
                    workflow_id=workflow_id,
                    workflow_type=workflow_type,
                    error=str(error),
                )
            ]
        return _items_of(workflow_id, workflow_type, state)

    batches = await asyncio.gather(*(items(e.id, e.workflow_type) for e in executions))
    for batch in batches:
        found.extend(i for i in batch if kinds is None or i.kind in kinds)
    epoch = datetime.min.replace(tzinfo=UTC)
    return sorted(
        found,
        key=lambda i: (i.kind == "message", i.since or epoch, i.workflow_id, i.item_id or ""),
    )

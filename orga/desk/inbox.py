"""The operator's desk: what waits for a person, across loops and tasks, and answering it safely.

Client-side operations shared by the ``orga`` command and the ``orga desk`` web page:

* ``inbox`` lists every item a person can act on — approvals and escalations, in loops and in
  tasks — with the exact command that acts on it; a workflow whose state cannot be read is
  listed as such, without hiding the others;
* ``approve`` and ``resolve`` send a decision through the workflow's update (whose validator may
  refuse it), after checking what a person would otherwise find out the hard way: the workflow
  exists and still runs, a worker polls its task queue, and an answer comes within ``wait``;
* ``who_decides`` finds the identity every decision is recorded with, or refuses.

Over 400 lines: the inbox and the decisions over one set of Temporal calls (describe, the
worker check, queries, updates), which the CLI, the desk page and ``orga mcp`` all share.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import json
import shlex
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, Final, Literal, TypeVar

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from pydantic import BaseModel, ConfigDict, Field
from temporalio.client import (
    Client,
    WorkflowExecutionDescription,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowQueryFailedError,
    WorkflowUpdateFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)
from temporalio.exceptions import ApplicationError, FailureError
from temporalio.service import RPCError, RPCStatusCode

from orga.contracts.approvals import (
    ApprovalDecision,
    ApprovalRecord,
    DecisionChannel,
    EscalationAction,
    EscalationRecord,
    EscalationResolution,
    PendingApproval,
    PendingEscalation,
)
from orga.contracts.conversation import MessageAccepted, UserMessage
from orga.contracts.critic import Review, Verdict
from orga.contracts.messages import (
    APPROVE_UPDATE,
    CLOSE_UPDATE,
    MESSAGE_UPDATE,
    RESOLVE_ESCALATION,
    REVIEW_UPDATE,
    STATE_QUERY,
    TURN_UPDATE,
)
from orga.contracts.state import LoopState
from orga.contracts.task import TaskState
from orga.contracts.threads import (
    THREAD_MOVED,
    CloseThread,
    ThreadClosed,
    TurnResult,
    TurnWait,
)
from orga.runtime.approver_keys import ApproverKeyError, load_key, sign_decision
from orga.runtime.presence import presence, start_hint
from orga.runtime.settings import Settings

__all__ = [
    "KINDS",
    "LOOP",
    "TASK",
    "DeskError",
    "InboxItem",
    "WorkflowFacts",
    "approval_decision",
    "approve",
    "await_turn",
    "cancel",
    "close_thread",
    "decided_by",
    "describe",
    "edited_arguments",
    "inbox",
    "of_kind",
    "read_state",
    "resolve",
    "said",
    "send_message",
    "signing_key",
    "wait_for_turn",
    "waiting_call",
    "who_decides",
]

LOOP: Final = "ReasoningLoop"
TASK: Final = "Task"
KINDS: Final = {"loop": LOOP, "task": TASK}
"""What people call each workflow type."""

_M = TypeVar("_M", bound=BaseModel)


class DeskError(Exception):
    """A refusal to report in one line: nothing was recorded."""


class WorkflowFacts(BaseModel):
    """What Temporal itself records of a workflow (no worker needed)."""

    workflow_id: str
    workflow_type: str
    status: str
    """Temporal's execution status: ``running``, ``completed``, ``failed``, …"""
    task_queue: str
    closed_at: datetime | None = None


class InboxItem(BaseModel):
    """One thing a person can act on (or a workflow whose waiting items cannot be read)."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["approval", "escalation", "review", "message", "worker", "unreadable"]
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
    decided_by: str | None = None
    """Of an approval, who may decide and what it needs: ``signed by an enrolled approver``
    (approvers are enrolled), or ``unverified`` (none are: the name recorded is the caller's
    claim); and how many approvals it still needs, when more than one."""


def who_decides(explicit: str | None, env: Mapping[str, str] | None = None) -> str:
    """The identity a decision is recorded with: ``explicit``, else ``ORGA_APPROVER``, else the
    operating-system user.

    Raises:
        DeskError: none of them names anybody (a container without a user, say).
    """
    for candidate in (explicit, Settings.from_env(env).approver):
        if candidate and candidate.strip():
            return candidate.strip()
    try:
        user = getpass.getuser()
    except (OSError, KeyError):  # KeyError before Python 3.13: no passwd entry for the uid
        user = ""
    if user.strip():
        return user.strip()
    raise DeskError(
        "who is deciding? Nothing names you: pass --approver NAME or set ORGA_APPROVER "
        "(the operating system has no user name for this process either). orga never records "
        "a decision without a name."
    )


async def describe(client: Client, workflow_id: str) -> WorkflowFacts:
    """Type, status and task queue of a workflow.

    Raises:
        DeskError: there is no such workflow, or Temporal refused to say.
    """
    handle = client.get_workflow_handle(workflow_id)
    try:
        description = await handle.describe()
    except RPCError as error:
        raise _refused(error, workflow_id, client.namespace) from error
    return _facts(description)


async def of_kind(client: Client, workflow_id: str, kind: Literal["loop", "task"]) -> WorkflowFacts:
    """``describe``, refusing (with the right command) a workflow of the other kind.

    Raises:
        DeskError: no such workflow, or it is not a ``kind``.
    """
    facts = await describe(client, workflow_id)
    if facts.workflow_type == KINDS[kind]:
        return facts
    hints = {LOOP: f"use `orga state {workflow_id}`", TASK: f"use `orga task state {workflow_id}`"}
    hint = hints.get(facts.workflow_type, f"not an orga {kind}")
    article = "a loop" if facts.workflow_type == LOOP else f"a {facts.workflow_type}"
    raise DeskError(f"{workflow_id!r} is {article}: {hint}")


def _facts(description: WorkflowExecutionDescription) -> WorkflowFacts:
    status = description.status
    return WorkflowFacts(
        workflow_id=description.id,
        workflow_type=description.workflow_type,
        status=status.name.lower() if status is not None else "unknown",
        task_queue=description.task_queue,
        closed_at=description.close_time,
    )


def _refused(error: RPCError, workflow_id: str, namespace: str) -> DeskError:
    if error.status == RPCStatusCode.NOT_FOUND:
        return DeskError(f"there is no workflow {workflow_id!r} in namespace {namespace!r}")
    return DeskError(f"Temporal refused the request for {workflow_id!r}: {error.message}")


async def read_state(
    client: Client,
    workflow_id: str,
    result_type: type[_M],
    workflow_type: str,
    *,
    timeout: float = 10.0,
    served: dict[str, bool] | None = None,
) -> _M:
    """The ``state`` query of a workflow of ``workflow_type`` (a worker answers it).

    ``served``: what is known of which task queues a worker serves (filled as it is learnt, so
    a listing of many workflows asks once per queue).

    Raises:
        DeskError: no such workflow, no worker serves its task queue (said at once, without
            waiting for the query), none answered within ``timeout`` seconds, or the answer is
            not a ``result_type`` (a worker running other code).
    """
    facts = await describe(client, workflow_id)
    known = {} if served is None else served
    if facts.task_queue not in known:
        known[facts.task_queue] = bool(await presence(client, facts.task_queue))
    if not known[facts.task_queue]:
        raise DeskError(
            f"no worker is polling task queue {facts.task_queue!r} to answer for "
            f"{workflow_type} {workflow_id!r}: start one there ({start_hint(facts.task_queue)})"
        )
    handle = client.get_workflow_handle(workflow_id)
    try:
        return await handle.query(
            STATE_QUERY, result_type=result_type, rpc_timeout=timedelta(seconds=timeout)
        )
    except RPCError as error:
        if error.status == RPCStatusCode.NOT_FOUND:
            raise _refused(error, workflow_id, client.namespace) from error
        raise DeskError(
            f"no worker answers for {workflow_type} {workflow_id!r}: {error.message}"
        ) from error
    except WorkflowQueryFailedError as error:
        raise DeskError(f"the state query of {workflow_id!r} failed: {error.message}") from error
    except ValueError as error:  # pydantic's ValidationError: an answer of another shape
        first = str(error).splitlines()[0]
        raise DeskError(
            f"the state of {workflow_id!r} is not a {workflow_type}'s ({first}); is its worker "
            "running another version of orga?"
        ) from error


# ---- the inbox ---------------------------------------------------------------------------


def _approval_commands(workflow_id: str, call_id: str) -> list[str]:
    ids = f"{shlex.quote(workflow_id)} {shlex.quote(call_id)}"
    return [f"orga approve {ids} --reason '…'", f"orga deny {ids} --reason '…'"]


def decided_by(approval: PendingApproval) -> str:
    """Who may decide on ``approval`` and what it still needs, for a person to read."""
    said = (
        "a decision signed by an enrolled approver (ORGA_APPROVER_KEY)"
        if approval.signatures_required
        else "unverified: no approvers are enrolled, so the name recorded is the caller's claim"
    )
    if approval.approvals_needed > 1:
        left = approval.approvals_needed - len(approval.approved_by)
        so_far = f" (approved by {', '.join(approval.approved_by)})" if approval.approved_by else ""
        said += f"; {left} more of {approval.approvals_needed} distinct approvers{so_far}"
    return said


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
    return items


INBOX_QUERY_TIMEOUT = 3.0
"""Seconds the inbox waits for one workflow's state: a workflow whose worker is gone shows as
unreadable after this, and the others are not held up longer (the desk page polls every 3 s)."""


async def inbox(client: Client, *, limit: int = 100) -> list[InboxItem]:
    """Everything waiting for a person, oldest first.

    Raises:
        DeskError: Temporal's visibility could not be listed.
    """
    query = (
        f"WorkflowType IN ('{LOOP}', '{TASK}') AND ExecutionStatus = 'Running' "
        "AND OrgaStatus IN ('awaiting_approval', 'awaiting_review', 'awaiting_message', "
        "'awaiting_worker')"
    )
    found: list[InboxItem] = []
    try:
        executions = [e async for e in client.list_workflows(query, limit=limit)]
    except RPCError as error:
        raise DeskError(f"listing waiting workflows failed: {error.message}") from error

    served: dict[str, bool] = {}

    async def items(workflow_id: str, workflow_type: str) -> list[InboxItem]:
        result_type = TaskState if workflow_type == TASK else LoopState
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
        found.extend(batch)
    epoch = datetime.min.replace(tzinfo=UTC)
    return sorted(found, key=lambda i: (i.since or epoch, i.workflow_id, i.item_id or ""))


# ---- decisions ---------------------------------------------------------------------------


async def _ready_for_a_decision(client: Client, workflow_id: str) -> WorkflowFacts:
    facts = await describe(client, workflow_id)
    if facts.status != "running":
        when = f" at {facts.closed_at.isoformat(timespec='seconds')}" if facts.closed_at else ""
        raise DeskError(
            f"{facts.workflow_type} {workflow_id!r} already finished ({facts.status}{when}): "
            "nothing is waiting for a decision there"
        )
    if not await presence(client, facts.task_queue):
        raise DeskError(
            f"no worker is polling task queue {facts.task_queue!r}, so nobody can record the "
            f"decision: start a worker there ({start_hint(facts.task_queue)}) and try again. "
            "Nothing was recorded."
        )
    return facts


async def _update(
    client: Client,
    name: str,
    payload: BaseModel,
    result_type: type[_M],
    facts: WorkflowFacts,
    wait: float,
) -> _M:
    handle: WorkflowHandle[Any, Any] = client.get_workflow_handle(facts.workflow_id)
    try:
        return await asyncio.wait_for(
            # temporalio's overloads of execute_update mention a bare Callable: "partially
            # unknown" to pyright.
            handle.execute_update(name, payload, result_type=result_type),  # pyright: ignore[reportUnknownMemberType]
            timeout=wait,
        )
    except WorkflowUpdateFailedError as error:
        raise DeskError(f"not recorded: {_refusal(error)}") from error
    except (TimeoutError, WorkflowUpdateRPCTimeoutOrCancelledError) as error:
        raise DeskError(
            f"no answer from a worker on task queue {facts.task_queue!r} within {wait:g} s; "
            "the decision was not confirmed (a worker that picks the workflow up later may "
            "still record it: check with `orga pending`)"
        ) from error
    except RPCError as error:
        raise _refused(error, facts.workflow_id, client.namespace) from error


def _refusal(error: WorkflowUpdateFailedError) -> str:
    """Why the workflow refused an update, as its message says it: the exception type it was
    raised as (``ValueError``, ``ApplicationError``) is the workflow's business, not the
    person's."""
    cause = error.cause
    if isinstance(cause, FailureError) and cause.message:
        return cause.message
    return str(cause or error)


async def waiting_call(
    client: Client, facts: WorkflowFacts, call_id: str, *, served: dict[str, bool] | None = None
) -> PendingApproval:
    """The call ``call_id`` as it waits in the workflow ``facts`` describes (``served``: what
    is known of which task queues a worker serves, as for ``read_state``).

    Raises:
        DeskError: its state cannot be read, or no such call waits there.
    """
    result_type = TaskState if facts.workflow_type == TASK else LoopState
    state = await read_state(
        client, facts.workflow_id, result_type, facts.workflow_type, served=served
    )
    for pending in state.pending_approvals:
        if pending.call_id == call_id:
            return pending
    listed = ", ".join(p.call_id for p in state.pending_approvals) or "none"
    raise DeskError(
        f"call {call_id!r} is not waiting for approval in {facts.workflow_id!r} (pending: "
        f"{listed}). Nothing was recorded."
    )


async def approve(
    client: Client,
    workflow_id: str,
    call_id: str,
    *,
    approved: bool,
    reason: str | None,
    approver: str,
    wait: float = 30.0,
    key: Ed25519PrivateKey | None = None,
    via: DecisionChannel | None = None,
    arguments: str | Mapping[str, Any] | None = None,
) -> ApprovalRecord:
    """Approve or deny a call that waits for approval; the decision as recorded. With ``key``
    (the approver's), the decision is signed over the arguments the call waits with; with
    ``arguments`` (an approval only), the call runs with those instead, once the gate passes
    them.

    Raises:
        DeskError: not recorded, and why.
    """
    facts = await _ready_for_a_decision(client, workflow_id)
    # _ready_for_a_decision found a worker on its queue: not asked again
    pending = await waiting_call(client, facts, call_id, served={facts.task_queue: True})
    decision = approval_decision(
        workflow_id,
        pending,
        call_id=call_id,
        approved=approved,
        reason=reason,
        approver=approver,
        via=via,
        arguments=arguments,
        key=key,
    )
    if key is None and pending.signatures_required:
        raise DeskError(
            f"approvers are enrolled on the worker of {workflow_id!r}: a decision must be signed "
            "by your enrolled key. Set ORGA_APPROVER_KEY to your private key (`orga approver "
            "keygen` writes one; the operator enrolls its public key). Nothing was recorded."
        )
    return await _update(client, APPROVE_UPDATE, decision, ApprovalRecord, facts, wait)


def approval_decision(
    workflow_id: str,
    pending: PendingApproval | None,
    *,
    call_id: str,
    approved: bool,
    reason: str | None,
    approver: str,
    via: DecisionChannel | None = None,
    arguments: str | Mapping[str, Any] | None = None,
    key: Ed25519PrivateKey | None = None,
) -> ApprovalDecision:
    """The decision every client sends (the CLI, the desk, MCP, ``LoopHandle``), built in this
    one place: edited arguments as a JSON object's text, and — with the approver's ``key`` and
    the call as it waits (``pending``) — signed over this workflow, the call, its arguments,
    the verdict and the reason.

    Raises:
        DeskError: the edited arguments are not a JSON object.
    """
    decision = ApprovalDecision(
        call_id=call_id,
        approved=approved,
        reason=reason,
        approver=approver,
        via=via,
        arguments=edited_arguments(arguments),
    )
    if key is None or pending is None:
        return decision
    return sign_decision(decision, workflow_id=workflow_id, pending=pending, key=key)


def edited_arguments(arguments: str | Mapping[str, Any] | None) -> str | None:
    """An approver's edited arguments as the JSON text a decision carries.

    Raises:
        DeskError: they are not a JSON object.
    """
    if arguments is None:
        return None
    if isinstance(arguments, str):
        try:
            value = json.loads(arguments)
        except json.JSONDecodeError as error:
            raise DeskError(f"the edited arguments are not JSON ({error.msg})") from error
    else:
        value = dict(arguments)
    if not isinstance(value, dict):
        raise DeskError("the edited arguments must be a JSON object")
    return json.dumps(value, ensure_ascii=False)


def said(record: ApprovalRecord) -> str:
    """One line for a person of a decision as recorded: what, by whom, and whether it is
    proven (signed by an enrolled key) or only claimed."""
    verdict = "approved" if record.approved else "denied"
    why = f": {record.reason}" if record.reason else ""
    line = (
        f"{verdict} call {record.call_id} ({record.tool}) by {record.approver} at "
        f"{record.at.isoformat()}{why}"
    )
    if not record.complete:
        line += " — recorded; the call waits for another approver"
    if record.arguments is not None:
        line += f" — runs with edited arguments {record.arguments}"
    if record.source == "mcp-elicitation":
        line += (
            " — through orga mcp: the MCP client app's answer to a form (that a person gave "
            "it is the app's claim)"
        )
    proofs = [p for p in record.decisions if p.key_fingerprint]
    if record.verified and proofs:
        keys = ", ".join(f"{p.approver} {p.key_fingerprint}" for p in proofs)
        return f"{line} — verified ({keys})"
    return (
        f"{line} — unverified: no approvers are enrolled on this worker, so the name is the "
        "caller's claim"
    )


def signing_key(settings: Settings) -> Ed25519PrivateKey | None:
    """The approver's key ``ORGA_APPROVER_KEY`` names, if any.

    Raises:
        DeskError: it names a file that is not a usable key.
    """
    path = settings.approver_key_path()
    if path is None:
        return None
    try:
        return load_key(path)
    except ApproverKeyError as error:
        raise DeskError(str(error)) from error


async def resolve(
    client: Client,
    workflow_id: str,
    escalation_id: str,
    *,
    action: EscalationAction,
    result: Any,
    reason: str | None,
    operator: str,
    wait: float = 30.0,
) -> EscalationRecord:
    """Resolve an escalation of a loop or a task; the resolution as recorded.

    Raises:
        DeskError: not recorded, and why.
    """
    facts = await _ready_for_a_decision(client, workflow_id)
    resolution = EscalationResolution(
        escalation_id=escalation_id, action=action, result=result, reason=reason, operator=operator
    )
    return await _update(client, RESOLVE_ESCALATION, resolution, EscalationRecord, facts, wait)


async def review(
    client: Client,
    workflow_id: str,
    *,
    verdict: Verdict,
    feedback: str,
    reviewer: str,
    wait: float = 30.0,
) -> Review:
    """Review a loop's final answer that waits for a person (``config.critic`` human); the
    review as recorded.

    Raises:
        DeskError: not recorded, and why.
    """
    facts = await _ready_for_a_decision(client, workflow_id)
    given = Review(verdict=verdict, feedback=feedback, reviewer=reviewer)
    return await _update(client, REVIEW_UPDATE, given, Review, facts, wait)


async def send_message(
    client: Client, workflow_id: str, text: str, *, sender: str | None, wait: float = 30.0
) -> MessageAccepted:
    """Send a person's message to a running loop (it joins the conversation at the next
    Observe, before the model's next call); what the loop says it took.

    Raises:
        DeskError: not taken, and why (the loop finished, no worker, an empty message …).
    """
    facts = await of_kind(client, workflow_id, "loop")
    if facts.status != "running":
        raise DeskError(
            f"loop {workflow_id!r} already finished ({facts.status}): it takes no message"
        )
    await _ready_for_a_decision(client, workflow_id)
    message = UserMessage(text=text, sender=sender)
    return await _update(client, MESSAGE_UPDATE, message, MessageAccepted, facts, wait)


async def await_turn(handle: WorkflowHandle[Any, Any], turn: int) -> TurnResult:
    """Turn ``turn``'s answer from the thread ``handle`` names (its current run: a thread that
    continues as new while this waits is asked again).

    Raises:
        WorkflowUpdateFailedError: refused (no such turn, not a thread), or the thread ended
            before the turn was answered.
    """
    while True:
        try:
            # temporalio's overloads of execute_update mention a bare Callable: "partially
            # unknown" to pyright.
            asked = TurnWait(turn=turn)
            return await handle.execute_update(TURN_UPDATE, asked, result_type=TurnResult)  # pyright: ignore[reportUnknownMemberType]
        except WorkflowUpdateFailedError as error:
            cause = error.cause
            if isinstance(cause, ApplicationError) and cause.type == THREAD_MOVED:
                continue
            raise


async def wait_for_turn(
    client: Client, workflow_id: str, turn: int, *, wait: float | None = None
) -> TurnResult:
    """Turn ``turn``'s answer of the thread ``workflow_id``, once it has one (at most ``wait``
    seconds; default: as long as it takes, approvals included).

    Raises:
        DeskError: not a thread, no such turn, the thread ended first, or no answer in time.
    """
    facts = await of_kind(client, workflow_id, "loop")
    handle: WorkflowHandle[Any, Any] = client.get_workflow_handle(workflow_id)
    try:
        return await asyncio.wait_for(await_turn(handle, turn), timeout=wait)
    except WorkflowUpdateFailedError as error:
        raise DeskError(f"no answer: {_refusal(error)}") from error
    except (TimeoutError, WorkflowUpdateRPCTimeoutOrCancelledError) as error:
        raise DeskError(
            f"turn {turn} of {workflow_id} has no answer yet after {wait:g} s: "
            f"`orga state {workflow_id}` shows what it waits for"
        ) from error
    except RPCError as error:
        raise _refused(error, facts.workflow_id, client.namespace) from error


async def close_thread(
    client: Client, workflow_id: str, *, reason: str, sender: str | None, wait: float = 30.0
) -> ThreadClosed:
    """Close the thread ``workflow_id``: it ends now, or once its running turn is answered.

    Raises:
        DeskError: not a thread, already closed or ended, or no worker answered.
    """
    facts = await of_kind(client, workflow_id, "loop")
    if facts.status != "running":
        raise DeskError(f"thread {workflow_id!r} already ended ({facts.status})")
    given = CloseThread(reason=reason, sender=sender)
    return await _update(client, CLOSE_UPDATE, given, ThreadClosed, facts, wait)


async def cancel(
    client: Client, workflow_id: str, *, reason: str, wait: float = 30.0
) -> WorkflowFacts:
    """Cancel a running loop or task (the reason is journaled; a task compensates what ran, a
    running tool is told through its heartbeats); the workflow's facts once it has closed, or
    still running after ``wait`` seconds (it may be compensating).

    Raises:
        DeskError: no such workflow, not a loop or task, or already finished.
    """
    facts = await describe(client, workflow_id)
    if facts.workflow_type not in (LOOP, TASK):
        raise DeskError(f"{workflow_id!r} is a {facts.workflow_type}, not an orga loop or task")
    if facts.status != "running":
        raise DeskError(f"{workflow_id!r} already finished ({facts.status}): nothing to cancel")
    handle: WorkflowHandle[Any, Any] = client.get_workflow_handle(workflow_id)
    try:
        await handle.cancel(reason=reason)
    except RPCError as error:
        raise _refused(error, workflow_id, client.namespace) from error
    with contextlib.suppress(WorkflowFailureError, TimeoutError):
        await asyncio.wait_for(handle.result(), timeout=wait)  # until it closes, however
    return await describe(client, workflow_id)

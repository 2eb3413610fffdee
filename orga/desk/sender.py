"""The one sender of people's decisions and messages: every update a client of orga sends a
loop or a task (approve, resolve an escalation, review, message, close, wait for a turn) goes
through here, each payload built in one place.

Two doors, one path:

* to a workflow handle — ``send_decision``, ``send_resolution``, ``send_review``,
  ``send_user_message``, ``send_close``, ``await_turn`` — for ``LoopHandle`` and
  ``ThreadHandle`` (``orga.client``): nothing is checked first (a Python caller may start its
  worker later) and a refusal raises Temporal's ``WorkflowUpdateFailedError`` as it comes;
* for a person — ``resolve``, ``review``, ``send_message``, ``close_thread``,
  ``wait_for_turn`` here and ``orga.desk.approvals.approve`` — for the CLI, the desk page and
  ``orga mcp``: ``ready_for_a_decision`` first checks what a person would otherwise find out
  the hard way (the workflow still runs, a worker polls its task queue), then ``deliver``
  sends through the first door and says any failure in one line (``DeskError``), an answer
  that does not come within ``wait`` seconds included.

Every update is sent with one update id and sent again with it while its answer is lost on
the way (``orga.desk.updates``). A message's sender may choose the id
(``send_user_message(message_id=…)``) to resend it safely later.

``cancel`` is here too: a person's word to a workflow, though Temporal's, not an update.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any, TypeAlias, TypeVar

from temporalio.client import (
    Client,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowUpdateFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)
from temporalio.exceptions import ApplicationError, FailureError
from temporalio.service import RPCError

from orga.contracts.approvals import (
    ApprovalDecision,
    ApprovalRecord,
    EscalationAction,
    EscalationRecord,
    EscalationResolution,
)
from orga.contracts.conversation import MessageAccepted, UserMessage
from orga.contracts.critic import Review, Verdict
from orga.contracts.messages import (
    APPROVE_UPDATE,
    CLOSE_UPDATE,
    LOOP_WORKFLOW,
    MESSAGE_UPDATE,
    RESOLVE_ESCALATION,
    REVIEW_UPDATE,
    TASK_WORKFLOW,
    TURN_UPDATE,
)
from orga.contracts.threads import THREAD_MOVED, CloseThread, ThreadClosed, TurnResult, TurnWait
from orga.desk.facts import DeskError, WorkflowFacts, describe, of_kind, refused
from orga.desk.updates import update
from orga.runtime.presence import presence, start_hint

__all__ = [
    "await_turn",
    "cancel",
    "close_thread",
    "deliver",
    "ready_for_a_decision",
    "resolve",
    "review",
    "send_close",
    "send_decision",
    "send_message",
    "send_resolution",
    "send_review",
    "send_user_message",
    "wait_for_turn",
]

_T = TypeVar("_T")

_Handle: TypeAlias = WorkflowHandle[Any, Any]


# ---- to a workflow handle ----------------------------------------------------------------


async def send_decision(handle: _Handle, decision: ApprovalDecision) -> ApprovalRecord:
    """An approver's decision on a call waiting for approval (``approval_decision`` in
    ``orga.desk.approvals`` builds it); the decision as recorded.

    Raises:
        WorkflowUpdateFailedError: the workflow refused it.
    """
    return await update(handle, APPROVE_UPDATE, decision, ApprovalRecord)


async def send_resolution(
    handle: _Handle,
    escalation_id: str,
    *,
    action: EscalationAction,
    result: Any,
    reason: str | None,
    operator: str,
) -> EscalationRecord:
    """An operator's answer to an escalation; the resolution as recorded.

    Raises:
        WorkflowUpdateFailedError: the workflow refused it.
    """
    resolution = EscalationResolution(
        escalation_id=escalation_id, action=action, result=result, reason=reason, operator=operator
    )
    return await update(handle, RESOLVE_ESCALATION, resolution, EscalationRecord)


async def send_review(handle: _Handle, *, verdict: Verdict, feedback: str, reviewer: str) -> Review:
    """A person's review of the answer waiting for one; the review as recorded.

    Raises:
        WorkflowUpdateFailedError: the workflow refused it.
    """
    given = Review(verdict=verdict, feedback=feedback, reviewer=reviewer)
    return await update(handle, REVIEW_UPDATE, given, Review)


async def send_user_message(
    handle: _Handle, text: str, *, sender: str | None, message_id: str | None = None
) -> MessageAccepted:
    """A person's message to a loop; what the loop says it took. ``message_id``: its update
    id (default: a new one) — sent again with the same id, it is answered, not taken twice.

    Raises:
        WorkflowUpdateFailedError: the workflow refused it.
    """
    message = UserMessage(text=text, sender=sender)
    return await update(handle, MESSAGE_UPDATE, message, MessageAccepted, message_id)


async def send_close(handle: _Handle, *, reason: str, sender: str | None) -> ThreadClosed:
    """Close a thread; what the thread says of it.

    Raises:
        WorkflowUpdateFailedError: the workflow refused it.
    """
    given = CloseThread(reason=reason, sender=sender)
    return await update(handle, CLOSE_UPDATE, given, ThreadClosed)


async def await_turn(handle: _Handle, turn: int, message: int | None = None) -> TurnResult:
    """Turn ``turn``'s answer from the thread ``handle`` names (its current run: a thread that
    continues as new while this waits is asked again); with ``message`` (its number), the
    answer of the turn that read that message.

    Raises:
        WorkflowUpdateFailedError: refused (no such turn, not a thread), or the thread ended
            before the turn was answered.
    """
    while True:
        try:
            wait = TurnWait(turn=turn, message=message)
            return await update(handle, TURN_UPDATE, wait, TurnResult)
        except WorkflowUpdateFailedError as error:
            cause = error.cause
            if isinstance(cause, ApplicationError) and cause.type == THREAD_MOVED:
                continue
            raise


# ---- for a person ------------------------------------------------------------------------


async def ready_for_a_decision(client: Client, workflow_id: str) -> WorkflowFacts:
    """The facts of ``workflow_id``, once it is known that it still runs and that a worker
    polls its task queue to record a decision.

    Raises:
        DeskError: no such workflow, it finished, or no worker polls its task queue.
    """
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


async def deliver(
    client: Client,
    facts: WorkflowFacts,
    send: Callable[[_Handle], Awaitable[_T]],
    *,
    wait: float | None,
    refusal: str = "not recorded",
    late: str | None = None,
) -> _T:
    """``send`` (one of the handle-level senders) to the workflow ``facts`` describes, and its
    answer within ``wait`` seconds (``None``: as long as it takes).

    Args:
        refusal: what the workflow's refusal is called (``not recorded: <why>``).
        late: what to say when no answer came in time (default: the decision was not
            confirmed).

    Raises:
        DeskError: the workflow refused, no answer came in time, or Temporal refused.
    """
    handle: _Handle = client.get_workflow_handle(facts.workflow_id)
    try:
        return await asyncio.wait_for(send(handle), timeout=wait)
    except WorkflowUpdateFailedError as error:
        raise DeskError(f"{refusal}: {_why_refused(error)}") from error
    except (TimeoutError, WorkflowUpdateRPCTimeoutOrCancelledError) as error:
        raise DeskError(late or _unconfirmed(facts, wait)) from error
    except RPCError as error:
        raise refused(error, facts.workflow_id, client.namespace) from error


def _unconfirmed(facts: WorkflowFacts, wait: float | None) -> str:
    within = f" within {wait:g} s" if wait is not None else ""
    return (
        f"no answer from a worker on task queue {facts.task_queue!r}{within}; the decision was "
        "not confirmed (a worker that picks the workflow up later may still record it: check "
        "with `orga pending`)"
    )


def _why_refused(error: WorkflowUpdateFailedError) -> str:
    """Why the workflow refused an update, as its message says it: the exception type it was
    raised as (``ValueError``, ``ApplicationError``) is the workflow's business, not the
    person's."""
    cause = error.cause
    if isinstance(cause, FailureError) and cause.message:
        return cause.message
    return str(cause or error)


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
    facts = await ready_for_a_decision(client, workflow_id)
    return await deliver(
        client,
        facts,
        lambda handle: send_resolution(
            handle, escalation_id, action=action, result=result, reason=reason, operator=operator
        ),
        wait=wait,
    )


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
    facts = await ready_for_a_decision(client, workflow_id)
    return await deliver(
        client,
        facts,
        lambda handle: send_review(handle, verdict=verdict, feedback=feedback, reviewer=reviewer),
        wait=wait,
    )


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
    await ready_for_a_decision(client, workflow_id)
    return await deliver(
        client, facts, lambda handle: send_user_message(handle, text, sender=sender), wait=wait
    )


async def wait_for_turn(
    client: Client, workflow_id: str, turn: int, *, wait: float | None = None
) -> TurnResult:
    """Turn ``turn``'s answer of the thread ``workflow_id``, once it has one (at most ``wait``
    seconds; default: as long as it takes, approvals included).

    Raises:
        DeskError: not a thread, no such turn, the thread ended first, or no answer in time.
    """
    facts = await of_kind(client, workflow_id, "loop")
    after = f" after {wait:g} s" if wait is not None else ""
    return await deliver(
        client,
        facts,
        lambda handle: await_turn(handle, turn),
        wait=wait,
        refusal="no answer",
        late=f"turn {turn} of {workflow_id} has no answer yet{after}: "
        f"`orga state {workflow_id}` shows what it waits for",
    )


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
    return await deliver(
        client, facts, lambda handle: send_close(handle, reason=reason, sender=sender), wait=wait
    )


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
    if facts.workflow_type not in (LOOP_WORKFLOW, TASK_WORKFLOW):
        raise DeskError(f"{workflow_id!r} is a {facts.workflow_type}, not an orga loop or task")
    if facts.status != "running":
        raise DeskError(f"{workflow_id!r} already finished ({facts.status}): nothing to cancel")
    handle: _Handle = client.get_workflow_handle(workflow_id)
    try:
        await handle.cancel(reason=reason)
    except RPCError as error:
        raise refused(error, workflow_id, client.namespace) from error
    with contextlib.suppress(WorkflowFailureError, TimeoutError):
        await asyncio.wait_for(handle.result(), timeout=wait)  # until it closes, however
    return await describe(client, workflow_id)

"""Approving a call that waits for a person, and who decides.

``who_decides`` finds the identity every decision is recorded with (or refuses); ``approve``
approves or denies a waiting call through ``orga.desk.sender``, once the call is seen waiting
and — where approvers are enrolled — the decision is signed with the approver's key
(``signing_key``). ``approval_decision`` is the one place a decision is built and signed, for
every client (the CLI, the desk page, ``orga mcp``, ``LoopHandle``); ``said`` is one line of a
decision as recorded.
"""

from __future__ import annotations

import getpass
import json
from collections.abc import Mapping
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from temporalio.client import Client

from orga.contracts.approvals import (
    ApprovalDecision,
    ApprovalRecord,
    DecisionChannel,
    PendingApproval,
)
from orga.contracts.messages import TASK_WORKFLOW
from orga.contracts.state import LoopState
from orga.contracts.task import TaskState
from orga.desk.facts import DeskError, WorkflowFacts, read_state
from orga.desk.sender import deliver, ready_for_a_decision, send_decision
from orga.runtime.approver_keys import ApproverKeyError, load_key, sign_decision
from orga.runtime.settings import Settings

__all__ = [
    "approval_decision",
    "approve",
    "edited_arguments",
    "said",
    "signing_key",
    "waiting_call",
    "who_decides",
]


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


async def waiting_call(
    client: Client,
    facts: WorkflowFacts,
    call_id: str | None,
    *,
    served: dict[str, bool] | None = None,
) -> PendingApproval:
    """The call ``call_id`` as it waits in the workflow ``facts`` describes (None: the one call
    that waits there; ``served``: what is known of which task queues a worker serves, as for
    ``read_state``).

    Raises:
        DeskError: its state cannot be read, no such call waits there, or (no ``call_id``)
            none or several do.
    """
    result_type = TaskState if facts.workflow_type == TASK_WORKFLOW else LoopState
    state = await read_state(
        client, facts.workflow_id, result_type, facts.workflow_type, served=served
    )
    waiting = state.pending_approvals
    if call_id is None and len(waiting) == 1:
        return waiting[0]
    for pending in waiting:
        if pending.call_id == call_id:
            return pending
    listed = ", ".join(p.call_id for p in waiting) or "none"
    if call_id is None:
        raise DeskError(
            f"{len(waiting)} calls wait for approval in {facts.workflow_id!r} ({listed}): name "
            "the one you decide (orga pending lists them). Nothing was recorded."
            if waiting
            else f"no call waits for approval in {facts.workflow_id!r}. Nothing was recorded."
        )
    raise DeskError(
        f"call {call_id!r} is not waiting for approval in {facts.workflow_id!r} (pending: "
        f"{listed}). Nothing was recorded."
    )


async def approve(
    client: Client,
    workflow_id: str,
    call_id: str | None,
    *,
    approved: bool,
    reason: str | None,
    approver: str,
    wait: float = 30.0,
    key: Ed25519PrivateKey | None = None,
    via: DecisionChannel | None = None,
    arguments: str | Mapping[str, Any] | None = None,
) -> ApprovalRecord:
    """Approve or deny a call that waits for approval (``call_id`` None: the one that waits);
    the decision as recorded. With ``key``
    (the approver's), the decision is signed over the arguments the call waits with; with
    ``arguments`` (an approval only), the call runs with those instead, once the gate passes
    them.

    Raises:
        DeskError: not recorded, and why.
    """
    facts = await ready_for_a_decision(client, workflow_id)
    # ready_for_a_decision found a worker on its queue: not asked again
    pending = await waiting_call(client, facts, call_id, served={facts.task_queue: True})
    call_id = pending.call_id  # the one call that waits, where none was named
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
    return await deliver(client, facts, lambda handle: send_decision(handle, decision), wait=wait)


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

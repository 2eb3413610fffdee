"""``orga pending``, ``approve``, ``deny`` and ``resolve``: the desk where a person answers
loops that wait for an approval or an escalated step."""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

from temporalio.service import RPCError

from orga.cli.common import CliError, Verbs, client_for, print_json, send_update
from orga.contracts.approvals import (
    ApprovalDecision,
    ApprovalRecord,
    EscalationRecord,
    EscalationResolution,
)
from orga.contracts.state import LoopState
from orga.runtime.settings import Settings

__all__ = ["cmd_approve", "cmd_deny", "cmd_pending", "cmd_resolve", "register"]


async def cmd_pending(args: argparse.Namespace, settings: Settings) -> int:
    """The inbox: every loop waiting for a person, and what it waits for."""
    client = await client_for(settings)
    found: list[dict[str, Any]] = []
    query = "OrgaStatus = 'awaiting_approval' AND ExecutionStatus = 'Running'"
    try:
        async for execution in client.list_workflows(query, limit=args.limit):
            handle = client.get_workflow_handle(execution.id)
            try:
                state = await handle.query("state", result_type=LoopState)
            except RPCError as error:
                found.append({"workflow_id": execution.id, "error": error.message})
                continue
            for approval in state.pending_approvals:
                found.append(
                    {
                        "workflow_id": execution.id,
                        "kind": "approval",
                        **approval.model_dump(mode="json"),
                    }
                )
            for escalation in state.pending_escalations:
                found.append(
                    {
                        "workflow_id": execution.id,
                        "kind": "escalation",
                        **escalation.model_dump(mode="json"),
                    }
                )
    except RPCError as error:
        raise CliError(f"listing loops failed: {error.message}") from error
    if args.json:
        print_json(found)
        return 0
    if not found:
        print("nothing is waiting for a person")
    for item in found:
        if "error" in item:
            print(f"{item['workflow_id']}: (no worker answers: {item['error']})")
        elif item["kind"] == "approval":
            print(
                f"{item['workflow_id']}  approval  call {item['call_id']}  {item['tool']}"
                f"({item['arguments']})  since {item['since']}  — {item['reason']}"
            )
        else:
            print(
                f"{item['workflow_id']}  escalation  {item['escalation_id']}  {item['tool']}  "
                f"since {item['since']}  — {item['error']}"
            )
    return 0


async def _decide(args: argparse.Namespace, settings: Settings, approved: bool) -> int:
    decision = ApprovalDecision(
        call_id=args.call_id,
        approved=approved,
        reason=args.reason,
        approver=args.approver or os.environ.get("USER") or None,
    )
    record = await send_update(settings, args.workflow_id, "approve", decision, ApprovalRecord)
    if args.json:
        print_json(record)
    else:
        verdict = "approved" if record.approved else "denied"
        who = f" by {record.approver}" if record.approver else ""
        why = f": {record.reason}" if record.reason else ""
        print(
            f"{verdict} call {record.call_id} ({record.tool}){who} at {record.at.isoformat()}{why}"
        )
    return 0


async def cmd_approve(args: argparse.Namespace, settings: Settings) -> int:
    return await _decide(args, settings, approved=True)


async def cmd_deny(args: argparse.Namespace, settings: Settings) -> int:
    return await _decide(args, settings, approved=False)


async def cmd_resolve(args: argparse.Namespace, settings: Settings) -> int:
    result: Any = None
    if args.result is not None:
        try:
            result = json.loads(args.result)
        except json.JSONDecodeError:
            result = args.result
    resolution = EscalationResolution(
        escalation_id=args.escalation_id,
        action=args.action,
        result=result,
        reason=args.reason,
        operator=args.operator or os.environ.get("USER") or None,
    )
    record = await send_update(
        settings, args.workflow_id, "resolve_escalation", resolution, EscalationRecord
    )
    if args.json:
        print_json(record)
    else:
        print(f"escalation {record.escalation_id}: {record.action} at {record.at.isoformat()}")
    return 0


def register(verbs: Verbs) -> None:
    """Add ``pending``, ``approve``, ``deny`` and ``resolve`` to the top parser's verbs."""
    inbox = verbs.add_parser("pending", help="loops waiting for a person, across workflows")
    inbox.add_argument("--limit", type=int, default=100)
    inbox.add_argument("--json", action="store_true")
    inbox.set_defaults(handler=cmd_pending)

    for verb, handler in (("approve", cmd_approve), ("deny", cmd_deny)):
        decide = verbs.add_parser(verb, help=f"{verb} a call that waits for approval")
        decide.add_argument("workflow_id")
        decide.add_argument("call_id")
        decide.add_argument("--reason", required=verb == "deny")
        decide.add_argument("--approver", help="who decides (default: $USER)")
        decide.add_argument("--json", action="store_true")
        decide.set_defaults(handler=handler)

    resolve = verbs.add_parser("resolve", help="resolve an escalated step")
    resolve.add_argument("workflow_id")
    resolve.add_argument("escalation_id")
    resolve.add_argument("--action", required=True, choices=["retry", "skip", "result", "abort"])
    resolve.add_argument("--result", help="for --action result: what the model sees (JSON or text)")
    resolve.add_argument("--reason")
    resolve.add_argument("--operator", help="who resolves (default: $USER)")
    resolve.add_argument("--json", action="store_true")
    resolve.set_defaults(handler=cmd_resolve)

"""``orga pending``, ``approve``, ``deny``, ``review`` and ``resolve``: a person's part in
running loops.

Every decision names who made it (``--approver`` / ``--operator``, else ``ORGA_APPROVER``, else
the operating-system user; with none of them the decision is refused) and goes through the
workflow's update, whose validator may refuse it. An approval or denial is signed with the key
``ORGA_APPROVER_KEY`` names; where the worker enrolled approvers, only a signed one is recorded,
and where it did not, the answer says the decision is unverified. A finished workflow, a task
queue no worker polls, or no answer within ``--wait`` seconds ends with a one-line reason;
nothing is recorded.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, cast, get_args

import typer

from orga.cli.common import (
    Approver,
    CliError,
    Json,
    client_for,
    console,
    execute,
    print_json,
    settings,
)
from orga.contracts.approvals import EscalationAction
from orga.contracts.critic import Verdict
from orga.desk.inbox import InboxItem, ItemKind, inbox
from orga.desk.inbox_text import ARGUMENT_LIMIT, PAGE_WIDTH, render_inbox
from orga.runtime.safe_text import one_line

__all__ = ["register"]

Wait = Annotated[
    float,
    typer.Option("--wait", help="Seconds to wait for the worker to record the decision.", min=1.0),
]


def register(app: typer.Typer) -> None:
    """Add the desk verbs to ``app``."""
    app.command(
        "pending", epilog="Example: orga pending --json | jq '.[] | select(.kind==\"approval\")'"
    )(pending)
    app.command(
        "approve", epilog="Example: orga approve loop-3f2a9c1b7d4e call_1_0 --reason 'checked'"
    )(approve)
    app.command(
        "deny", epilog="Example: orga deny loop-3f2a9c1b7d4e call_1_0 --reason 'too large'"
    )(deny)
    app.command(
        "review",
        epilog="Example: orga review loop-3f2a9c1b7d4e --verdict revise --feedback 'cite the "
        "source'",
    )(review)
    app.command(
        "resolve",
        epilog="Example: orga resolve task-9c1b7d4e3f2a notify#1 --action skip --reason 'mail "
        "server down, customer called instead'",
    )(resolve)


def pending(
    limit: Annotated[int, typer.Option(help="Look at this many waiting workflows at most.")] = 100,
    full: Annotated[
        bool,
        typer.Option(
            "--full",
            help=f"Show every argument in full (without it, a value past {ARGUMENT_LIMIT} "
            "characters is cut with a marker that counts what is left out).",
        ),
    ] = False,
    principal: Annotated[
        str | None, typer.Option(help="Only what waits in this user's loops and tasks.")
    ] = None,
    kind: Annotated[
        list[str] | None,
        typer.Option(
            help="Only items of this kind (repeat it for several): approval, escalation, "
            "review, message (a thread idle for its next message), worker, paused, unreadable."
        ),
    ] = None,
    oldest: Annotated[bool, typer.Option("--oldest", help="Only the oldest item.")] = False,
    field: Annotated[
        str | None,
        typer.Option(
            help="Print only this field of each item, one a line (workflow_id, item_id — the "
            "call or escalation id —, tool, kind, …): for a shell variable, "
            "id=$(orga pending --kind approval --oldest --field workflow_id)."
        ),
    ] = None,
    as_json: Json = False,
) -> None:
    """The inbox: every approval, review and escalation waiting for a person, in loops and
    tasks, oldest first (threads idle for their next message after them): the arguments one
    per line, and the commands that answer each."""

    async def body() -> int:
        known = get_args(ItemKind)
        unknown = [k for k in kind or [] if k not in known]
        if unknown:
            raise CliError(f"--kind {unknown[0]!r} is none of {', '.join(known)}", 2)
        kinds = cast("list[ItemKind]", kind) if kind else None
        fields = InboxItem.model_fields
        if field is not None and field not in fields:
            raise CliError(f"--field {field!r} is none of {', '.join(fields)}", 2)
        client = await client_for(settings())
        items = await inbox(client, limit=limit, principal=principal, kinds=kinds)
        items = items[:1] if oldest else items
        out = console()
        if field is not None:
            for item in items:
                value = item.model_dump(mode="json")[field]
                print(one_line(value if isinstance(value, str) else json.dumps(value)))
        elif as_json:
            print_json([item.model_dump(mode="json") for item in items])
        elif items:
            width = min(PAGE_WIDTH, out.width) if out.is_terminal else PAGE_WIDTH
            out.print(render_inbox(items, full=full, width=width))
        else:
            out.print("nothing is waiting for a person")
        return 0

    execute(body, as_json=as_json)


def _decide(
    workflow_id: str,
    call_id: str | None,
    approved: bool,
    reason: str | None,
    approver: str | None,
    wait: float,
    as_json: bool,
    arguments: str | None = None,
) -> None:
    async def body() -> int:
        from orga.desk import approvals  # signing: imported by the verbs that decide

        who = approvals.who_decides(approver)
        config = settings()
        client = await client_for(config)
        record = await approvals.approve(
            client,
            workflow_id,
            call_id,
            approved=approved,
            reason=reason,
            approver=who,
            wait=wait,
            key=approvals.signing_key(config),
            arguments=arguments,
        )
        if as_json:
            print_json(record)
            return 0
        console().print(approvals.said(record), markup=False)
        return 0

    execute(body, as_json=as_json)


WorkflowId = Annotated[str, typer.Argument(help="The loop's workflow id.")]
CallId = Annotated[
    str | None,
    typer.Argument(
        help="The waiting call's id (orga pending lists it); default: the one call that waits."
    ),
]


def approve(
    workflow_id: WorkflowId,
    call_id: CallId = None,
    reason: Annotated[str | None, typer.Option(help="Why (recorded and shown).")] = None,
    approver: Approver = None,
    arguments: Annotated[
        str | None,
        typer.Option(
            help="Approve with edits: the JSON object the call runs with instead. It passes the "
            "gate again (schema and policy); a refusal leaves the call waiting as it was."
        ),
    ] = None,
    wait: Wait = 30.0,
    as_json: Json = False,
) -> None:
    """Approve a call that waits for approval: it runs (with --arguments, as edited)."""
    _decide(workflow_id, call_id, True, reason, approver, wait, as_json, arguments)


def deny(
    workflow_id: WorkflowId,
    reason: Annotated[str, typer.Option(help="Why (the model reads it).")],
    call_id: CallId = None,
    approver: Approver = None,
    wait: Wait = 30.0,
    as_json: Json = False,
) -> None:
    """Deny a call that waits for approval: the model is told why, and goes on."""
    _decide(workflow_id, call_id, False, reason, approver, wait, as_json)


def resolve(
    workflow_id: Annotated[str, typer.Argument(help="The loop's or task's workflow id.")],
    escalation_id: Annotated[str, typer.Argument(help="The escalation id (orga pending).")],
    action: Annotated[
        EscalationAction,
        typer.Option(
            help="retry, skip, result (give the call's result: loops only) or abort; for a "
            "task's compensation that keeps failing: retry, mark_compensated (undone by hand: "
            "say how in --reason) or give_up. orga pending lists each item's options."
        ),
    ],
    result: Annotated[
        str | None,
        typer.Option(help="With --action result: what the model sees (JSON or plain text)."),
    ] = None,
    reason: Annotated[str | None, typer.Option(help="Why (recorded).")] = None,
    operator: Annotated[
        str | None,
        typer.Option(help="Who resolves; default: ORGA_APPROVER, else the operating-system user."),
    ] = None,
    wait: Wait = 30.0,
    as_json: Json = False,
) -> None:
    """Resolve an escalation: a failing step parked for an operator."""

    async def body() -> int:
        from orga.desk import approvals, sender

        who = approvals.who_decides(operator)
        value: Any = None
        if result is not None:
            try:
                value = json.loads(result)
            except json.JSONDecodeError:
                value = result
        client = await client_for(settings())
        record = await sender.resolve(
            client,
            workflow_id,
            escalation_id,
            action=action,
            result=value,
            reason=reason,
            operator=who,
            wait=wait,
        )
        if as_json:
            print_json(record)
        else:
            console().print(
                f"escalation {record.escalation_id}: {record.action} by {record.operator} at "
                f"{record.at.isoformat()}",
                markup=False,
            )
        return 0

    execute(body, as_json=as_json)


def review(
    workflow_id: WorkflowId,
    verdict: Annotated[Verdict, typer.Option(help="approve the answer, or ask to revise it.")],
    feedback: Annotated[str, typer.Option(help="What to change (the model reads it).")] = "",
    reviewer: Approver = None,
    wait: Wait = 30.0,
    as_json: Json = False,
) -> None:
    """Review a loop's final answer that waits for a person (config.critic, kind human)."""

    async def body() -> int:
        if verdict == "revise" and not feedback.strip():
            raise CliError("say what to revise: --feedback", 2)
        from orga.desk import approvals, sender

        who = approvals.who_decides(reviewer)
        client = await client_for(settings())
        recorded = await sender.review(
            client, workflow_id, verdict=verdict, feedback=feedback, reviewer=who, wait=wait
        )
        if as_json:
            print_json(recorded)
        else:
            console().print(f"{recorded.verdict} by {recorded.reviewer}", markup=False)
        return 0

    execute(body, as_json=as_json)

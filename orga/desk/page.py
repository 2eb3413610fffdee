"""The operator's inbox as a small local web page: the app ``orga desk`` serves
(``orga.cli.desk``, as pydantic-ai's CLI serves its web app).

Served by the CLI on 127.0.0.1 (no build step: one HTML file with plain JavaScript). It lists
what ``orga pending`` lists and lets a person approve, deny or resolve with a reason, seeing the
tool, its arguments, the policy's reason, the last messages of the loop's conversation and the
workflow's receipts (what became of its recent calls; an ``unknown`` one not yet settled stands
out). A call held by a pause shows who paused what, since when and why, and one button: it
ends that pause — for every loop it holds — as ``orga resume`` does. A panel lists the pauses
and pauses a tool, an agent or a loop with a reason, as ``orga pause`` does (``pauses``: the
store the workers share); another reads the receipts of any workflow, one that finished too.
Every decision goes through the same update (and validator) as the CLI's, recorded under the
identity of whoever runs ``orga desk`` (``--approver``, ``ORGA_APPROVER`` or the OS user).

The page is a door into running workflows, so it is locked: the API answers only requests that
carry the random token printed in the page's address (a header, never a cookie, so another site
in the same browser cannot ride on it), only for the host names it was started on (no DNS
rebinding), and state-changing requests only as JSON.
"""

from __future__ import annotations

import asyncio
import hmac
from collections.abc import Awaitable, Callable
from datetime import datetime
from importlib import resources
from typing import Any, Literal, TypeVar

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from pydantic import BaseModel, ValidationError, field_validator, model_validator
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route
from temporalio.client import Client

from orga.contracts.approvals import EscalationAction
from orga.contracts.conversation import Message
from orga.contracts.critic import Verdict
from orga.contracts.inference import ConversationRange
from orga.contracts.messages import CONVERSATION_QUERY, LOOP_WORKFLOW, TASK_WORKFLOW
from orga.contracts.state import LoopState
from orga.contracts.task import TaskState
from orga.desk import approvals, sender
from orga.desk.facts import DeskError, describe, read_state
from orga.desk.inbox import InboxItem
from orga.desk.inbox import inbox as waiting_items
from orga.desk.inbox_text import argument_lines
from orga.desk.releases import release_held
from orga.runtime.pauses import Pause, PauseBook, split_target
from orga.runtime.safe_text import printable, printable_data

__all__ = ["TOKEN_HEADER", "build_app"]

TOKEN_HEADER = "x-orga-desk-token"
_TAIL = 6
"""How many of a loop's last messages the page shows."""


class _Decision(BaseModel):
    workflow_id: str
    call_id: str
    approved: bool
    reason: str | None = None
    arguments: str | None = None
    """Approve with edits: the JSON object the call runs with instead."""

    @model_validator(mode="after")
    def _denial_says_why(self) -> _Decision:
        if not self.approved and not (self.reason or "").strip():
            raise ValueError("a denial needs a reason: the model reads it, and it is recorded")
        return self


_Payload = TypeVar("_Payload", bound=BaseModel)


class _Resolution(BaseModel):
    workflow_id: str
    escalation_id: str
    action: EscalationAction
    result: Any = None
    reason: str | None = None


class _Review(BaseModel):
    workflow_id: str
    verdict: Verdict
    feedback: str = ""


class _Say(BaseModel):
    workflow_id: str
    text: str


class _Close(BaseModel):
    workflow_id: str
    reason: str | None = None


class _Target(BaseModel):
    target: str
    """``tool:NAME``, ``agent:NAME`` or ``loop:ID``."""

    @field_validator("target")
    @classmethod
    def _plain(cls, target: str) -> str:
        if split_target(target) is None:
            raise ValueError(
                f"{target!r} is not a pause's target: tool:NAME, agent:NAME or loop:ID, "
                "with a plain name (letters, digits, _.:@/-)"
            )
        return target


class _PauseRequest(_Target):
    reason: str

    @field_validator("reason")
    @classmethod
    def _says_why(cls, reason: str) -> str:
        if not reason.strip():
            raise ValueError("a pause needs a reason: it is shown with every call that waits")
        return reason.strip()


class _Held(BaseModel):
    """A pause as the page shows it."""

    target: str
    by: str
    reason: str
    since: datetime
    described: str

    @classmethod
    def of(cls, pause: Pause) -> _Held:
        return cls(
            target=pause.target, by=pause.by, reason=pause.reason, since=pause.since,
            described=pause.describe(),
        )  # fmt: skip


def build_app(
    client: Client,
    *,
    token: str,
    approver: str,
    hosts: set[str],
    key: Ed25519PrivateKey | None = None,
    principal: str | None = None,
    pauses: PauseBook | None = None,
) -> Starlette:
    """The desk's web application (routes, and the lock on them); decisions are signed with
    ``key`` (the approver's), when given; with ``principal``, its inbox lists only what waits
    in that user's loops; with ``pauses``, it lists, makes and ends pauses (as ``approver``)."""

    def allowed(request: Request) -> Response | None:
        name = request.headers.get("host", "").rsplit(":", 1)[0]
        if name not in hosts:
            return JSONResponse({"error": f"host {name!r} is not served here"}, 403)
        given = request.headers.get(TOKEN_HEADER, "")
        if not hmac.compare_digest(given.encode(), token.encode()):
            return JSONResponse({"error": "missing or wrong desk token"}, 401)
        if request.method == "POST" and request.headers.get("content-type") != "application/json":
            return JSONResponse({"error": "send JSON"}, 415)
        return None

    async def page(request: Request) -> Response:
        html = resources.files("orga.desk").joinpath("page.html").read_text(encoding="utf-8")
        return HTMLResponse(html, headers={"cache-control": "no-store"})

    async def inbox(request: Request) -> Response:
        if (refused := allowed(request)) is not None:
            return refused
        try:
            items = await waiting_items(client, principal=principal)
        except DeskError as error:
            return _error(error, 502)
        return JSONResponse(
            {"approver": printable(approver), "items": [_shown(item) for item in items]}
        )

    async def workflow(request: Request) -> Response:
        if (refused := allowed(request)) is not None:
            return refused
        workflow_id = request.path_params["workflow_id"]
        try:
            return JSONResponse(printable_data(await _details(client, workflow_id)))
        except DeskError as error:
            return _error(error, 404)

    async def decide(
        request: Request, contract: type[_Payload], act: Callable[[_Payload], Awaitable[BaseModel]]
    ) -> Response:
        if (refused := allowed(request)) is not None:
            return refused
        try:
            record = await act(contract.model_validate(await request.json()))
        except (ValidationError, ValueError) as error:
            return _error(f"invalid request: {error}", 400)
        except _Unavailable as error:
            return _error(error, 404)
        except DeskError as error:
            return _error(error, 409)
        return JSONResponse(printable_data(record.model_dump(mode="json")))

    async def approve(request: Request) -> Response:
        async def act(d: _Decision) -> BaseModel:
            return await approvals.approve(
                client, d.workflow_id, d.call_id, approved=d.approved, reason=d.reason,
                approver=approver, key=key, arguments=d.arguments,
            )  # fmt: skip

        return await decide(request, _Decision, act)

    async def resolve(request: Request) -> Response:
        async def act(r: _Resolution) -> BaseModel:
            return await sender.resolve(
                client, r.workflow_id, r.escalation_id, action=r.action, result=r.result,
                reason=r.reason, operator=approver,
            )  # fmt: skip

        return await decide(request, _Resolution, act)

    async def review(request: Request) -> Response:
        async def act(r: _Review) -> BaseModel:
            return await sender.review(
                client, r.workflow_id, verdict=r.verdict, feedback=r.feedback, reviewer=approver
            )

        return await decide(request, _Review, act)

    async def say(request: Request) -> Response:
        async def act(s: _Say) -> BaseModel:
            return await sender.send_message(client, s.workflow_id, s.text, sender=approver)

        return await decide(request, _Say, act)

    async def close(request: Request) -> Response:
        async def act(c: _Close) -> BaseModel:
            reason = (c.reason or "").strip() or "closed at the desk"
            return await sender.close_thread(client, c.workflow_id, reason=reason, sender=approver)

        return await decide(request, _Close, act)

    async def paused(request: Request) -> Response:
        if (refused := allowed(request)) is not None:
            return refused
        if pauses is None:
            return _error(_NO_PAUSES, 404)
        found = await asyncio.to_thread(pauses.all)
        return JSONResponse(
            {"pauses": [printable_data(_Held.of(p).model_dump(mode="json")) for p in found]}
        )

    async def pause(request: Request) -> Response:
        async def act(p: _PauseRequest) -> BaseModel:
            if pauses is None:
                raise _Unavailable(_NO_PAUSES)
            return _Held.of(await asyncio.to_thread(pauses.pause, p.target, approver, p.reason))

        return await decide(request, _PauseRequest, act)

    async def resume(request: Request) -> Response:
        async def act(r: _Target) -> BaseModel:
            if pauses is None:
                raise _Unavailable(_NO_PAUSES)
            ended = await asyncio.to_thread(pauses.resume, r.target)
            if ended is None:
                kind, _, name = r.target.partition(":")
                raise DeskError(f"{kind} {name!r} is not paused: nothing to resume")
            await release_held(client, r.target)  # what it held goes on now
            return _Held.of(ended)

        return await decide(request, _Target, act)

    return Starlette(
        routes=[
            Route("/", page),
            Route("/api/inbox", inbox),
            Route("/api/workflows/{workflow_id:path}", workflow),
            Route("/api/approve", approve, methods=["POST"]),
            Route("/api/resolve", resolve, methods=["POST"]),
            Route("/api/review", review, methods=["POST"]),
            Route("/api/say", say, methods=["POST"]),
            Route("/api/close", close, methods=["POST"]),
            Route("/api/pauses", paused),
            Route("/api/pause", pause, methods=["POST"]),
            Route("/api/resume", resume, methods=["POST"]),
        ]
    )


_NO_PAUSES = "pauses are not available on this desk (it was started without the store)"


class _Unavailable(Exception):
    """What the desk was built without (answered 404)."""


def _error(error: Exception | str, status: int) -> Response:
    return JSONResponse({"error": printable(str(error))}, status)


def _shown(item: InboxItem) -> dict[str, Any]:
    """An inbox item as the page shows it: every text made ``printable`` (no control or bidi
    character reaches the page), the arguments in full one per line as ``orga pending --full``
    prints them (numbers as Python reads them: JavaScript would round 2**53 + 1), and under
    ``act`` the ids exactly as the workflow knows them (and the pause that holds it), for the
    decision."""
    lines, _ = argument_lines(item.arguments or "", full=True)
    return {
        **printable_data(item.model_dump(mode="json")),
        "argument_lines": lines,
        "act": {"workflow_id": item.workflow_id, "item_id": item.item_id, "pause": item.pause},
    }


async def _details(client: Client, workflow_id: str) -> dict[str, Any]:
    """A workflow's state (its receipts among it) and, for a loop, the last messages of its
    conversation."""
    facts = await describe(client, workflow_id)
    kind: Literal["loop", "task"]
    if facts.workflow_type == LOOP_WORKFLOW:
        kind = "loop"
        state: BaseModel = await read_state(client, workflow_id, LoopState, LOOP_WORKFLOW)
        assert isinstance(state, LoopState)
        window = ConversationRange(start=max(0, state.messages - _TAIL), end=state.messages)
        handle = client.get_workflow_handle(workflow_id)
        messages = await handle.query(CONVERSATION_QUERY, window, result_type=list[Message])
        tail = [m.model_dump(mode="json", exclude_defaults=True) for m in messages]
    elif facts.workflow_type == TASK_WORKFLOW:
        kind = "task"
        state = await read_state(client, workflow_id, TaskState, TASK_WORKFLOW)
        tail = []
    else:
        raise DeskError(f"{workflow_id!r} is a {facts.workflow_type}, not an orga workflow")
    return {"kind": kind, "state": state.model_dump(mode="json"), "messages": tail}

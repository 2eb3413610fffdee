"""The AG-UI endpoint: a web app drives orga threads through the AG-UI protocol (1.0).

``POST /agui`` takes a ``RunAgentInput`` and answers with a Server-Sent Events stream of AG-UI
events. The ``threadId`` names an orga thread (workflow ``agui-<threadId>``); each run is one
of its turns:

* the first run starts the thread for the caller — bound as its principal (signed by the
  endpoint's issuer key when it has one) — with the last user message of ``messages``;
* a later run sends its last user message as the thread's next message;
* a run whose ``resume`` answers an interrupt decides the approval it names, as the caller
  (signed with the caller's own enrolled approver key when the endpoint holds one), and goes on
  with the same turn.

The stream says ``RUN_STARTED``; the model's text as it arrives (``TEXT_MESSAGE_START`` /
``CONTENT`` / ``END``, from the thread's Workflow Stream); each tool call once it ran
(``TOOL_CALL_START`` / ``END`` and ``TOOL_CALL_RESULT`` with its status); and ends with
``RUN_FINISHED`` — its ``result`` the turn's answer (``{"output", "value"}``: a typed thread's
value), or, while a call waits for a person, the ``interrupt`` outcome: one interrupt per
waiting call (``id`` and ``toolCallId`` the call id, its arguments in ``TOOL_CALL_ARGS``),
answered by ``resume`` entries whose payload is ``{"approved": bool, "reason": str,
"arguments": {...}}`` (arguments: approve with edits). Failures are ``RUN_ERROR``.

A caller sees and decides only the threads that run for them (the thread's principal); a
request must come through a served ``Host`` and, from a browser, an allowed ``Origin``. Nothing
is held in this process: any number of endpoints serve the same threads.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Final, cast

from ag_ui.core import BaseEvent, RunAgentInput
from ag_ui.encoder import EventEncoder
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from orga.contracts.messages import LOOP_WORKFLOW
from orga.contracts.state import LoopState
from orga.desk.facts import DeskError, read_state
from orga.web.agui_events import EventId, Marked, event_id, parse_id
from orga.web.agui_run import QUERY_TIMEOUT, THREAD_PREFIX, AguiOptions, AguiRun, Refused
from orga.web.callers import Callers

__all__ = ["AguiOptions", "agui_app"]

_THREAD_ID: Final = re.compile(r"^[A-Za-z0-9._-]{1,120}$")


def agui_app(
    client: Client, callers: Callers, options: AguiOptions, page: Path | None = None
) -> Starlette:
    """The AG-UI endpoint as a Starlette app (``orga api`` serves it; mount it in your own).

    ``page``: a directory of static files served at ``/`` (a web app's page, e.g.
    ``examples/web/public``); the page calls the endpoint from the same origin.
    """

    async def run(request: Request) -> Response:
        try:
            user = _caller(request, callers, options, same_origin=page is not None)
            given = await _input(request)
            workflow_id = f"{THREAD_PREFIX}{given.thread_id}"
            issuer = options.issuer.name if options.issuer is not None else None
            found = await _owned(client, workflow_id, user, issuer)
            after, connect = _reconnect(request, given)
        except Refused as refused:
            return JSONResponse({"error": str(refused)}, refused.status)
        events = AguiRun(client, options, given, user, workflow_id, found, after, connect).events()
        return StreamingResponse(
            _encoded(events), media_type="text/event-stream", headers=_STREAM_HEADERS
        )

    # A page served from an allowed origin may call (its preflight answered); no other.
    cors = Middleware(
        CORSMiddleware,
        allow_origins=sorted(options.origins),
        allow_methods=["POST"],
        allow_headers=["authorization", "content-type"],
        max_age=600,
    )
    routes: list[BaseRoute] = [Route("/agui", run, methods=["POST"])]
    if page is not None:
        routes.append(Mount("/", StaticFiles(directory=page, html=True)))
    return Starlette(routes=routes, middleware=[cors])


_STREAM_HEADERS: Final = {"cache-control": "no-store", "x-accel-buffering": "no"}


async def _encoded(events: AsyncIterator[Marked | BaseEvent]) -> AsyncIterator[str]:
    encoder = EventEncoder()
    async for event in events:
        if isinstance(event, Marked):  # its id in its metadata, and as the SSE event's id
            yield f"id: {event_id(event.id)}\n" + encoder.encode(event.stamped())
        else:
            yield encoder.encode(event)


def _reconnect(request: Request, given: RunAgentInput) -> tuple[EventId | None, bool]:
    """A reconnect's last event id (``forwardedProps.orga.after``, else the ``Last-Event-ID``
    header), and whether the request only reconnects (``forwardedProps.orga.connect``: the
    thread's last run from its start, without an id)."""
    props: Any = given.forwarded_props
    found: Any = cast(dict[str, Any], props).get("orga") if isinstance(props, dict) else None
    orga = cast(dict[str, Any], found) if isinstance(found, dict) else {}
    raw: Any = orga.get("after", request.headers.get("last-event-id"))
    if raw is None:
        return None, orga.get("connect") is True
    after = parse_id(raw) if isinstance(raw, str) else None
    if after is None:
        raise Refused(422, 'the last event id is not one this endpoint sent ("<offset>.<n>")')
    return after, True


def _caller(request: Request, callers: Callers, options: AguiOptions, *, same_origin: bool) -> str:
    """The user a request comes from, through a served ``Host`` and, from a browser, an
    allowed ``Origin`` (``same_origin``: also the page this app serves)."""
    authority = request.headers.get("host", "")
    host = authority.rsplit(":", 1)[0]
    if host not in options.hosts:
        raise Refused(403, f"host {host!r} is not served here")
    origin = request.headers.get("origin")
    ours = same_origin and origin == f"http://{authority}"
    if origin is not None and origin not in options.origins and not ours:
        raise Refused(403, f"origin {origin!r} is not allowed")
    user = callers.who(request.headers)
    if user is None:
        raise Refused(401, "missing or unknown bearer token")
    return user


async def _input(request: Request) -> RunAgentInput:
    try:
        given = RunAgentInput.model_validate(await request.json())
    except (ValueError, ValidationError) as error:
        raise Refused(422, f"not a RunAgentInput: {str(error).splitlines()[0]}") from error
    if not _THREAD_ID.match(given.thread_id):
        raise Refused(422, "threadId: 1 to 120 letters, digits, '.', '_' or '-'")
    return given


async def _owned(
    client: Client, workflow_id: str, user: str, issuer: str | None
) -> LoopState | None:
    """The thread's state (None: it does not exist yet); refused when it is not the caller's
    (or not a thread). With
    an ``issuer``, the caller's only where that issuer bound it: a thread a plain client
    started under the same id, merely claiming the caller, is not theirs."""
    try:
        described = await client.get_workflow_handle(workflow_id).describe()
    except RPCError as error:
        if error.status == RPCStatusCode.NOT_FOUND:
            return None
        raise Refused(502, f"Temporal: {error.message}") from error
    if described.workflow_type != LOOP_WORKFLOW:
        raise Refused(404, "no such thread")
    state = await _set_up(client, workflow_id)
    owner = state.principal
    bound = issuer is None or (owner is not None and owner.verified and owner.issuer == issuer)
    if owner is None or owner.user != user or state.thread is None or not bound:
        raise Refused(404, "no such thread")  # another's is not told apart from none
    return state


async def _set_up(client: Client, workflow_id: str) -> LoopState:
    """The thread's state once its run is set up: a run that has just started (or continued as
    new) knows whom it runs for only after its setup (a moment)."""

    async def read() -> LoopState:
        try:
            return await read_state(
                client, workflow_id, LoopState, LOOP_WORKFLOW, timeout=QUERY_TIMEOUT.total_seconds()
            )
        except DeskError as error:
            raise Refused(502, str(error)) from error

    state = await read()
    deadline = asyncio.get_running_loop().time() + _SETUP_WAIT
    while state.phase == "starting" and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.1)
        state = await read()
    return state


_SETUP_WAIT: Final = 10.0
"""Seconds a request waits for a thread's run to be set up before it judges whose it is."""

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

What a request may take is bounded (``AguiLimits``): the app reads at most ``body_bytes`` of a
body, within ``request_timeout``, refuses JSON nested deeper than ``json_depth`` before parsing
it, and holds at most ``streams_per_caller`` requests of one caller open at once; the server,
given ``uvicorn_limits``, closes a request not sent whole within ``request_timeout`` (uvicorn
has no such timeout of its own: Kludex/uvicorn#157) and headers over ``header_bytes``. A
refusal answers JSON ``{"error"}`` and closes the connection (what the client still sends is
not read). Starlette's own ``max_body_size`` is not used: to a request that declares a longer
body, it sends its own plain-text 413 in place of whatever the app answers (a 401 too).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, cast

from ag_ui.core import BaseEvent, RunAgentInput
from ag_ui.encoder import EventEncoder
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import Receive, Scope, Send
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from orga.contracts.agents import AgentSpec
from orga.contracts.messages import LOOP_WORKFLOW
from orga.contracts.state import LoopState
from orga.desk.facts import DeskError, read_state
from orga.web.agui_events import EventId, Marked, event_id, parse_id
from orga.web.agui_run import (
    QUERY_TIMEOUT,
    THREAD_PREFIX,
    AguiLimits,
    AguiOptions,
    AguiRun,
    Refused,
)
from orga.web.callers import Callers, OpenRequests
from orga.web.deadlines import UvicornLimits, bounded_requests

if TYPE_CHECKING:
    from a2a.server.tasks import TaskStore

__all__ = [
    "AguiLimits",
    "AguiOptions",
    "UvicornLimits",
    "agui_app",
    "owned",
    "unserved",
    "uvicorn_limits",
]

_THREAD_ID: Final = re.compile(r"[A-Za-z0-9._-]{1,120}")


def agui_app(
    client: Client,
    callers: Callers,
    options: AguiOptions,
    page: Path | None = None,
    *,
    a2a: str | None = None,
    a2a_agents: Sequence[AgentSpec] = (),
    a2a_tasks: TaskStore | None = None,
) -> Starlette:
    """The AG-UI endpoint as a Starlette app (``orga api`` serves it; mount it in your own).

    ``page``: a directory of static files served at ``/`` (a web app's page, e.g.
    ``examples/web/public``); the page calls the endpoint from the same origin. ``a2a``: the
    name of the agent the A2A endpoint (``orga.web.a2a``) serves at ``/a2a``, for the same
    callers (None: no A2A endpoint); ``a2a_agents``: an agents file's agents, each served at
    ``/a2a/<agent>`` with a card of its own; ``a2a_tasks``: where their tasks are kept
    (default: the process's memory).
    """
    streams = OpenRequests(options.limits.streams_per_caller)
    endpoint = _Endpoint(client, callers, options, streams, same_origin=page is not None)
    # A page served from an allowed origin may call (its preflight answered); no other.
    cors = Middleware(
        CORSMiddleware,
        allow_origins=sorted(options.origins),
        allow_methods=["POST"],
        allow_headers=["authorization", "content-type"],
        max_age=600,
    )
    routes: list[BaseRoute] = [Route("/agui", endpoint, methods=["POST"])]
    if a2a is not None:
        from orga.web.a2a import a2a_mounts  # a2a-sdk, loaded only where it is served

        routes += a2a_mounts(client, callers, options, name=a2a, agents=a2a_agents, tasks=a2a_tasks)
    if page is not None:
        routes.append(Mount("/", StaticFiles(directory=page, html=True)))
    return Starlette(routes=routes, middleware=[cors])


@dataclass
class _Endpoint:
    """``POST /agui`` (an ASGI app: a caller's stream is counted until it has been sent)."""

    client: Client
    callers: Callers
    options: AguiOptions
    streams: OpenRequests
    same_origin: bool
    """Also the page this app serves may call (``agui_app``'s ``page``)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        try:
            _head_within(request, self.options.limits)
            user = _caller(request, self.callers, self.options, same_origin=self.same_origin)
            with self.streams.held(user):
                response = await self._stream(request, user)
                await response(scope, receive, send)
        except Refused as refused:
            # Closed: what the client still sends (a body not read) is never read.
            answer = JSONResponse({"error": str(refused)}, refused.status, _REFUSAL_HEADERS)
            await answer(scope, receive, send)

    async def _stream(self, request: Request, user: str) -> Response:
        given = await _input(request, self.options.limits)
        workflow_id = f"{THREAD_PREFIX}{given.thread_id}"
        issuer = self.options.issuer.name if self.options.issuer is not None else None
        found = await owned(self.client, workflow_id, user, issuer)
        after, connect = _reconnect(request, given)
        run = AguiRun(self.client, self.options, given, user, workflow_id, found, after, connect)
        return StreamingResponse(
            _encoded(run.events()), media_type="text/event-stream", headers=_STREAM_HEADERS
        )


_STREAM_HEADERS: Final = {"cache-control": "no-store", "x-accel-buffering": "no"}
_REFUSAL_HEADERS: Final = {"connection": "close"}


async def _encoded(events: AsyncIterator[Marked | BaseEvent]) -> AsyncIterator[str]:
    encoder = EventEncoder()
    async for event in events:
        if isinstance(event, Marked):  # its id in its metadata, and as the SSE event's id
            yield f"id: {event_id(event.id)}\n" + encoder.encode(event.stamped())
        else:
            yield encoder.encode(event)


def _head_within(request: Request, limits: AguiLimits) -> None:
    """Refuse headers over ``header_bytes``: h11 bounds a head only while it is incomplete, so
    one that arrived whole in a single read gets here."""
    size = sum(len(name) + len(value) for name, value in request.headers.raw)
    if size > limits.header_bytes:
        raise Refused(
            431, f"the headers hold more than {limits.header_bytes} bytes (AguiLimits.header_bytes)"
        )


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
    problem = unserved(request.headers, options, same_origin=same_origin)
    if problem is not None:
        raise Refused(403, problem)
    user = callers.who(request.headers)
    if user is None:
        raise Refused(401, "missing or unknown bearer token")
    return user


def unserved(
    headers: Mapping[str, str], options: AguiOptions, *, same_origin: bool = False
) -> str | None:
    """Why a request is not served here — its ``Host`` is none of ``options.hosts``, or a
    browser's ``Origin`` is not allowed (``same_origin``: the page this app serves is) — or
    None."""
    authority = headers.get("host", "")
    host = authority.rsplit(":", 1)[0]
    if host not in options.hosts:
        return f"host {host!r} is not served here"
    origin = headers.get("origin")
    ours = same_origin and origin == f"http://{authority}"
    if origin is not None and origin not in options.origins and not ours:
        return f"origin {origin!r} is not allowed"
    return None


async def _input(request: Request, limits: AguiLimits) -> RunAgentInput:
    body = await _body(request, limits)
    if _deeper(body, limits.json_depth):
        raise Refused(
            400, f"the JSON nests deeper than {limits.json_depth} levels (AguiLimits.json_depth)"
        )
    try:
        given = RunAgentInput.model_validate_json(body)
    except ValidationError as error:
        raise Refused(422, f"not a RunAgentInput: {str(error).splitlines()[0]}") from error
    if not _THREAD_ID.fullmatch(given.thread_id):
        raise Refused(422, "threadId: 1 to 120 letters, digits, '.', '_' or '-'")
    return given


async def _body(request: Request, limits: AguiLimits) -> bytes:
    """The request's body: no more than ``body_bytes`` (a declared length over it is refused
    before a byte is read; a body sent without one, at the first chunk past it), sent within
    ``request_timeout`` of its headers."""
    declared = request.headers.get("content-length", "")
    too_big = Refused(
        413, f"the body holds more than {limits.body_bytes} bytes (AguiLimits.body_bytes)"
    )
    if _DIGITS.fullmatch(declared) and int(declared) > limits.body_bytes:
        raise too_big
    body = bytearray()
    try:
        async with asyncio.timeout(limits.request_timeout):
            async for chunk in request.stream():
                body += chunk
                if len(body) > limits.body_bytes:
                    raise too_big
    except TimeoutError as error:
        raise Refused(
            408,
            f"the body was not sent within {limits.request_timeout:g} s "
            "(AguiLimits.request_timeout)",
        ) from error
    except ClientDisconnect as error:
        raise Refused(400, "the client left before its body was sent") from error
    return bytes(body)


_DIGITS: Final = re.compile(r"[0-9]{1,30}")
_STRING: Final = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"?', re.DOTALL)
"""A JSON string, escapes and all (what it holds is not structure). Its closing quote is
optional: an unclosed string ends the text, and no search starts again inside it (which would
take time quadratic in the body)."""
_NOT_BRACKETS: Final = bytes(b for b in range(256) if b not in b"[]{}")


def _deeper(body: bytes, most: int) -> bool:
    """Whether the JSON text ``body`` nests arrays and objects deeper than ``most`` (counted
    on its brackets outside strings, before any parser recurses into it)."""
    if body.count(b"[") + body.count(b"{") <= most:
        return False
    depth = 0
    for bracket in _STRING.sub(b"", body).translate(None, _NOT_BRACKETS):
        depth += 1 if bracket in b"[{" else -1
        if depth > most:
            return True
    return False


async def owned(
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


def uvicorn_limits(limits: AguiLimits) -> UvicornLimits:
    """The options that make uvicorn hold to ``limits``: requests sent whole within
    ``request_timeout``, headers within ``header_bytes`` (``orga.web.deadlines``).

    ``uvicorn.Config(agui_app(...), **uvicorn_limits(options.limits), host=..., port=...)``
    """
    return bounded_requests(
        limits.request_timeout, limits.header_bytes, "AguiLimits.request_timeout"
    )

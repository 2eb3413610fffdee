"""The A2A endpoint (issue 68): another agent framework reaches orga's threads as
an Agent2Agent agent, through ``a2a-sdk``'s server (protocol 1.0, the JSON-RPC binding).

``orga api --a2a`` mounts it at ``/a2a`` beside ``/agui``:

* ``GET /a2a/.well-known/agent-card.json`` — the agent card (public): the endpoint's agent, a
  skill per tool its threads may use, the bearer scheme it requires, its JSON-RPC URL;
* ``POST /a2a/`` — ``SendMessage``, ``SendStreamingMessage``, ``GetTask``, ``CancelTask``,
  ``SubscribeToTask`` … for a caller the endpoint authenticates with the same tokens as
  ``/agui`` (else 401, the card excepted).

An A2A context is an orga thread (workflow ``a2a-<contextId>``) of the caller who sent its
first message, each message one of its turns (``orga.web.a2a_threads``: the task's states, the
streamed text, the answer and what the turn spent). A context that runs for another caller is
refused as one that does not exist; another caller's task is not found.

``a2a_mounts`` serves, besides, each agent of an agents file at ``/a2a/<agent>`` (its own
card, its threads run as it, ``a2a-<agent>/<contextId>``).

Its tasks are kept where ``tasks`` says: ``orga api --a2a`` keeps them in orga's store
(``orga.web.a2a_store``), so they outlive its process, and a ``SubscribeToTask`` after a
restart picks a task up again; an app that gives no store keeps them in its memory.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections import OrderedDict
from collections.abc import Sequence
from typing import Final

from a2a.server.context import ServerCallContext
from a2a.server.owner_resolver import resolve_user_scope
from a2a.server.routes import create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskStore
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    HTTPAuthSecurityScheme,
    SecurityRequirement,
    SecurityScheme,
    StringList,
    Task,
)
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH
from google.protobuf.json_format import MessageToDict
from starlette.applications import Starlette
from starlette.authentication import (
    AuthCredentials,
    AuthenticationBackend,
    AuthenticationError,
    SimpleUser,
)
from starlette.datastructures import Headers
from starlette.middleware import Middleware
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.requests import HTTPConnection, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from temporalio.client import Client

from orga.contracts.agents import AgentSpec
from orga.web.a2a_store import ENDED, Resuming
from orga.web.a2a_threads import A2A_PREFIX, Threads
from orga.web.agui import unserved
from orga.web.agui_run import AguiOptions, Refused
from orga.web.callers import Callers, OpenRequests

__all__ = ["A2A_PREFIX", "ENDED_KEPT", "a2a_app", "a2a_mounts"]

ENDED_KEPT: Final = 1_000
"""Ended A2A tasks (completed, failed, canceled, rejected) the endpoint keeps per caller, the
newest: an older one's ``GetTask`` answers "task not found" (its thread keeps the turns)."""
_AGENT_ID: Final = re.compile(r"[A-Za-z0-9._-]{1,100}")
_log = logging.getLogger(__name__)


def a2a_app(
    client: Client,
    callers: Callers,
    options: AguiOptions,
    *,
    name: str,
    description: str | None = None,
    tools: Sequence[str] | None = None,
    prefix: str = A2A_PREFIX,
    tasks: TaskStore | None = None,
) -> Starlette:
    """The A2A endpoint as a Starlette app (``orga api --a2a`` mounts it at ``/a2a``); its
    threads start as ``options`` says (task queue, config, issuer), its callers are
    ``callers``' users, and ``name`` names its agent on the card (``description`` says what
    it does, ``tools`` which tools, or globs of them, it may use: default, the config's). A
    context's thread is ``prefix`` and the context id. ``tasks``: where the A2A tasks are kept
    (``orga.web.a2a_store.StoredTasks``: in orga's store, beyond this process; default: its
    memory, each caller's newest ``ENDED_KEPT`` ended ones)."""
    shown = options.config.tools if tools is None else tools
    card = _card(name, description, shown, "http://127.0.0.1/")
    handler = Resuming(
        agent_executor=Threads(client, options, prefix),
        task_store=tasks or _EndedKept(ENDED_KEPT),
        agent_card=card,
    )

    async def agent_card(request: Request) -> Response:
        # The JSON-RPC URL beside the card, wherever the app is mounted (route names are not
        # scoped by mount: several agents' apps in one would all find the first's).
        path = request.url.path.removesuffix(AGENT_CARD_WELL_KNOWN_PATH) + "/"
        served = _card(name, description, shown, str(request.url.replace(path=path, query="")))
        return JSONResponse(MessageToDict(served))

    routes = [
        Route(AGENT_CARD_WELL_KNOWN_PATH, agent_card, methods=["GET"]),
        *create_jsonrpc_routes(handler, rpc_url="/"),
    ]
    backend = _Bearer(callers)
    return Starlette(
        routes=routes,
        middleware=[
            Middleware(_Served, options=options),
            Middleware(_Bounded, most=options.limits.body_bytes),
            Middleware(AuthenticationMiddleware, backend=backend, on_error=_unknown),
            Middleware(_PerCaller, open=OpenRequests(options.limits.streams_per_caller)),
        ],
    )


class _PerCaller:
    """At most ``AguiLimits.streams_per_caller`` requests of one caller open at once (a
    stream counts until its task ends or the client leaves): one more is refused, 429."""

    def __init__(self, app: ASGIApp, open: OpenRequests) -> None:
        self._app = app
        self._open = open

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        user = scope.get("user")
        if scope["type"] != "http" or not isinstance(user, SimpleUser):
            await self._app(scope, receive, send)
            return
        try:
            with self._open.held(user.username):  # Refused (429) as it is entered, only
                await self._app(scope, receive, send)
        except Refused as refused:
            await JSONResponse({"error": str(refused)}, refused.status)(scope, receive, send)


class _Served:
    """A request through a served ``Host`` and, from a browser, an allowed ``Origin``
    (``AguiOptions.hosts``, ``origins``): else 403 — the card too, whose URL is the Host's."""

    def __init__(self, app: ASGIApp, options: AguiOptions) -> None:
        self._app = app
        self._options = options

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            problem = unserved(Headers(scope=scope), self._options)
            if problem is not None:
                await JSONResponse({"error": problem}, 403)(scope, receive, send)
                return
        await self._app(scope, receive, send)


class _TooLong(Exception):
    pass


class _Bounded:
    """A request body of at most ``most`` bytes (``AguiLimits.body_bytes``): a longer one
    declared is refused unread, one sent longer is cut off at the chunk past it — 413."""

    def __init__(self, app: ASGIApp, most: int) -> None:
        self._app = app
        self._most = most

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length", b"0")
        if not declared.isdigit() or int(declared) > self._most:
            await self._refuse(scope, receive, send)
            return
        seen = 0

        async def bounded() -> Message:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self._most:
                raise _TooLong
            return message

        try:
            await self._app(scope, bounded, send)
        except _TooLong:
            await self._refuse(scope, receive, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        said = f"the request's body is longer than the {self._most} bytes it may be"
        await JSONResponse({"error": said}, 413, {"connection": "close"})(scope, receive, send)


def _card(name: str, description: str | None, tools: Sequence[str], url: str) -> AgentCard:
    """The card of agent ``name``: a skill per tool (or glob of tools) its threads may use,
    else one that answers; its JSON-RPC ``url`` and the bearer scheme it requires."""
    skills = [
        AgentSkill(id=tool, name=tool, description=f"uses the tool {tool}", tags=["tool"])
        for tool in tools
    ] or [AgentSkill(id="answer", name="answer", description="answers", tags=["chat"])]
    governed = (
        "an orga thread: each message a governed turn (tools pass orga's gate; a call that "
        "waits for a person makes the task input-required)"
    )
    return AgentCard(
        name=name,
        description=f"{description} — {governed}" if description else governed,
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")
        ],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain", "application/json"],
        skills=skills,
        security_schemes={
            "bearer": SecurityScheme(
                http_auth_security_scheme=HTTPAuthSecurityScheme(scheme="Bearer")
            )
        },
        security_requirements=[SecurityRequirement(schemes={"bearer": StringList(list=[])})],
    )


class _EndedKept(InMemoryTaskStore):
    """The A2A tasks of this process (a2a-sdk's memory, per caller), keeping at most ``most``
    ended ones per caller: a caller's thousands of messages do not grow it without bound."""

    def __init__(self, most: int) -> None:
        super().__init__()
        self._most = most
        self._ended: dict[str, OrderedDict[str, None]] = {}

    async def save(self, task: Task, context: ServerCallContext) -> None:
        await super().save(task, context)
        if task.status.state not in ENDED:
            return
        ended = self._ended.setdefault(resolve_user_scope(context), OrderedDict())
        ended[task.id] = None
        while len(ended) > self._most:
            oldest, _ = ended.popitem(last=False)
            await self.delete(oldest, context)


class _Bearer(AuthenticationBackend):
    """The caller: a user ``Callers`` knows, or 401 (the card is public)."""

    def __init__(self, callers: Callers) -> None:
        self._callers = callers

    async def authenticate(self, conn: HTTPConnection) -> tuple[AuthCredentials, SimpleUser] | None:
        if conn.url.path.endswith(AGENT_CARD_WELL_KNOWN_PATH):
            return None
        user = self._callers.who({k.lower(): v for k, v in conn.headers.items()})
        if user is None:
            raise AuthenticationError("no caller: send Authorization: Bearer <your token>")
        return AuthCredentials(["authenticated"]), SimpleUser(user)


def _unknown(_: HTTPConnection, error: Exception) -> Response:
    return JSONResponse({"error": str(error)}, 401, {"WWW-Authenticate": "Bearer"})


def a2a_mounts(
    client: Client,
    callers: Callers,
    options: AguiOptions,
    *,
    name: str,
    agents: Sequence[AgentSpec] = (),
    tasks: TaskStore | None = None,
) -> list[Mount]:
    """The A2A endpoints of an app: each agent of ``agents`` (an agents file's) at
    ``/a2a/<agent>`` — its card from its description and tool globs, its threads run as it —
    and ``name``'s at ``/a2a`` with ``options``' config. An agent that runs elsewhere (``a2a``),
    or whose id is no URL path segment, is not served (it is logged)."""
    mounts: list[Mount] = []
    for agent in agents:
        if agent.a2a is not None or not _AGENT_ID.fullmatch(agent.id):
            _log.warning("agent %r is not served over A2A here", agent.id)
            continue
        config = options.config.model_copy(update={"agent_id": agent.id, "tools": []})
        app = a2a_app(
            client,
            callers,
            # Who may decide its tasks is the agent's (the file's), not the default endpoint's.
            dataclasses.replace(options, config=config, a2a_deciders=frozenset(agent.a2a_deciders)),
            name=agent.id,
            description=agent.description,
            tools=agent.tools,
            prefix=f"{A2A_PREFIX}{agent.id}/",
            tasks=tasks,
        )
        mounts.append(Mount(f"/a2a/{agent.id}", app=app))
    mounts.append(Mount("/a2a", app=a2a_app(client, callers, options, name=name, tasks=tasks)))
    return mounts

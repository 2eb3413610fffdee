"""The A2A endpoint, first part (issue 68): another agent framework reaches orga's threads as
an Agent2Agent agent, through ``a2a-sdk``'s server (protocol 1.0, the JSON-RPC binding).

``orga api --a2a`` mounts it at ``/a2a`` beside ``/agui``:

* ``GET /a2a/.well-known/agent-card.json`` — the agent card (public): the endpoint's agent, a
  skill per tool its threads may use, the bearer scheme it requires, its JSON-RPC URL;
* ``POST /a2a/`` — ``SendMessage``, ``SendStreamingMessage``, ``GetTask``, ``CancelTask``,
  ``SubscribeToTask`` … for a caller the endpoint authenticates with the same tokens as
  ``/agui`` (else 401, the card excepted).

An A2A context is an orga thread (workflow ``a2a-<contextId>``), started for the caller who
sent its first message — its principal, bound by the endpoint's issuer when it has one — and
each message is one of its turns, sent with the A2A message id as its update id (a client that
sends it again is answered, not read twice: ``orga.desk.updates``). The task is ``working``
while the turn runs, ``input-required`` while a call of it waits for a person — decided on
orga's desk, the CLI or AG-UI, as the gate asks; a remote caller does not decide here — then
``completed`` with the turn's answer as a text artifact (a typed thread's value as a data
artifact too), or ``failed`` with the reason. ``CancelTask`` cancels the thread (Temporal's
cancel: it reaches a running tool). A context that runs for another caller is refused as one
that does not exist. The answer artifact's metadata says what the turn spent
(``A2A_USAGE_KEY``), which an orga loop that delegated here charges to its own books.

Not yet (issue 68): the model's text streamed as it comes, a remote caller's own decision of
``input-required`` where the operator allows it, an agent card per agent of the agents file,
and tasks that outlive the endpoint's process (the A2A task store is its memory).
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, Final

from a2a.helpers import new_data_part, new_task_from_user_message, new_text_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.context import ServerCallContext
from a2a.server.events import EventQueue
from a2a.server.owner_resolver import resolve_user_scope
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
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
    TaskState,
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
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from temporalio.client import Client, WorkflowQueryFailedError, WorkflowUpdateFailedError
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError

from orga.client import ThreadHandle, start_thread
from orga.contracts.delegation import A2A_USAGE_KEY
from orga.contracts.principals import PrincipalClaim
from orga.contracts.state import LoopState
from orga.contracts.threads import ThreadConfig, TurnResult
from orga.desk.facts import DeskError
from orga.web.agui import owned, unserved
from orga.web.agui_run import AguiOptions, Refused
from orga.web.callers import Callers, OpenRequests

__all__ = ["A2A_PREFIX", "ENDED_KEPT", "a2a_app"]

A2A_PREFIX: Final = "a2a-"
"""An A2A context's thread: the workflow id is this and the ``contextId``."""
ENDED_KEPT: Final = 1_000
"""Ended A2A tasks (completed, failed, canceled, rejected) the endpoint keeps per caller, the
newest: an older one's ``GetTask`` answers "task not found" (its thread keeps the turns)."""
_ENDED: Final = frozenset(
    {
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_REJECTED,
    }
)
_CONTEXT_ID: Final = re.compile(r"[A-Za-z0-9._-]{1,120}")
_WATCH: Final = (0.5, 10.0)
"""Seconds between looks at a turn's state (does a call wait for a person?): the first, and
the most they grow to (doubling while nothing changes), so a wait of days asks rarely."""
_log = logging.getLogger(__name__)


def a2a_app(client: Client, callers: Callers, options: AguiOptions, *, name: str) -> Starlette:
    """The A2A endpoint as a Starlette app (``orga api --a2a`` mounts it at ``/a2a``); its
    threads start as ``options`` says (task queue, config, issuer), its callers are
    ``callers``' users, and ``name`` names its agent on the card."""
    card = _card(name, options, "http://127.0.0.1/")
    handler = DefaultRequestHandler(
        agent_executor=_Threads(client, options),
        task_store=_EndedKept(ENDED_KEPT),
        agent_card=card,
    )

    async def agent_card(request: Request) -> Response:
        served = _card(name, options, str(request.url_for("rpc")))
        return JSONResponse(MessageToDict(served))

    routes = [
        Route(AGENT_CARD_WELL_KNOWN_PATH, agent_card, methods=["GET"]),
        *create_jsonrpc_routes(handler, rpc_url="/"),
    ]
    for route in routes:  # the JSON-RPC route, named for the card's URL
        if route.path == "/":
            route.name = "rpc"
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


def _card(name: str, options: AguiOptions, url: str) -> AgentCard:
    tools: Sequence[str] = options.config.tools or []
    skills = [
        AgentSkill(id=tool, name=tool, description=f"uses the tool {tool}", tags=["tool"])
        for tool in tools
    ] or [AgentSkill(id="answer", name="answer", description="answers", tags=["chat"])]
    return AgentCard(
        name=name,
        description="an orga thread: each message a governed turn (tools pass orga's gate; "
        "a call that waits for a person makes the task input-required)",
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
        if task.status.state not in _ENDED:
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


class _Threads(AgentExecutor):
    """Each A2A message, a turn of the context's thread (see the module docstring)."""

    def __init__(self, client: Client, options: AguiOptions) -> None:
        self._client = client
        self._options = options

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        if context.current_task is None:
            assert context.message is not None, "a task begins with a message"
            await event_queue.enqueue_event(new_task_from_user_message(context.message))
        updater = TaskUpdater(event_queue, context.task_id or "", context.context_id or "")
        try:
            chat, turn, seq = await self._send(context)
            await updater.start_work()
            answered = await self._answer(chat, turn, seq, updater)
        except (Refused, DeskError) as refused:
            await updater.failed(self._says(context, str(refused)))
            return
        except WorkflowUpdateFailedError as error:
            await updater.failed(self._says(context, str(error.cause or error)))
            return
        except WorkflowAlreadyStartedError:  # another request started the context meanwhile
            said = "the context's thread was started meanwhile: send the message again"
            await updater.failed(self._says(context, said))
            return
        except RPCError as error:
            await updater.failed(self._says(context, f"Temporal: {error.message}"))
            return
        parts = [new_text_part(answered.output)]
        if answered.value is not None:
            parts.append(new_data_part(answered.value))
        spent = {**answered.usage.model_dump(), "model_calls": answered.iterations}
        await updater.add_artifact(parts, name="answer", metadata={A2A_USAGE_KEY: spent})
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        handle = self._client.get_workflow_handle(f"{A2A_PREFIX}{context.context_id}")
        try:
            await handle.cancel()
        except RPCError as error:
            _log.warning("cancel of %s: %s", handle.id, error.message)
        updater = TaskUpdater(event_queue, context.task_id or "", context.context_id or "")
        await updater.cancel()

    async def _send(self, context: RequestContext) -> tuple[ThreadHandle, int, int | None]:
        """The message sent to the context's thread (started for the caller if new): the
        thread, the turn that reads it, and its number (None: the thread's first)."""
        call = context.call_context
        if not call.user.is_authenticated:  # the middleware lets no such request through
            raise Refused(401, "no caller: send Authorization: Bearer <your token>")
        user = call.user.user_name
        context_id = context.context_id or ""
        if not _CONTEXT_ID.fullmatch(context_id):
            raise Refused(400, "a contextId is letters, digits and ._- (at most 120)")
        text = context.get_user_input()
        if not text.strip():
            raise Refused(422, "the message holds no text")
        workflow_id = f"{A2A_PREFIX}{context_id}"
        issuer = self._options.issuer
        found = await owned(self._client, workflow_id, user, issuer.name if issuer else None)
        if found is None:
            config = self._options.config.model_copy(update={"thread": ThreadConfig()})
            chat = await start_thread(
                self._client,
                config,
                text,
                workflow_id=workflow_id,
                task_queue=self._options.task_queue,
                principal=PrincipalClaim(user=user),
                issuer=issuer,
            )
            return chat, 1, None
        chat = ThreadHandle(self._client.get_workflow_handle(workflow_id))
        message = context.message
        message_id = f"a2a-{message.message_id}" if message and message.message_id else None
        accepted = await chat.say(text, sender=user, message_id=message_id)
        return chat, accepted.turn or 1, accepted.seq

    async def _answer(
        self, chat: ThreadHandle, turn: int, seq: int | None, updater: TaskUpdater
    ) -> TurnResult:
        """The turn's answer; meanwhile the task is input-required while a call waits."""
        answer = asyncio.ensure_future(chat.turn(turn, message=seq))
        asking = False
        pause, most = _WATCH
        try:
            while not answer.done():
                await asyncio.wait({answer}, timeout=pause)
                if answer.done():
                    break
                try:
                    waits = _waiting(await chat.state())
                except (RPCError, WorkflowQueryFailedError):  # a worker lost meanwhile: later
                    continue
                if waits and not asking:
                    await updater.requires_input(updater.new_agent_message([new_text_part(waits)]))
                elif not waits and asking:
                    await updater.start_work()
                pause = _WATCH[0] if asking != bool(waits) else min(pause * 2, most)
                asking = bool(waits)
            return answer.result()
        finally:
            answer.cancel()

    @staticmethod
    def _says(context: RequestContext, text: str) -> Any:
        return new_text_message(text, context_id=context.context_id, task_id=context.task_id)


def _waiting(state: LoopState) -> str:
    """What waits for a person in ``state`` ("" for nothing)."""
    calls = [f"{p.tool} ({p.call_id})" for p in state.pending_approvals]
    return f"waiting for a person to decide: {', '.join(calls)}" if calls else ""

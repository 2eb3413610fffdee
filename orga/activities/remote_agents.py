"""A remote A2A agent as a delegate (issue 68): the ``delegate_remote`` activity.

Worker code. An agent of the agents file may run at an A2A endpoint (``AgentSpec.a2a``); a
``delegate`` call to it — past the gate like any call, on a share of the parent's budget
(``orga.workflows.reasoning.delegation``) — runs this activity, which:

1. finds the endpoint and the token to present by the agent's id, on this worker (never in
   the activity's input), and checks the endpoint, and the URL its agent card points to,
   against the worker's egress rules (``ORGA_EGRESS_ALLOW``: only public addresses unless
   listed; ``orga.tools._egress``); no redirect is followed;
2. holds the call's share of the parent's tokens and money on the principal's spend ledger
   (``SpendGuard.holding``) and, once the remote answered, settles it to the cost the remote
   reported (orga's endpoint reports its turn's tokens, cost and model calls in the answer's
   metadata, ``orga.usage``; a remote that reports none is charged nothing, and the parent's
   journal says so);
3. sends the task as one message, in an A2A context of its own (``a2a_context``: one per
   ``delegate`` call), without waiting for the answer (``return_immediately``); then asks for
   the task's state, a fifth of a second apart at first and two seconds at most, until it
   ends: ``completed`` answers the call with its artifacts' text (and its data parts as the
   value); ``failed``, ``rejected``, ``canceled`` or ``auth-required`` fail it
   ``RemoteAgentFailed`` with what the remote said; ``input-required`` waits — the remote's
   people decide there — until the call's deadline, past which the remote task is cancelled.

**Sent once.** Before it sends, the attempt records, where the next attempt reads it (its
heartbeat details, answered by the server once stored), that the message goes to its context;
once the remote answered with a task, the task's id. An attempt after one that was lost — its
worker SIGKILLed, or it timed out — asks the remote first: by the task id when it has one
(``GetTask``), else by the context (``ListTasks``); a task found is followed, never sent again
(``reconciled``); none found, the message never arrived, and it is sent (``sent``). A remote
that no longer knows the task, or cannot list a context's tasks, leaves the outcome unknown
(``OutcomeUnknown``: the parent's model reads it; nothing is sent twice). A cancel of the call
cancels the remote task (``CancelTask``) before the activity ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Final, cast

import httpx
from a2a.client import A2ACardResolver, A2AClientError, Client, ClientConfig, ClientFactory
from a2a.helpers import new_text_part
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    Task,
    TaskState,
)
from a2a.utils.errors import A2AError, InternalError, TaskNotFoundError
from pydantic import SecretStr
from temporalio import activity
from temporalio.client import AsyncActivityCancelledError
from temporalio.service import RPCError

from orga.activities.principals import SpendGuard
from orga.activities.remote_answers import ENDED, answer_of, said_by
from orga.contracts.agents import AgentSpec
from orga.contracts.delegation import (
    DELEGATE_REMOTE,
    REMOTE_WAITS_SIGNAL,
    RemoteAnswer,
    RemoteDelegation,
    RemoteSettled,
    RemoteWaits,
)
from orga.contracts.errors import (
    InvalidConfig,
    OutcomeUnknown,
    RemoteAgentFailed,
    ToolUnavailable,
)
from orga.core.ids import a2a_context
from orga.core.text import cut
from orga.runtime.spend import Cost
from orga.tools._egress import EgressGuard
from orga.worker.agent_registry import AgentRegistry

__all__ = ["ANSWER_BYTES", "RemoteAgents"]

ANSWER_BYTES: Final = 4 * 1024 * 1024
"""Bytes an endpoint's answer to one request may hold (a card, a task): past it, the
delegation fails; an endpoint cannot make the worker read without end."""
_POLL: Final = (0.2, 2.0)
"""Seconds between two asks of a running task's state: the first, and the most."""
_CANCEL_SECONDS: Final = 5.0

_log = logging.getLogger("orga.remote_agents")


class RemoteAgents:
    """The ``delegate_remote`` activity over the worker's remote agents (see the module)."""

    def __init__(
        self,
        agents: AgentRegistry,
        allow: Sequence[str],
        spend: SpendGuard,
        *,
        environ: Mapping[str, str] = os.environ,
    ) -> None:
        """Raises ``InvalidConfig`` where a remote agent's token variable is not set."""
        origin = agents.origin
        self._agents = {a.id: a for a in agents.remote()}
        self._tokens: dict[str, SecretStr] = {}
        for agent in self._agents.values():
            if agent.a2a_token_env is None:
                continue
            token = environ.get(agent.a2a_token_env, "")
            if not token:
                raise InvalidConfig(
                    f"{origin}: agent {agent.id!r} presents the token in "
                    f"{agent.a2a_token_env}, which is not set in the worker's environment"
                )
            self._tokens[agent.id] = SecretStr(token)
        self._guard = EgressGuard(allow, tool="delegate")
        self._spend = spend

    @activity.defn(name=DELEGATE_REMOTE)
    async def delegate_remote(self, ask: RemoteDelegation) -> RemoteAnswer:
        """The remote agent's answer to ``ask`` (see the module).

        Raises:
            RemoteAgentFailed: the remote task did not complete, or the endpoint refused.
            OutcomeUnknown: an earlier attempt was lost and the remote cannot say whether it
                has the task.
            ToolPermissionError: the egress rules refuse the endpoint.
            ToolUnavailable: the endpoint cannot be reached (retried).
        """
        spec = self._agents.get(ask.agent)
        if spec is None or spec.a2a is None:
            raise InvalidConfig(f"agent {ask.agent!r} is no remote (a2a) agent of this worker")
        info = activity.info()
        context_id = a2a_context(info.workflow_id or "", ask.call_id)
        worst = Cost(ask.max_cost, ask.max_tokens)
        marks = _Marks()
        async with self._spend.holding(ask.principal, worst) as settle:
            try:
                async with self._connected(spec) as remote:
                    task, settled = await _begin(remote, ask, context_id, _lost(info), marks)
                    task = await _follow(remote, task, ask.deadline, spec.id, marks, ask.call_id)
            except A2AClientError as error:
                # This attempt ends on its own: the next follows its task, if it had one, as
                # not lost (a send that failed is still asked about by its context).
                marks.beat(ended="yes")
                raise _refused_or_down(spec.id, error) from error
            answer = answer_of(task, settled)
            await settle(answer.usage)
        return answer

    @contextlib.asynccontextmanager
    async def _connected(self, spec: AgentSpec) -> AsyncGenerator[Client]:
        """A client of ``spec``'s endpoint, its card read, every URL checked by the guard."""
        assert spec.a2a is not None
        await self._guard.check(spec.a2a)
        headers: dict[str, str] = {}
        if (token := self._tokens.get(spec.id)) is not None:
            headers["Authorization"] = f"Bearer {token.get_secret_value()}"
        async with httpx.AsyncClient(
            headers=headers, timeout=30, follow_redirects=False, transport=_Capped(ANSWER_BYTES)
        ) as http:
            card = await A2ACardResolver(http, spec.a2a).get_agent_card()
            for interface in card.supported_interfaces:
                await self._guard.check(interface.url, via=spec.a2a)
            yield ClientFactory(ClientConfig(httpx_client=http, streaming=False)).create(card)


def _lost(info: activity.Info) -> dict[str, str] | None:
    """What the attempt before this one recorded (its context, and its task once it had
    one), if there was one."""
    if info.attempt <= 1 or not info.heartbeat_details:
        return None
    last = info.heartbeat_details[-1]
    return cast(dict[str, str], last) if isinstance(last, dict) else None


class _Marks:
    """What this attempt has done, as the next attempt will read it (heartbeat details)."""

    def __init__(self) -> None:
        self.details: dict[str, str] = {}

    async def record(self, **details: str) -> None:
        """Add ``details`` and store them where the next attempt reads them, before going on
        (as ``orga.tools._outcomes.mark_began``: the SDK's own heartbeat only queues them)."""
        self.details.update(details)
        info = activity.info()
        handle = activity.client().get_async_activity_handle(task_token=info.task_token)
        try:
            await handle.heartbeat(self.details)
        except AsyncActivityCancelledError as stopped:
            raise asyncio.CancelledError("cancelled before the task was sent") from stopped
        except Exception as error:
            raise ToolUnavailable(
                f"could not record the remote call ({type(error).__name__}: {error}); "
                "nothing was sent, and it is tried again"
            ) from error

    def beat(self, **details: str) -> None:
        """A heartbeat (queued) with ``details`` added."""
        self.details.update(details)
        activity.heartbeat(self.details)


async def _begin(
    remote: Client,
    ask: RemoteDelegation,
    context_id: str,
    lost: dict[str, str] | None,
    marks: _Marks,
) -> tuple[Task, RemoteSettled | None]:
    """The remote task of the call: the one an earlier attempt left there, or one sent now."""
    settled: RemoteSettled | None = None
    if lost is not None:
        if task_id := lost.get("task"):
            marks.details.update(context=context_id, task=task_id)
            # An attempt that ended on its own (the endpoint out of reach) was not lost.
            again: RemoteSettled | None = None if lost.get("ended") else "reconciled"
            try:
                return await remote.get_task(GetTaskRequest(id=task_id)), again
            except TaskNotFoundError as error:
                raise _unknown(ask, f"the remote no longer knows its task {task_id!r}") from error
        try:
            found = await remote.list_tasks(ListTasksRequest(context_id=context_id))
        except A2AClientError:  # the endpoint out of reach: asked again
            raise
        except A2AError as error:
            raise _unknown(ask, f"the remote cannot list its tasks ({error})") from error
        if found.tasks:  # listed without its artifacts: asked for whole, by its id
            await marks.record(context=context_id, task=found.tasks[0].id)
            return await remote.get_task(GetTaskRequest(id=found.tasks[0].id)), "reconciled"
        settled = "sent"  # the lost attempt's message never arrived
    await marks.record(context=context_id)
    message = Message(
        role=Role.ROLE_USER,
        message_id=f"{context_id}-task",
        context_id=context_id,
        parts=[new_text_part(ask.task)],
    )
    request = SendMessageRequest(
        message=message, configuration=SendMessageConfiguration(return_immediately=True)
    )
    async for reply in remote.send_message(request):
        if reply.HasField("task"):
            await marks.record(task=reply.task.id)
            return reply.task, settled
        if reply.HasField("message"):  # an agent that answers at once, with no task
            answered = Task(id="", context_id=context_id, artifacts=[])
            answered.status.state = TaskState.TASK_STATE_COMPLETED
            answered.status.message.CopyFrom(reply.message)
            return answered, settled
    raise RemoteAgentFailed("the remote agent answered the message with nothing")


async def _follow(
    remote: Client, task: Task, deadline: datetime, agent: str, marks: _Marks, call_id: str
) -> Task:
    """``task`` once it ended there (or ``RemoteAgentFailed``), asked again and again."""
    pause, most = _POLL
    try:
        while not _over(task):
            left = (deadline - datetime.now(UTC)).total_seconds()
            if left <= 0:
                await _cancel(remote, task.id)
                raise RemoteAgentFailed(
                    f"the remote agent {agent!r} did not answer within its time (its task "
                    f"{task.id!r} was cancelled there)"
                )
            waits = task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
            if waits != (marks.details.get("waits") == "yes"):  # the loop shows it (its desk)
                await _tell(call_id, said_by(task) or "a person there decides" if waits else None)
            marks.beat(waits="yes" if waits else "no")
            await asyncio.sleep(min(pause, left))
            pause = min(pause * 2, most)
            try:
                task = await remote.get_task(GetTaskRequest(id=task.id))
            except InternalError as error:  # the endpoint's trouble: ask again
                _log.warning("asking remote task %s: %s", task.id, error)
    except asyncio.CancelledError:
        await asyncio.shield(_cancel(remote, task.id))
        raise
    return task


async def _tell(call_id: str, says: str | None) -> None:
    """Tell the loop its remote task waits for a person there (``says``), or no longer."""
    info = activity.info()
    loop = activity.client().get_workflow_handle(
        info.workflow_id or "", run_id=info.workflow_run_id
    )
    waits = RemoteWaits(call_id=call_id, says=None if says is None else cut(says, 1_000, "message"))
    try:
        await loop.signal(REMOTE_WAITS_SIGNAL, waits)
    except RPCError as error:  # shown later, or not: the call goes on regardless
        _log.warning("telling %s its remote task waits: %s", info.workflow_id, error.message)


def _over(task: Task) -> bool:
    return task.status.state == TaskState.TASK_STATE_COMPLETED or task.status.state in ENDED


async def _cancel(remote: Client, task_id: str) -> None:
    """Cancel the remote task, as far as the endpoint lets (it may have ended meanwhile)."""
    if not task_id:
        return
    try:
        await asyncio.wait_for(remote.cancel_task(CancelTaskRequest(id=task_id)), _CANCEL_SECONDS)
    except (A2AError, TimeoutError) as error:
        _log.warning("cancel of remote task %s: %s", task_id, error)


def _unknown(ask: RemoteDelegation, why: str) -> OutcomeUnknown:
    return OutcomeUnknown(
        f"the outcome of delegating to the remote agent {ask.agent!r} is unknown: an earlier "
        f"attempt was lost after it sent the task, and {why}; it was not sent again",
        non_retryable=True,
    )


def _refused_or_down(agent: str, error: A2AClientError) -> Exception:
    """An endpoint that answered 4xx refuses (not retried); anything else is down (retried)."""
    cause = error.__cause__
    if isinstance(cause, httpx.HTTPStatusError):
        status = cause.response.status_code
        if 400 <= status < 500 and status not in (408, 429):
            return RemoteAgentFailed(
                f"the endpoint of the remote agent {agent!r} refused the request (HTTP {status})"
            )
    return ToolUnavailable(f"the remote agent {agent!r} cannot be reached: {error}")


class _Capped(httpx.AsyncBaseTransport):
    """httpx's transport, its responses' bodies held to ``most`` bytes."""

    def __init__(self, most: int) -> None:
        self._inner = httpx.AsyncHTTPTransport()
        self._most = most

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self._inner.handle_async_request(request)
        said = response.headers.get("content-length", "")
        if said.isdigit() and int(said) > self._most:
            await response.aclose()
            raise _too_long(self._most)
        assert isinstance(response.stream, httpx.AsyncByteStream)  # an async transport's
        response.stream = _CappedStream(response.stream, self._most)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


class _CappedStream(httpx.AsyncByteStream):
    def __init__(self, inner: httpx.AsyncByteStream, most: int) -> None:
        self._inner, self._most = inner, most

    async def __aiter__(self) -> AsyncIterator[bytes]:
        read = 0
        async for chunk in self._inner:
            read += len(chunk)
            if read > self._most:
                raise _too_long(self._most)
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


def _too_long(most: int) -> RemoteAgentFailed:
    return RemoteAgentFailed(f"the remote agent's endpoint answered more than {most} bytes")

"""Is a worker there? Whether any worker serves a task queue, asked of the Temporal server.

A client that is about to wait on a worker (``orga run``, a query, a decision) asks first, so
it can say at once that nobody would answer instead of waiting out a timeout. The server knows
two things:

* **worker heartbeats** (``ListWorkers``; Temporal's SDKs send one a minute, and one saying
  ``ShuttingDown`` when a worker stops): a worker that stopped is seen as gone within seconds;
  one that was killed, once its heartbeat is older than ``HEARTBEAT_FRESH``;
* **pollers** (``DescribeTaskQueue``): the identities that polled recently. A stopped worker
  stays listed for minutes, so this is the fallback, for servers and SDKs without heartbeats.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final

from temporalio.api.enums.v1 import TaskQueueType, WorkerStatus
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest, ListWorkersRequest
from temporalio.client import Client
from temporalio.service import RPCError

__all__ = [
    "HEARTBEAT_FRESH",
    "POLLER_FRESH",
    "Presence",
    "identity_with_tools",
    "presence",
    "registries",
    "start_hint",
    "tools_of",
]

HEARTBEAT_FRESH: Final = timedelta(seconds=150)
"""A running worker's heartbeat is at most this old (SDKs send one a minute)."""
POLLER_FRESH: Final = timedelta(minutes=2)
"""A poller seen this recently counts, when the server knows no heartbeats (an idle worker
re-polls every minute)."""


@dataclass(frozen=True)
class Presence:
    """Who serves a task queue, and how the server knows."""

    workers: int
    """Workers seen serving it."""
    source: str
    """``heartbeats`` or ``pollers``."""
    stopped: int = 0
    """Workers whose last heartbeat said they are stopping or stopped."""

    def __bool__(self) -> bool:
        return self.workers > 0


async def presence(client: Client, task_queue: str) -> Presence:
    """Whether a worker serves ``task_queue`` on the client's namespace: one whose heartbeat
    says it runs, or one polling that has not said it stopped."""
    running, stopped = await _heartbeats(client, task_queue)
    if running:
        return Presence(running, "heartbeats", len(stopped))
    response = await client.workflow_service.describe_task_queue(
        DescribeTaskQueueRequest(
            namespace=client.namespace,
            task_queue=TaskQueue(name=task_queue),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
        )
    )
    now = datetime.now(UTC)
    polling = 0
    for poller in response.pollers:
        polled = poller.last_access_time.ToDatetime(tzinfo=UTC)
        # A worker that said it stops is gone, though its last poll stays listed for minutes;
        # a poll after that (a worker started again under the same identity) is not its.
        gone = stopped.get(poller.identity)
        if now - polled <= POLLER_FRESH and (gone is None or polled > gone):
            polling += 1
    return Presence(polling, "pollers", len(stopped))


async def _heartbeats(client: Client, task_queue: str) -> tuple[int, dict[str, datetime]]:
    """Workers of ``task_queue`` whose fresh heartbeat says they run, and when each identity
    whose last heartbeat said it stops said so (none where the server keeps no heartbeats)."""
    try:
        listed = await client.workflow_service.list_workers(
            ListWorkersRequest(
                namespace=client.namespace, query=f"TaskQueue = '{_quoted(task_queue)}'"
            )
        )
    except RPCError:
        return 0, {}  # a server without worker heartbeats: the pollers say it
    now = datetime.now(UTC)
    running = 0
    stopped: dict[str, datetime] = {}
    for info in listed.workers_info:
        beat = info.worker_heartbeat
        if beat.task_queue != task_queue:
            continue
        at = beat.heartbeat_time.ToDatetime(tzinfo=UTC)
        if beat.status != WorkerStatus.WORKER_STATUS_RUNNING:
            stopped[beat.worker_identity] = max(at, stopped.get(beat.worker_identity, at))
        elif now - at <= HEARTBEAT_FRESH:
            running += 1
    return running, stopped


_TOOLS_MARK: Final = " orga-tools:"
_TOOL_NAME: Final = re.compile(r"[A-Za-z0-9_.:-]{1,128}")
_IDENTITY_LIMIT: Final = 900
"""Temporal bounds a worker identity (1,000 bytes by default): a longer list is a digest."""


def identity_with_tools(identity: str, tools: list[str] | None) -> str:
    """A worker identity that says which tools the worker registers (``orga-tools:a,b``; a
    registry too long to list, or not known yet (``None``: MCP servers not connected), is
    ``orga-tools:#…``), so the others and ``orga run`` can tell what each worker can run."""
    if tools is None:
        return f"{identity}{_TOOLS_MARK}#unlisted"
    listed = ",".join(sorted(tools))
    if len(identity) + len(_TOOLS_MARK) + len(listed) > _IDENTITY_LIMIT:
        listed = "#" + hashlib.sha256(listed.encode()).hexdigest()[:16]
    return f"{identity}{_TOOLS_MARK}{listed}"


def tools_of(identity: str) -> frozenset[str] | None:
    """The tools a worker identity says its worker registers (``None``: it does not list them:
    not an orga worker, or a registry too long to list)."""
    _, mark, listed = identity.partition(_TOOLS_MARK)
    if not mark or listed.startswith("#"):
        return None
    # Any process that can poll the queue chooses its identity: only plain names count.
    return frozenset(name for name in listed.split(",") if _TOOL_NAME.fullmatch(name))


async def registries(client: Client, task_queue: str) -> dict[str, frozenset[str] | None]:
    """The live workers of ``task_queue`` (by identity) and the tools each registers (see
    ``tools_of``): from their heartbeats, else from the recent pollers of its activities."""
    try:
        listed = await client.workflow_service.list_workers(
            ListWorkersRequest(
                namespace=client.namespace, query=f"TaskQueue = '{_quoted(task_queue)}'"
            )
        )
    except RPCError:
        listed = None
    now = datetime.now(UTC)
    found: dict[str, frozenset[str] | None] = {}
    if listed is not None:
        for info in listed.workers_info:
            beat = info.worker_heartbeat
            fresh = now - beat.heartbeat_time.ToDatetime(tzinfo=UTC) <= HEARTBEAT_FRESH
            if (
                beat.task_queue == task_queue
                and beat.status == WorkerStatus.WORKER_STATUS_RUNNING
                and fresh
            ):
                found[beat.worker_identity] = tools_of(beat.worker_identity)
    if found:
        return found
    response = await client.workflow_service.describe_task_queue(
        DescribeTaskQueueRequest(
            namespace=client.namespace,
            task_queue=TaskQueue(name=task_queue),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,
        )
    )
    for poller in response.pollers:
        if now - poller.last_access_time.ToDatetime(tzinfo=UTC) <= POLLER_FRESH:
            found[poller.identity] = tools_of(poller.identity)
    return found


def start_hint(task_queue: str) -> str:
    """The command that starts a worker for ``task_queue``, as a user would type it."""
    queue = "" if task_queue == "orga" else f"ORGA_TASK_QUEUE={task_queue} "
    return f"{queue}uv run worker.py (or `{queue}uv run worker.py --scripted` offline)"


def _quoted(value: str) -> str:
    return value.replace("\\", "\\\\").replace("'", "\\'")

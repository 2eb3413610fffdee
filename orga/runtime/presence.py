"""Is a worker there? Whether any worker serves a task queue, asked of the Temporal server.

A client that is about to wait on a worker (``orga run``, a query, a decision) asks first, so
it can say at once that nobody would answer instead of waiting out a timeout. The server knows
two things:

* **worker heartbeats** (``ListWorkers``; Temporal's SDKs send one a minute, and one saying
  ``ShuttingDown`` when a worker stops): a worker that stopped is seen as gone within seconds;
  one that was killed, once its heartbeat is older than ``HEARTBEAT_FRESH``;
* **pollers** (``DescribeTaskQueue``): the identities that polled recently. A stopped worker
  stays listed for minutes, so this is the fallback, for servers and SDKs without heartbeats;
  a poller whose identity's last heartbeat said it stopped, and did not poll since, is gone.

A worker starting beside others says when one registers other tools
(``warn_about_other_registries``); it leaves out, besides those, a worker of this very machine
whose process has ended (Temporal's identity is ``pid@host``): the worker a person stopped
(or killed) to start this one in its place still looks alive to the server for a while.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import socket
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Final, cast

from temporalio.api.enums.v1 import DescribeTaskQueueMode, TaskQueueType, WorkerStatus
from temporalio.api.taskqueue.v1 import PollerInfo, TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest, ListWorkersRequest
from temporalio.client import Client
from temporalio.service import RPCError

if TYPE_CHECKING:
    from orga.runtime.store import Store

__all__ = [
    "HEARTBEAT_FRESH",
    "LIST_LIMIT",
    "NAMES_LIMIT",
    "POLLER_FRESH",
    "Presence",
    "ended_here",
    "presence",
    "publish_tools",
    "registries",
    "seen",
    "start_hint",
    "tools_of",
    "warn_about_other_registries",
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
    kind = TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW
    polling = _fresh(await _described_pollers(client, task_queue, kind), stopped)
    return Presence(len(polling), "pollers", len(stopped))


async def seen(client: Client, task_queue: str, *, within: float) -> bool:
    """Whether the server lists a worker serving ``task_queue`` within ``within`` seconds
    (asked every 0.1 s: a worker's first poll reaches it a moment after the worker starts)."""
    deadline = asyncio.get_running_loop().time() + within
    while True:
        try:
            if await presence(client, task_queue):
                return True
        except RPCError:
            pass  # asked again until the deadline: the answer only says when to log
        if asyncio.get_running_loop().time() >= deadline:
            return False
        await asyncio.sleep(0.1)


async def _heartbeats(client: Client, task_queue: str) -> tuple[int, dict[str, datetime]]:
    """Workers of ``task_queue`` whose fresh heartbeat says they run, and when each identity
    whose last heartbeat said it stops said so (none where the server keeps no heartbeats)."""
    beats = await _worker_heartbeats(client, task_queue)
    if beats is None:
        return 0, {}  # a server without worker heartbeats: the pollers say it
    running, stopped = beats
    return len(running), stopped


async def _worker_heartbeats(
    client: Client, task_queue: str
) -> tuple[list[str], dict[str, datetime]] | None:
    """The identities of the workers of ``task_queue`` whose fresh heartbeat says they run,
    and when each identity whose last heartbeat said it stops said so; None where the server
    keeps no heartbeats."""
    try:
        listed = await client.workflow_service.list_workers(
            ListWorkersRequest(
                namespace=client.namespace, query=f"TaskQueue = '{_quoted(task_queue)}'"
            )
        )
    except RPCError:
        return None
    now = datetime.now(UTC)
    running: list[str] = []
    stopped: dict[str, datetime] = {}
    for info in listed.workers_info:
        beat = info.worker_heartbeat
        if beat.task_queue != task_queue:
            continue
        at = beat.heartbeat_time.ToDatetime(tzinfo=UTC)
        if beat.status != WorkerStatus.WORKER_STATUS_RUNNING:
            stopped[beat.worker_identity] = max(at, stopped.get(beat.worker_identity, at))
        elif now - at <= HEARTBEAT_FRESH:
            running.append(beat.worker_identity)
    return running, stopped


_TOOLS_MARK: Final = " orga-tools:"
_TOOL_NAME: Final = re.compile(r"[A-Za-z0-9_.:-]{1,128}")
_DIGEST: Final = re.compile(r"#[0-9a-f]{12}")
LIST_LIMIT: Final = 1024 * 1024
"""Bytes of a tool list the store may hold for a worker (10 000 names of 64 characters fit)."""
NAMES_LIMIT: Final = 10_000
"""Names a tool list may hold."""


def _registry_key(digest: str) -> str:
    """Where an earlier release kept the list an identity's digest stood for."""
    return f"worker-tools:{digest}"


def _identity_key(task_queue: str, identity: str) -> str:
    return f"worker-tools-of:{task_queue}:{identity}"


def publish_tools(store: Store, task_queue: str, identity: str, tools: list[str] | None) -> None:
    """Say in the store what the worker of ``identity`` on ``task_queue`` registers (``None``:
    it does not say, as a worker with MCP servers, whose tools come and go), so the others and
    ``orga run`` can tell what each worker can run (``tools_of``). A worker starting again under
    the same identity says it again.

    The identity itself stays Temporal's (``pid@host``): Temporal writes it into nearly every
    event of every loop the worker runs (an earlier release named the tools in it)."""
    listed = None if tools is None else sorted(tools)
    store.replace(_identity_key(task_queue, identity), json.dumps(listed).encode())


def tools_of(identity: str, store: Store, task_queue: str) -> frozenset[str] | None:
    """The tools the worker of ``identity`` on ``task_queue`` says it registers (``None``: it
    does not say: not an orga worker, one with MCP servers, or one whose list the store does
    not hold). An identity of an earlier release names them in itself: by a digest of the list
    the store keeps (``orga-tools:#…``), or listed (``orga-tools:a,b``)."""
    _, mark, listed = identity.partition(_TOOLS_MARK)
    if not mark:
        names = _stored(store, _identity_key(task_queue, identity), identity, task_queue)
    elif _DIGEST.fullmatch(listed):
        names = _stored(store, _registry_key(listed), identity, task_queue)
    else:  # ``#unlisted``, or an earlier release's digest of a list too long to name
        names = None if listed.startswith("#") else listed.split(",")
    if names is None:
        return None
    # Any process that can poll the queue chooses its identity: only plain names count (a
    # list from the store was checked whole).
    return frozenset(name for name in names if _TOOL_NAME.fullmatch(name))


def _stored(store: Store, key: str, identity: str, task_queue: str) -> list[str] | None:
    """The tool list the store keeps under ``key`` for ``identity``; None when it keeps none.

    Anyone who can write the store can write there, so what is read is checked: a list no
    worker writes (not JSON, nested, too long, anything but plain tool names) says nothing,
    and is ignored with a warning, never trusted in part (``publish_tools`` writes it again
    when the worker starts)."""
    data = store.get(key)
    if data is None:
        return None
    found = _tool_list(data)
    if not isinstance(found, str):
        return found
    logging.getLogger("orga").warning(
        "the store's tool list of worker %s on task queue %s is not one a worker writes "
        "(%s): ignored, as if the worker said nothing (it writes its list again when it "
        "starts; whoever can write the store wrote this one)",
        repr(identity)[:200],
        repr(task_queue)[:200],
        found,
    )
    return None


def _tool_list(data: bytes) -> list[str] | str:
    """The names ``data`` lists, if it is a list ``publish_tools`` writes (a JSON array of at
    most ``NAMES_LIMIT`` plain tool names, in ``LIST_LIMIT`` bytes); else why it is not."""
    if len(data) > LIST_LIMIT:
        return f"{len(data)} bytes, more than the {LIST_LIMIT} a list may take"
    try:
        names: object = json.loads(data)
    except (ValueError, RecursionError):  # not JSON (or UTF-8), or nested past the decoder
        return "not JSON"
    if not isinstance(names, list):
        return f"a JSON {type(names).__name__}, not a list"
    listed = cast(list[object], names)
    if len(listed) > NAMES_LIMIT:
        return f"{len(listed)} names, more than {NAMES_LIMIT}"
    plain = [n for n in listed if isinstance(n, str) and _TOOL_NAME.fullmatch(n)]
    if len(plain) != len(listed):
        return "an entry that is not a plain tool name"
    return plain


async def registries(
    client: Client, task_queue: str, store: Store, *, with_pollers: bool = False
) -> dict[str, frozenset[str] | None]:
    """The live workers of ``task_queue`` (by identity) and the tools each registers (see
    ``tools_of``; ``store`` holds the lists): from their heartbeats, else from the recent
    pollers of its activities, less those whose heartbeat said they stopped since;
    ``with_pollers``: the pollers too (a worker that just started has polled before its first
    heartbeat)."""
    beats = await _worker_heartbeats(client, task_queue)
    running, stopped = beats if beats is not None else ([], {})
    found = dict.fromkeys(running)
    if not found or with_pollers:
        found |= dict.fromkeys(await _pollers(client, task_queue, stopped))
    return await asyncio.to_thread(lambda: {i: tools_of(i, store, task_queue) for i in found})


async def _pollers(client: Client, task_queue: str, stopped: dict[str, datetime]) -> list[str]:
    """The identities that polled ``task_queue``'s activities recently, and not only before
    their heartbeat said they stop (``stopped``)."""
    kind = TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY
    return _fresh(await _described_pollers(client, task_queue, kind), stopped)


def _fresh(pollers: list[PollerInfo], stopped: dict[str, datetime]) -> list[str]:
    """The identities of ``pollers`` that polled within ``POLLER_FRESH``, each once. A worker
    that said it stops (``stopped``) is gone, though its last poll stays listed for minutes; a
    poll after that (a worker started again under the same identity) is not its."""
    now = datetime.now(UTC)
    found: list[str] = []
    for poller in pollers:
        polled = poller.last_access_time.ToDatetime(tzinfo=UTC)
        gone = stopped.get(poller.identity)
        fresh = now - polled <= POLLER_FRESH and (gone is None or polled > gone)
        if fresh and poller.identity not in found:
            found.append(poller.identity)
    return found


async def _described_pollers(
    client: Client, task_queue: str, kind: TaskQueueType.ValueType
) -> list[PollerInfo]:
    """The pollers the server lists for ``task_queue``'s tasks of ``kind`` (an identity may
    come twice).

    A task queue has partitions (four by default), and each poll lands on one: the plain
    description lists the root partition's pollers only, where a worker whose polls all wait
    on other partitions may not show for a minute (seen: a second worker unseen for 30 s; a
    worker that had just run a loop, "not polling"). The enhanced description
    (``report_pollers``) gathers every partition's; both are asked, and a server without the
    enhanced one answers the plain one alone."""
    queue = TaskQueue(name=task_queue)
    root = await client.workflow_service.describe_task_queue(
        DescribeTaskQueueRequest(namespace=client.namespace, task_queue=queue, task_queue_type=kind)
    )
    pollers = list(root.pollers)
    try:
        every = await client.workflow_service.describe_task_queue(
            DescribeTaskQueueRequest(
                namespace=client.namespace,
                task_queue=queue,
                api_mode=DescribeTaskQueueMode.DESCRIBE_TASK_QUEUE_MODE_ENHANCED,
                task_queue_types=[kind],
                report_pollers=True,
            )
        )
    except RPCError:
        return pollers
    for version in every.versions_info.values():
        for info in version.types_info.values():
            pollers.extend(info.pollers)
    return pollers


def ended_here(identity: str) -> bool:
    """Whether ``identity`` names a worker process of this machine that has ended (Temporal's
    identity is ``pid@host``): the server goes on listing it as a poller for minutes, and its
    last heartbeat says it runs for as long, when it was killed."""
    pid, at, host = identity.partition(_TOOLS_MARK)[0].partition("@")
    if not at or not pid.isdigit() or host != socket.gethostname():
        return False
    try:
        os.kill(int(pid), 0)  # signal 0: is there such a process?
    except ProcessLookupError:
        return True
    except OSError:  # there is one, of another user
        return False
    return False


async def warn_about_other_registries(
    client: Client, task_queue: str, own: str, store: Store
) -> None:
    """A worker (identity ``own``) starting beside one that registers other tools says which
    (each call of a tool one lacks waits for a worker that has it: better to run the same tools
    on all)."""
    mine = await asyncio.to_thread(tools_of, own, store, task_queue)
    if mine is None:
        return
    try:
        others = await registries(client, task_queue, store)
    except RPCError:
        return  # the server could not say: nothing to compare with
    for identity, tools in sorted(others.items()):
        if identity == own or tools is None or tools == mine or ended_here(identity):
            continue
        lacking, extra = sorted(tools - mine), sorted(mine - tools)
        logging.getLogger("orga").warning(
            "another worker of task queue %s (%r) registers other tools: it has %s that this "
            "one lacks, and lacks %s; a call of a tool a worker lacks waits for one that has "
            "it: give every worker of a task queue the same ORGA_TOOL_MODULES",
            task_queue,
            identity.split(_TOOLS_MARK)[0],
            ", ".join(lacking) or "none",
            ", ".join(extra) or "none",
        )


def start_hint(task_queue: str) -> str:
    """The command that starts a worker for ``task_queue``, as a user would type it."""
    queue = "" if task_queue == "orga" else f"ORGA_TASK_QUEUE={task_queue} "
    return f"{queue}uv run worker.py (or `{queue}uv run worker.py --scripted` offline)"


def _quoted(value: str) -> str:
    return value.replace("\\", "\\\\").replace("'", "\\'")

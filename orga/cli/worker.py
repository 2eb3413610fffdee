"""Run an orga worker process: ``uv run worker.py [--scripted]`` / ``uv run orga worker``.

Connects to ``TEMPORAL_ADDRESS`` / ``TEMPORAL_NAMESPACE`` and serves the ``ReasoningLoop`` and
``Task`` workflows and their activities on ``ORGA_TASK_QUEUE`` (``OrgaPlugin``), with the
built-in tools plus every ``@tool`` in the modules named by ``ORGA_TOOL_MODULES``; with
``ORGA_MODEL_TASK_QUEUE`` a second worker polls the model calls' own task queue, at the rate
``ORGA_MODEL_RPS`` the server holds over every worker. ``--scripted`` (or
``ORGA_PROVIDER=scripted``) serves the offline scripted model instead of a real one: no key, no
network, every answer labelled. Ctrl-C (or SIGTERM) stops it gracefully: running activities
finish, workflows continue on another worker. Worker versioning (``ORGA_DEPLOYMENT_NAME``,
``ORGA_BUILD_ID``) and the tuner (``ORGA_WORKER_TUNER``) are this process's; a worker built
with ``OrgaPlugin`` elsewhere takes its own.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import logging
import signal
import sys
from collections.abc import Sequence
from datetime import timedelta

from temporalio.client import Client
from temporalio.common import VersioningBehavior, WorkerDeploymentVersion
from temporalio.worker import (
    ResourceBasedSlotConfig,
    Worker,
    WorkerDeploymentConfig,
    WorkerTuner,
)

from orga.contracts.errors import InvalidConfig
from orga.contracts.vocabulary import SCRIPTED
from orga.plugin import OrgaPlugin
from orga.runtime.connect import connect, ensure_search_attributes
from orga.runtime.presence import seen
from orga.runtime.safe_text import printable
from orga.runtime.settings import Settings
from orga.runtime.store import Store
from orga.scripted.offline import LABEL, OFFLINE_MODEL, serve_offline_model
from orga.worker.conversation_cache import CACHED_CONVERSATIONS

__all__ = ["build_workers", "deployment", "main", "serve", "settle_heap", "worker_tuner"]

log = logging.getLogger("orga.worker")

SEEN_WITHIN = 10.0
"""Seconds a starting worker waits for the server to list it before it says it is up."""


def build_workers(
    client: Client, settings: Settings, plugin: OrgaPlugin, *, task_queue: str | None = None
) -> list[Worker]:
    """The workers one orga process runs: orga's workflows and activities on the task queue,
    and — with ``ORGA_MODEL_TASK_QUEUE`` — one polling the model calls' own task queue."""
    tuner = worker_tuner(settings)  # one for both: they share the machine
    task_queue = task_queue or settings.task_queue
    main = Worker(
        client,
        task_queue=task_queue,
        plugins=[plugin],
        deployment_config=deployment(settings),
        max_cached_workflows=CACHED_CONVERSATIONS,  # a cached loop finds its conversation
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=settings.sticky_timeout),
        graceful_shutdown_timeout=timedelta(seconds=settings.graceful_shutdown),
        tuner=tuner,
    )
    if settings.model_task_queue is None:
        return [main]
    models = Worker(
        client,
        task_queue=settings.model_task_queue,
        activities=plugin.parts(client).model_activities(),
        interceptors=[plugin.caller_check(client, task_queue)],  # its loops' queue
        max_task_queue_activities_per_second=settings.model_rps,
        deployment_config=deployment(settings),
        tuner=tuner,
        graceful_shutdown_timeout=timedelta(seconds=settings.graceful_shutdown),
    )
    return [main, models]


def deployment(settings: Settings) -> WorkerDeploymentConfig | None:
    """Worker versioning when the worker names its deployment (``ORGA_DEPLOYMENT_NAME``): loops
    and tasks stay on the version (build) they started on; new ones go to the deployment's
    current version (``temporal worker deployment set-current-version``)."""
    if settings.deployment_name is None:
        return None
    if settings.build_id is None:
        raise InvalidConfig(
            f"ORGA_DEPLOYMENT_NAME={settings.deployment_name} needs ORGA_BUILD_ID, the version "
            "of the code this worker runs (the git commit, an image tag): loops stay on the "
            "build they started on"
        )
    return WorkerDeploymentConfig(
        version=WorkerDeploymentVersion(
            deployment_name=settings.deployment_name, build_id=settings.build_id
        ),
        use_worker_versioning=True,
        default_versioning_behavior=VersioningBehavior.PINNED,
    )


def worker_tuner(settings: Settings) -> WorkerTuner | None:
    """How many tasks the worker takes at once: with ``ORGA_WORKER_TUNER=resource``, as many
    as the machine's CPU and memory allow — Temporal's resource-based tuner hands out a slot
    only while both are under their targets, so a saturated worker leaves tasks on the queue
    (for other workers) instead of running more than it can heartbeat for. None (``fixed``, the
    default): the SDK's fixed slot counts."""
    if settings.tuner == "fixed":
        return None
    return WorkerTuner.create_resource_based(
        target_memory_usage=settings.target_memory,
        target_cpu_usage=settings.target_cpu,
        workflow_config=ResourceBasedSlotConfig(minimum_slots=5, maximum_slots=1_000),
        activity_config=ResourceBasedSlotConfig(
            minimum_slots=2, maximum_slots=500, ramp_throttle=timedelta(milliseconds=20)
        ),
        local_activity_config=ResourceBasedSlotConfig(
            minimum_slots=2, maximum_slots=500, ramp_throttle=timedelta(milliseconds=20)
        ),
    )


def settle_heap() -> None:
    """Leave what the process built to start (modules, settings, the workers) out of the
    garbage collector's later passes (``gc.freeze``): those objects live as long as the process,
    and a full collection would walk all of them again each time the loops' own objects trigger
    one (measured on the bench's worker: 2.4 to 3.2 ms of collection per 5-turn loop before,
    0.7 after; docs/guides/performance.md)."""
    gc.collect()
    gc.freeze()


async def serve(settings: Settings, stop: asyncio.Event) -> None:
    """Run a worker until ``stop`` is set, then shut it down gracefully."""
    store = settings.store()
    client = await connect(settings, store=store, metrics=True)
    if settings.metrics_address:
        log.info("serving metrics at http://%s/metrics", settings.metrics_address)
    added = await ensure_search_attributes(client)
    if added:
        log.info("registered search attributes %s", ", ".join(added))
    async with contextlib.AsyncExitStack() as stack:
        if settings.scripted:
            settings = stack.enter_context(serve_offline_model(settings))
            log.info(
                "serving the offline scripted model %s as provider 'scripted' (no API key, no "
                "network; answers are labelled %s)",
                OFFLINE_MODEL,
                LABEL,
            )
        # The MCP servers connect before anything is served: a required one that is down (or
        # two tools sharing a name) stops the worker here, naming it.
        mcp = None
        if settings.mcp_servers_file is not None:  # the MCP SDK only for a worker that uses it
            from orga.tools.mcp.hub import open_mcp

            mcp = await stack.enter_async_context(open_mcp(settings.mcp_servers_file))
        plugin = OrgaPlugin(settings=settings, store=store, mcp=mcp)
        if plugin.tracer_provider is not None:
            log.info("tracing: spans leave through the OTEL_* exporter settings")
            stack.callback(plugin.tracer_provider.shutdown)  # flush the spans still buffered
        workers = build_workers(client, settings, plugin)
        worker = workers[0]
        if settings.store_retention_days is not None:
            stack.push_async_callback(_cancelled, asyncio.create_task(_prune(store, settings)))
        for each in workers:
            await stack.enter_async_context(each)
        settle_heap()
        # Said once the server lists it: a reader who runs `orga run` on seeing this line finds
        # a worker serving the queue (its first poll reaches the server a moment after start).
        if not await seen(client, worker.task_queue, within=SEEN_WITHIN):
            log.warning(
                "the server does not list this worker as polling task queue %s yet (%gs "
                "after it started): `orga run` may say no worker serves it until it does",
                worker.task_queue,
                SEEN_WITHIN,
            )
        log.info(
            "orga worker on %s, namespace %s, task queue %s",
            settings.temporal_address,
            settings.temporal_namespace,
            worker.task_queue,
        )
        if len(workers) > 1:
            log.info(
                "model calls on task queue %s (%s)",
                settings.model_task_queue,
                f"at most {settings.model_rps:g}/s over every worker"
                if settings.model_rps
                else "no rate limit",
            )
        await stop.wait()
    log.info("orga worker stopped")


async def _prune(store: Store, settings: Settings) -> None:
    """Forget stored payloads past the retention, at start and then every hour."""
    days = settings.store_retention_days
    assert days is not None
    while True:
        removed = await asyncio.to_thread(store.prune, days)
        if removed:
            log.info("pruned %d stored payload(s) older than %g day(s)", removed, days)
        await asyncio.sleep(3600)


async def _cancelled(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python worker.py``."""
    parser = argparse.ArgumentParser(
        prog="worker.py (orga worker)",
        description="Run an orga worker. Configuration comes from the environment "
        "(TEMPORAL_ADDRESS, ORGA_TASK_QUEUE, OPENROUTER_API_KEY, ORGA_TOOL_MODULES, …: see "
        "docs/reference/environment.md).",
    )
    parser.add_argument(
        "--scripted",
        action="store_true",
        help="serve the offline scripted model (no API key, no network; answers are labelled)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    for chatty in ("httpx", "httpcore", "mcp"):  # a line per request: the log is orga's events
        logging.getLogger(chatty).setLevel(logging.WARNING)
    try:
        settings = Settings.from_env()
    except InvalidConfig as error:
        print(printable(f"orga worker: {error.message}"), file=sys.stderr)
        return 2
    if args.scripted:
        settings = settings.model_copy(update={"default_provider": SCRIPTED})

    async def run() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await serve(settings, stop)

    try:
        asyncio.run(run())
    except InvalidConfig as error:
        print(printable(f"orga worker: {error.message}"), file=sys.stderr)
        return 2
    except RuntimeError as error:
        if "connect" not in str(error).lower():
            raise
        print(
            printable(
                f"orga worker: cannot reach Temporal at {settings.temporal_address} ({error}). "
                "Start one with `uv run orga server`, or set TEMPORAL_ADDRESS."
            ),
            file=sys.stderr,
        )
        return 1
    return 0

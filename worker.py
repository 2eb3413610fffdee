"""Run an orga worker: ``uv run worker.py [--scripted]``.

Connects to ``TEMPORAL_ADDRESS`` / ``TEMPORAL_NAMESPACE`` and serves the ``ReasoningLoop`` and
``Task`` workflows and their activities on ``ORGA_TASK_QUEUE``, with the built-in tools plus
every ``@tool`` in the modules named by ``ORGA_TOOL_MODULES``. ``--scripted`` (or
``ORGA_PROVIDER=scripted``) serves the offline scripted model instead of a real one: no key,
no network, every answer labelled. Ctrl-C (or SIGTERM) stops it gracefully: running
activities finish, workflows continue on another worker.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys
from collections.abc import Iterable, Sequence
from datetime import timedelta

import httpx
from temporalio.client import Client
from temporalio.common import VersioningBehavior, WorkerDeploymentVersion
from temporalio.worker import (
    Interceptor,
    Replayer,
    ResourceBasedSlotConfig,
    Worker,
    WorkerDeploymentConfig,
    WorkerTuner,
)

from activities.builtin_tools import builtin_tools
from activities.cedar import CedarGate
from activities.conversation_cache import CACHED_CONVERSATIONS
from activities.critic import CriticActivities
from activities.inference import InferenceActivities
from activities.knowledge import KnowledgeActivities, knowledge_tools
from activities.opa import OpaGate
from activities.policy import PolicyActivities
from activities.providers.embeddings import embedder
from activities.setup import SetupActivities
from activities.summary import SummaryActivities
from activities.tools import ToolActivities, load_tool_modules
from orga.contracts.errors import InvalidConfig
from orga.contracts.vocabulary import SCRIPTED, PolicyMode
from orga.runtime.agents import AgentRegistry
from orga.runtime.blobs import BlobStore
from orga.runtime.connect import connect, ensure_search_attributes
from orga.runtime.extstore import data_converter
from orga.runtime.knowledge import open_knowledge
from orga.runtime.ledger import Ledger
from orga.runtime.mcp import McpHub, open_mcp
from orga.runtime.offline import LABEL, OFFLINE_MODEL, serve_offline_model
from orga.runtime.sandbox import workflow_runner
from orga.runtime.settings import Settings
from orga.runtime.store import Store
from orga.runtime.tools import Tool, ToolRegistry, ToolSource
from orga.runtime.tracing import configure_tracing, tracing_interceptors
from workflows.loop import ReasoningLoopWorkflow
from workflows.task import TaskWorkflow

__all__ = [
    "WORKFLOWS",
    "build_agents",
    "build_registry",
    "build_workers",
    "deployment",
    "main",
    "replayer",
    "serve",
]

WORKFLOWS = [ReasoningLoopWorkflow, TaskWorkflow]
"""Every workflow an orga worker serves."""

log = logging.getLogger("orga.worker")


def build_registry(
    settings: Settings,
    extra_tools: Iterable[Tool] = (),
    knowledge: KnowledgeActivities | None = None,
    sources: Iterable[ToolSource] = (),
) -> ToolRegistry:
    """Built-in tools (with ``recall_knowledge`` and ``store_knowledge`` over ``knowledge``),
    the tools of ``ORGA_TOOL_MODULES``, then ``extra_tools``; then those of ``sources`` (the
    MCP servers), which come and go while the worker runs."""
    return ToolRegistry(
        [
            *builtin_tools(settings),
            *(knowledge_tools(knowledge) if knowledge is not None else []),
            *load_tool_modules(settings.tool_modules),
            *extra_tools,
        ],
        sources,
    )


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


def build_agents(settings: Settings, engines: frozenset[PolicyMode]) -> AgentRegistry:
    """The worker's agents: ``ORGA_AGENTS``, or the implicit one (floor ``ORGA_POLICY``).

    Raises:
        InvalidConfig: the agents file is invalid, or a floor needs a gate not configured here.
    """
    if settings.agents_file is not None:
        return AgentRegistry.load(settings.agents_file, engines)
    if settings.policy_floor not in engines:
        raise InvalidConfig(
            f"ORGA_POLICY={settings.policy_floor} needs a gate this worker has not configured "
            "(ORGA_POLICY_DIR for cedar, ORGA_OPA_URL for opa)"
        )
    return AgentRegistry.implicit(settings.policy_floor)


def build_workers(
    client: Client,
    settings: Settings,
    http: httpx.AsyncClient,
    *,
    task_queue: str | None = None,
    extra_tools: Iterable[Tool] = (),
    store: Store | None = None,
    mcp: McpHub | None = None,
) -> list[Worker]:
    """The workers one orga process runs (the one wiring every process uses): the worker of
    orga's workflows and activities, and — with ``ORGA_MODEL_TASK_QUEUE`` — one polling the
    model calls' own task queue, whose rate (``ORGA_MODEL_RPS``) the Temporal server holds over
    every worker of that queue.

    ``store`` is the store the client's data converter uses (the settings' by default);
    ``mcp`` the connected MCP servers (``open_mcp``), whose tools it offers too.
    """
    store = store or settings.store()
    shared = store
    knowledge = KnowledgeActivities(lambda: open_knowledge(shared, embedder(settings)))
    registry = build_registry(settings, extra_tools, knowledge, [mcp] if mcp is not None else [])
    blobs = BlobStore(store)
    critic = CriticActivities(settings=settings, http=http)

    cedar = CedarGate(settings.policy_dir) if settings.policy_dir is not None else None
    opa = OpaGate(settings.opa_url, http) if settings.opa_url else None
    offered: list[PolicyMode] = ["default"]
    if cedar is not None:
        offered.append("cedar")
    if opa is not None:
        offered.append("opa")
    engines = frozenset(offered)
    policy = PolicyActivities(
        registry=registry,
        cedar=cedar,
        opa=opa,
        allow_permissive=settings.allow_permissive,
        allow_hidden=settings.file_read_hidden,
    )
    inference = InferenceActivities(
        settings=settings,
        http=http,
        registry=registry,
        client=client,
        blobs=blobs,
        decide=policy.evaluate_policy,  # the default gate, decided where the answer arrives
    )
    summary = SummaryActivities(settings=settings, http=http, cache=inference.cache)
    tools = ToolActivities(registry=registry, blobs=blobs, ledger=Ledger(store))
    setup = SetupActivities(
        settings=settings,
        registry=registry,
        agents=build_agents(settings, engines),
        engines=engines,
    )
    tuner = worker_tuner(settings)  # one for both: they share the machine
    main = Worker(
        client,
        task_queue=task_queue or settings.task_queue,
        workflows=WORKFLOWS,
        workflow_runner=workflow_runner(),
        deployment_config=deployment(settings),
        max_cached_workflows=CACHED_CONVERSATIONS,  # a cached loop finds its conversation
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=settings.sticky_timeout),
        graceful_shutdown_timeout=timedelta(seconds=settings.graceful_shutdown),
        tuner=tuner,
        activities=[
            setup.resolve_loop,
            setup.resolve_task,
            inference.call_model,
            policy.evaluate_policy,
            tools.run_tool,
            knowledge.search_knowledge,
            knowledge.write_knowledge,
            critic.critique,
            summary.summarise_context,
        ],
    )
    if settings.model_task_queue is None:
        return [main]
    models = Worker(
        client,
        task_queue=settings.model_task_queue,
        activities=[inference.call_model, critic.critique, summary.summarise_context],
        max_task_queue_activities_per_second=settings.model_rps,
        deployment_config=deployment(settings),
        tuner=tuner,
        graceful_shutdown_timeout=timedelta(seconds=settings.graceful_shutdown),
    )
    return [main, models]


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


def replayer(store: Store | None = None, interceptors: Sequence[Interceptor] = ()) -> Replayer:
    """A replayer of orga's workflows, in the same sandbox and with the same converter as a
    worker (reading stored payloads from ``store``, the settings' by default): what replay
    tests, ``temporal workflow show`` exports and ``orga audit --verify`` are checked with."""
    return Replayer(
        workflows=WORKFLOWS,
        workflow_runner=workflow_runner(),
        data_converter=data_converter(lambda: store or Settings.from_env().store()),
        interceptors=interceptors,
    )


def http_client() -> httpx.AsyncClient:
    """The worker's one shared HTTP client. It retries nothing: Temporal owns retries."""
    return httpx.AsyncClient(
        timeout=httpx.Timeout(120.0, connect=10.0),
        limits=httpx.Limits(max_connections=100, max_keepalive_connections=20),
        transport=httpx.AsyncHTTPTransport(retries=0),
    )


async def serve(settings: Settings, stop: asyncio.Event) -> None:
    """Run a worker until ``stop`` is set, then shut it down gracefully."""
    store = settings.store()
    tracing = configure_tracing()
    client = await connect(
        settings,
        store=store,
        metrics=True,
        interceptors=tracing_interceptors() if tracing is not None else (),
    )
    if settings.metrics_address:
        log.info("serving metrics at http://%s/metrics", settings.metrics_address)
    if tracing is not None:
        log.info("tracing: spans leave through the OTEL_* exporter settings")
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
        http = await stack.enter_async_context(http_client())
        mcp = await stack.enter_async_context(open_mcp(settings.mcp_servers_file))
        workers = build_workers(client, settings, http, store=store, mcp=mcp)
        worker = workers[0]
        if settings.store_retention_days is not None:
            stack.push_async_callback(_cancelled, asyncio.create_task(_prune(store, settings)))
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
        for each in workers:
            await stack.enter_async_context(each)
        await stop.wait()
    if tracing is not None:
        tracing.shutdown()  # flush the spans still buffered
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
        prog="worker.py",
        description="Run an orga worker. Configuration comes from the environment "
        "(TEMPORAL_ADDRESS, ORGA_TASK_QUEUE, OPENROUTER_API_KEY, ORGA_TOOL_MODULES, …: see the "
        "README's Configuration section).",
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
        print(f"orga worker: {error.message}", file=sys.stderr)
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
        print(f"orga worker: {error.message}", file=sys.stderr)
        return 2
    except RuntimeError as error:
        if "connect" not in str(error).lower():
            raise
        print(
            f"orga worker: cannot reach Temporal at {settings.temporal_address} ({error}). "
            "Start one with `uv run orga server`, or set TEMPORAL_ADDRESS.",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

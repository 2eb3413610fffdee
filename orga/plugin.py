"""orga in any Temporal worker: ``OrgaPlugin``, on Temporal's ``SimplePlugin``.

One line brings orga into a client and the workers built from it — its data converter (pydantic,
large payloads in orga's store), its workflows (``ReasoningLoop``, ``Task``) in their sandbox,
every activity they call, and tracing when ``OTEL_*`` is set:

    from temporalio.client import Client
    from temporalio.worker import Worker
    from orga import OrgaPlugin, tool

    @tool
    def lookup(sku: str) -> str:
        \"\"\"Look a product up. Args: sku: the product's code.\"\"\"
        ...

    plugin = OrgaPlugin(tools=[lookup])
    client = await Client.connect(**plugin.connect_config(), plugins=[plugin])
    async with Worker(client, task_queue=plugin.settings.task_queue):  # plugins come along
        ...

The worker's settings are the environment's (``Settings.from_env``: providers and their keys,
agents, policies, the store…) unless given; ``connect_config()`` reaches the Temporal they
name as every orga process does (``TEMPORAL_ADDRESS``, else ``localhost:7233``). The plugin
opens what its activities need when the worker runs — an HTTP client, the MCP servers of
``ORGA_MCP_SERVERS`` — and closes it after. It is the one wiring every orga process uses:
``worker.py`` / ``orga worker``, ``orga demo``, the tests and the benchmarks.

Over 400 lines: it is the one place that builds every activity from its parts (settings,
store, HTTP client, registries); split, a worker's wiring would be read in two places.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import weakref
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable, Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any, cast

import httpx
from temporalio.client import Client
from temporalio.envconfig import ClientConnectConfig
from temporalio.plugin import SimplePlugin
from temporalio.runtime import Runtime
from temporalio.service import RPCError
from temporalio.worker import Interceptor, Replayer, Worker, WorkerConfig

from orga.activities.answers import check_answer
from orga.activities.continued import ContinuedRuns
from orga.activities.critic import CriticActivities
from orga.activities.deployments import CurrentBuilds
from orga.activities.forks import fetch_fork_point
from orga.activities.inference import InferenceActivities
from orga.activities.judges import JudgeActivities, load_judges
from orga.activities.knowledge import KnowledgeActivities
from orga.activities.policy import PolicyActivities
from orga.activities.principals import (
    PrincipalResolver,
    SpendGuard,
    binding_use,
    parent_check,
)
from orga.activities.remote_agents import RemoteAgents
from orga.activities.setup import SetupActivities
from orga.activities.summary import SummaryActivities
from orga.activities.tools import ToolActivities
from orga.contracts.errors import InvalidConfig
from orga.contracts.vocabulary import SCRIPTED, PolicyMode
from orga.contracts.wire import build_contracts
from orga.gates.cedar import CedarGate
from orga.gates.opa import OpaGate
from orga.knowledge import open_knowledge
from orga.knowledge.embeddings import embedder
from orga.knowledge.tools import knowledge_tools
from orga.runtime.connect import StartAttributes, connect_config
from orga.runtime.converter import OrgaPayloadConverter, data_converter
from orga.runtime.pauses import PauseBook
from orga.runtime.presence import publish_tools, registries, warn_about_other_registries
from orga.runtime.settings import Settings
from orga.runtime.spend import SpendLedger
from orga.runtime.store import Store
from orga.runtime.tls import tls
from orga.runtime.tracing import configure_tracing, tracing_interceptors
from orga.scripted.offline import LABEL, OFFLINE_MODEL, serve_offline_model
from orga.tools._builtin import builtin_tools
from orga.tools._loading import load_tool_modules
from orga.tools.ledger import Ledger
from orga.tools.mcp.config import load_mcp_config
from orga.tools.sdk import Tool, ToolRegistry, ToolSource
from orga.worker.agent_registry import AgentRegistry
from orga.worker.blobs import BlobStore
from orga.worker.callers import CallerCheck, Runs, activity_name
from orga.worker.eager import NotEager
from orga.worker.heartbeat import throttle_heartbeats
from orga.worker.principals import PrincipalRegistry
from orga.worker.provider_health import ProviderHealth
from orga.worker.sandbox import workflow_runner
from orga.workflows.loop import ReasoningLoopWorkflow
from orga.workflows.task import TaskWorkflow

if TYPE_CHECKING:  # the MCP SDK (~0.5 s of import) only for a worker with MCP servers
    from orga.tools.mcp.hub import McpHub

__all__ = ["WORKFLOWS", "OrgaPlugin", "http_client", "replayer"]

WORKFLOWS = [ReasoningLoopWorkflow, TaskWorkflow]
"""Every workflow an orga worker serves."""


def http_client() -> httpx.AsyncClient:
    """A worker's one shared HTTP client. It retries nothing: Temporal owns retries."""
    return httpx.AsyncClient(
        timeout=httpx.Timeout(120.0, connect=10.0),
        limits=httpx.Limits(max_connections=100, max_keepalive_connections=20),
        transport=httpx.AsyncHTTPTransport(retries=0, verify=tls()),
    )


def replayer(
    store: Store | None = None,
    interceptors: Sequence[Interceptor] = (),
    *,
    strict: bool = False,
    runtime: Runtime | None = None,
) -> Replayer:
    """A replayer of orga's workflows, in the same sandbox and with the same converter as a
    worker (reading stored payloads from ``store``, the settings' by default): what replay
    tests, ``temporal workflow show`` exports and ``orga audit --verify`` are checked with.
    ``strict`` re-imports the workflows' helpers for every run so the sandbox checks them
    (``orga.worker.sandbox``); ``runtime``: the Temporal runtime it replays in (the default's,
    else: ``quiet_runtime`` in the CLI)."""
    build_contracts()  # built before any workflow task, not in its first (orga.contracts.wire)
    return Replayer(
        workflows=WORKFLOWS,
        workflow_runner=workflow_runner(strict=strict),
        data_converter=data_converter(lambda: store or Settings.from_env().store()),
        interceptors=interceptors,
        runtime=runtime,
    )


class OrgaPlugin(SimplePlugin):
    """orga's workflows, activities, converter and sandbox, for a client and its workers."""

    def __init__(
        self,
        *,
        tools: Iterable[Tool] = (),
        settings: Settings | None = None,
        store: Store | None = None,
        http: httpx.AsyncClient | None = None,
        mcp: McpHub | None = None,
        tracing: bool = True,
    ) -> None:
        """Args:
        tools: functions decorated with ``@tool``, offered besides the built-in ones and those
            of ``ORGA_TOOL_MODULES`` (a loop still names the ones it uses).
        settings: the worker's settings (default: ``Settings.from_env()``). With
            ``ORGA_PROVIDER=scripted`` (and no ``scripted`` provider of their own) the plugin
            serves the offline scripted model, as ``worker.py --scripted`` does: no key, no
            network, answers labelled ``[offline scripted model]``.
        store: orga's store (default: the settings'); the converter keeps large payloads
            there, the ledger and the knowledge live there.
        http: the HTTP client model calls share (default: one of the plugin's own, opened and
            closed with the worker).
        mcp: MCP servers already connected (default: the settings' ``ORGA_MCP_SERVERS``,
            connected when the worker runs).
        tracing: OpenTelemetry through Temporal's integration when ``OTEL_*`` is set.
        """
        self.settings = settings or Settings.from_env()
        if self.settings.scripted and SCRIPTED not in self.settings.providers:
            self.settings = self._serve_offline_model(self.settings)
        elif not self.settings.has_a_model():
            logging.getLogger("orga").warning(
                "this worker has no model: no provider key is set (OPENROUTER_API_KEY, "
                "OPENAI_API_KEY, ANTHROPIC_API_KEY) nor a local OPENAI_BASE_URL, so a loop's "
                "model call here fails; set one, or ORGA_PROVIDER=scripted (worker.py "
                "--scripted) for the offline model (a worker that only runs tools needs none)"
            )
        self._store = store
        self._tools = list(tools)
        self._http = http
        self._own_http = http is None
        self._mcp = mcp
        self._own_mcp = mcp is None and self.settings.mcp_servers_file is not None
        self._parts: dict[int, _Parts] = {}
        self._runs = Runs()
        """The runs this process's workers know to be orga's (``orga.worker.callers``)."""
        self.tracer_provider = configure_tracing() if tracing else None
        """The tracer provider the plugin installed (``OTEL_*`` set): shut it down to flush."""
        super().__init__(  # pyright: ignore[reportUnknownMemberType] (SimplePlugin's untyped callables)
            "orga",
            data_converter=data_converter(self.store),
            workflows=WORKFLOWS,
            workflow_runner=workflow_runner(),
            interceptors=[
                StartAttributes(),
                NotEager(),
                *(tracing_interceptors() if self.tracer_provider is not None else ()),
            ],
        )

    def _serve_offline_model(self, settings: Settings) -> Settings:
        """``ORGA_PROVIDER=scripted``: the offline scripted model on 127.0.0.1, as
        ``worker.py --scripted`` serves it, for as long as the plugin lives."""
        served = contextlib.ExitStack()
        settings = served.enter_context(serve_offline_model(settings))
        weakref.finalize(self, served.close)
        logging.getLogger("orga").info(
            "serving the offline scripted model %s as provider 'scripted' (no API key, no "
            "network; answers are labelled %s)",
            OFFLINE_MODEL,
            LABEL,
        )
        return settings

    def store(self) -> Store:
        """orga's store, opened when first needed."""
        if self._store is None:
            self._store = self.settings.store()
        return self._store

    def connect_config(self) -> ClientConnectConfig:
        """The Temporal the plugin's settings name, as ``Client.connect`` takes it — the
        address (``TEMPORAL_ADDRESS``, default ``localhost:7233``), namespace, API key and TLS
        every orga process connects with:
        ``await Client.connect(**plugin.connect_config(), plugins=[plugin])``."""
        return connect_config(self.settings)

    # ---- workers --------------------------------------------------------------------------

    def configure_worker(self, config: WorkerConfig) -> WorkerConfig:
        """Give the worker orga's workflows and every activity they call."""
        config = super().configure_worker(config)
        # WorkerConfig is a TypedDict whose callables temporalio leaves untyped: the two keys
        # read here are the worker's client and the activities given so far.
        client = cast(Client, config.get("client"))  # pyright: ignore[reportUnknownMemberType]
        given = cast(
            "list[Callable[..., Any]]",
            list(config.get("activities") or []),  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
        )
        converter = client.data_converter
        if not issubclass(converter.payload_converter_class, OrgaPayloadConverter):
            raise InvalidConfig(
                "the worker's client does not use orga's data converter, and a worker encodes "
                "with its client's: pass OrgaPlugin to Client.connect(plugins=[...]) (or connect "
                "with orga.connect())"
            )
        build_contracts()  # built before any task, not in the first that needs each one
        if not config.get("deployment_config") and not config.get("build_id"):  # pyright: ignore[reportUnknownMemberType]
            config["build_id"] = self.settings.build_id or _default_build()
        parts = self.parts(client)
        config["activities"] = [*given, *parts.activities()]
        task_queue = cast(str, config.get("task_queue"))  # pyright: ignore[reportUnknownMemberType]
        checked = self.caller_check(client, task_queue)
        config["interceptors"] = [*(config.get("interceptors") or []), checked]  # pyright: ignore[reportUnknownMemberType]
        throttle_heartbeats(config)  # a cancel reaches a running tool within a second
        names = parts.registry.names()
        # The store says what this worker registers (orga.runtime.presence.tools_of); with MCP
        # servers, its tools come and go with them, so it lists none.
        identity = config.get("identity") or client.identity  # pyright: ignore[reportUnknownMemberType]
        publish_tools(self.store(), task_queue, identity, names if self._mcp is None else None)
        logging.getLogger("orga").info(
            "this worker registers %d tool(s): %s", len(names), ", ".join(names) or "none"
        )
        return config

    def caller_check(self, client: Client, loops_queue: str) -> CallerCheck:
        """What refuses orga's activities to any workflow but orga's own loops and tasks of
        the activity's queue or ``loops_queue`` (``orga.worker.callers``), for a worker of
        ``client``."""
        names = [activity_name(fn) for fn in self.parts(client).activities()]
        return CallerCheck(client, loops_queue, names, self._runs)

    def parts(self, client: Client) -> _Parts:
        """The activity objects for workers of ``client`` (made once per client)."""
        found = self._parts.get(id(client))
        if found is None:
            if self._mcp is None and self._own_mcp:
                assert self.settings.mcp_servers_file is not None
                from orga.tools.mcp.hub import McpHub

                self._mcp = McpHub(load_mcp_config(self.settings.mcp_servers_file))
            if self._http is None:
                self._http = http_client()
            found = _Parts(client, self.settings, self.store(), self._http, self._tools, self._mcp)
            self._parts[id(client)] = found
        return found

    async def run_worker(self, worker: Worker, next: Callable[[Worker], Awaitable[None]]) -> None:
        """Connect the MCP servers and keep the HTTP client open while the worker runs; say so
        when another worker of the task queue registers other tools."""
        async with self._running():
            own = worker.config(active_config=True).get("identity") or worker.client.identity  # pyright: ignore[reportUnknownMemberType]
            await warn_about_other_registries(worker.client, worker.task_queue, own, self.store())
            await super().run_worker(worker, next)

    @contextlib.asynccontextmanager
    async def _running(self) -> AsyncGenerator[None]:
        async with contextlib.AsyncExitStack() as stack:
            if self._own_mcp and self._mcp is not None:
                await self._mcp.start()
                stack.push_async_callback(self._mcp.stop)
            if self._own_http and self._http is not None:
                stack.push_async_callback(self._http.aclose)
            yield


def _default_build() -> str:
    """What an unversioned worker's tasks are marked with in histories: ``orga-<version>``.
    Temporal's own default hashes the code of every module the process has loaded (~0.2 s of
    each worker's start here, seconds where no bytecode is cached)."""
    try:
        return f"orga-{version('orga')}"
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "orga"


class _Parts:
    """The activities of one client's workers, over one registry, store and HTTP client."""

    def __init__(
        self,
        client: Client,
        settings: Settings,
        store: Store,
        http: httpx.AsyncClient,
        tools: Sequence[Tool],
        mcp: McpHub | None,
    ) -> None:
        knowledge = KnowledgeActivities(lambda: open_knowledge(store, embedder(settings)))
        sources: list[ToolSource] = [mcp] if mcp is not None else []
        self.registry = _build_registry(settings, tools, knowledge, sources)
        blobs = BlobStore(store)
        cedar = CedarGate(settings.policy_dir) if settings.policy_dir is not None else None
        opa = OpaGate(settings.opa_url, http) if settings.opa_url else None
        offered: list[PolicyMode] = ["default"]
        if cedar is not None:
            offered.append("cedar")
        if opa is not None:
            offered.append("opa")
        engines = frozenset(offered)
        # A local activity that needs tools this worker lacks runs on one that has them.
        elsewhere = functools.partial(_registered_elsewhere, client, store)
        self.policy = PolicyActivities(
            registry=self.registry,
            cedar=cedar,
            opa=opa,
            allow_permissive=settings.allow_permissive,
            allow_hidden=settings.file_read_hidden,
            blobs=blobs,
            elsewhere=elsewhere,
        )
        principals = PrincipalRegistry.load(settings)
        # The ledger is in the store every worker shares: a principal's loops charged together.
        health = ProviderHealth()  # one breaker per model for the loop's and the side calls
        spend = SpendGuard(principals, SpendLedger(store), settings.model_prices, health)
        self.pauses = pauses = PauseBook(store)
        """The pauses this worker's activities read (a pause made through it is seen at once;
        one made elsewhere within a second)."""
        self.inference = InferenceActivities(
            settings=settings,
            http=http,
            registry=self.registry,
            client=client,
            blobs=blobs,
            spend=spend,
            decide=self.policy.decide,  # the default gate, decided where answers arrive
            pauses=pauses,
            health=health,
            elsewhere=elsewhere,
        )
        cache = self.inference.cache
        self.summary = SummaryActivities(settings=settings, http=http, cache=cache, spend=spend)
        self.critic = CriticActivities(settings=settings, http=http, spend=spend)
        self.tools = ToolActivities(
            registry=self.registry,
            blobs=blobs,
            ledger=Ledger(store),
            pauses=pauses,
            elsewhere=elsewhere,
        )
        self.knowledge = knowledge
        agents = _build_agents(settings, engines)
        _say_who_decides(agents)
        judging = {j.agent: agents.get(j.agent) for j in agents.judges if j.agent is not None}
        self.judges = JudgeActivities(
            load_judges(agents.judges, agents.approvers, agents.folder, agents.origin, judging),
            settings=settings,
            http=http,
            spend=spend,
        )
        self.remote = RemoteAgents(agents, settings.egress_allow, spend)
        self.builds = CurrentBuilds(client)
        self.continued = ContinuedRuns(client)
        self.setup = SetupActivities(
            settings=settings,
            registry=self.registry,
            agents=agents,
            engines=engines,
            principals=PrincipalResolver(principals, parent_check(client), binding_use(store)),
            approval_policy=cedar is not None and cedar.decides_approvals,
            elsewhere=elsewhere,
        )

    def activities(self) -> list[Callable[..., Any]]:
        """Every activity orga's workflows call."""
        return [
            self.setup.resolve_loop,
            self.setup.resolve_task,
            self.inference.call_model,
            self.policy.evaluate_policy,
            self.tools.run_tool,
            self.knowledge.search_knowledge,
            self.knowledge.write_knowledge,
            self.critic.critique,
            self.summary.summarise_context,
            check_answer,
            fetch_fork_point,
            self.builds.current_build,
            self.continued.continued_from,
            self.judges.consult_judge,
            self.remote.delegate_remote,
        ]

    def model_activities(self) -> list[Callable[..., Any]]:
        """The activities that call a model (a worker of ``ORGA_MODEL_TASK_QUEUE`` runs them):
        a model judge's consultation among them."""
        return [
            self.inference.call_model,
            self.critic.critique,
            self.summary.summarise_context,
            self.judges.consult_judge,
        ]


async def _registered_elsewhere(
    client: Client, store: Store, task_queue: str, names: list[str]
) -> bool:
    """Whether a live worker of ``task_queue`` registers every tool of ``names``, as the store's
    lists say (they route no call: a setup or a gate's check asked again lands on any worker,
    and a list that lies only has it asked again until its ``ELSEWHERE_TIMEOUT``)."""
    try:
        found = await registries(client, task_queue, store, with_pollers=True)
    except RPCError:
        return False
    return any(tools is not None and set(names) <= tools for tools in found.values())


def _build_registry(
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
            *(knowledge_tools(lambda: knowledge.knowledge) if knowledge is not None else []),
            *load_tool_modules(settings.tool_modules),
            *extra_tools,
        ],
        sources,
    )


def _say_who_decides(agents: AgentRegistry) -> None:
    log = logging.getLogger("orga")
    if agents.approvers:
        names = ", ".join(a.name for a in agents.approvers)
        log.info("approvers enrolled (%s): only decisions they sign are recorded", names)
    else:
        log.info(
            "no approvers enrolled: decisions are recorded unverified (the name is the caller's "
            "claim); `orga approver keygen` enrolls one (ORGA_APPROVERS names the file)"
        )


def _build_agents(settings: Settings, engines: frozenset[PolicyMode]) -> AgentRegistry:
    """The worker's agents: ``ORGA_AGENTS``, or the implicit one (floor ``ORGA_POLICY``); and
    its approvers (the agents file's and ``ORGA_APPROVERS``'s).

    Raises:
        InvalidConfig: the agents file is invalid, or a floor needs a gate not configured here.
    """
    if settings.agents_file is not None:
        agents = AgentRegistry.load(settings.agents_file, engines)
    elif settings.policy_floor not in engines:
        raise InvalidConfig(
            f"ORGA_POLICY={settings.policy_floor} needs a gate this worker has not configured "
            "(ORGA_POLICY_DIR for cedar, ORGA_OPA_URL for opa)"
        )
    else:
        agents = AgentRegistry.implicit(settings.policy_floor)
    return agents.with_approvers(settings.approvers_path())

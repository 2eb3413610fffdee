"""Connecting to Temporal the same way everywhere: worker, CLI, tests, benchmarks."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import (
    AddSearchAttributesRequest,
    ListSearchAttributesRequest,
)
from temporalio.client import (
    Client,
    Interceptor,
    OutboundInterceptor,
    StartWorkflowInput,
    WorkflowHandle,
)
from temporalio.common import Priority, SearchAttributePair, TypedSearchAttributes
from temporalio.envconfig import ClientConnectConfig
from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig
from temporalio.service import RPCError

from orga.contracts import search_attributes as sa
from orga.contracts.errors import InvalidConfig
from orga.contracts.messages import LOOP_WORKFLOW
from orga.runtime.converter import data_converter
from orga.runtime.settings import Settings

if TYPE_CHECKING:
    from orga.runtime.store import Store

__all__ = [
    "StartAttributes",
    "connect",
    "connect_config",
    "ensure_search_attributes",
    "metrics_runtime",
]


async def connect(
    settings: Settings,
    *,
    timeout: float = 10.0,
    store: Store | None = None,
    metrics: bool = False,
    interceptors: Sequence[Interceptor] = (),
) -> Client:
    """A client with orga's data converter (large payloads in ``store``, else the store the
    settings name, opened when first needed), TLS and API key as the settings say.

    ``metrics``: a worker's client, serving the SDK's and orga's metrics to Prometheus on
    ``settings.metrics_address`` (when set). ``interceptors``: the client's (and its
    workers'), such as tracing, after ``StartAttributes`` (loops start with their search
    attributes).
    """
    runtime = metrics_runtime(settings.metrics_address) if metrics else None
    return await Client.connect(
        **connect_config(settings),
        data_converter=data_converter(lambda: store or settings.store()),
        connect_timeout=timedelta(seconds=timeout),
        runtime=runtime,
        interceptors=[StartAttributes(), *interceptors],
    )


def connect_config(settings: Settings) -> ClientConnectConfig:
    """Where and how to reach Temporal, as ``Client.connect`` takes it: the settings' address
    (``TEMPORAL_ADDRESS``, default ``localhost:7233``), namespace, API key, and TLS (with an API
    key, or ``TEMPORAL_TLS``) — what every orga process connects with."""
    api_key = settings.temporal_api_key.get_secret_value() if settings.temporal_api_key else None
    found = ClientConnectConfig(
        target_host=settings.temporal_address,
        namespace=settings.temporal_namespace,
        tls=bool(api_key or settings.temporal_tls),
    )
    if api_key:
        found["api_key"] = api_key
    return found


_runtimes: dict[str, Runtime] = {}


def metrics_runtime(address: str | None) -> Runtime | None:
    """A Temporal runtime serving Prometheus metrics on ``address`` (``host:port``), one per
    address for the process; ``None`` without an address (the default runtime, no metrics).

    Raises:
        InvalidConfig: the address is not ``host:port``, or cannot be bound.
    """
    if address is None:
        return None
    found = _runtimes.get(address)
    if found is not None:
        return found
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise InvalidConfig(f"ORGA_METRICS_ADDRESS={address!r} is not host:port (0.0.0.0:9464)")
    try:
        runtime = Runtime(telemetry=TelemetryConfig(metrics=PrometheusConfig(bind_address=address)))
    except Exception as error:  # the core runtime reports a taken port as a plain error
        raise InvalidConfig(
            f"ORGA_METRICS_ADDRESS={address}: cannot serve metrics there ({error})"
        ) from error
    _runtimes[address] = runtime
    return runtime


def quiet_runtime() -> Runtime:
    """A Temporal runtime whose SDK core logs nothing (one for the process): for a replay in
    the CLI, which says itself what it cannot replay — the core would print its warnings, with
    colour codes, among the verb's output (its ``--json`` too)."""
    found = _runtimes.get("")
    if found is None:
        found = _runtimes[""] = Runtime(telemetry=TelemetryConfig(logging=None))
    return found


async def ensure_search_attributes(client: Client) -> list[str]:
    """Register orga's search attributes on the client's namespace if they are missing.

    Returns the names it added. Raises ``InvalidConfig`` with the command to run when the
    server does not allow it (Temporal Cloud registers attributes in its own console/CLI).
    """
    namespace = client.namespace
    listed = await client.operator_service.list_search_attributes(
        ListSearchAttributesRequest(namespace=namespace)
    )
    known = set(listed.custom_attributes) | set(listed.system_attributes)
    missing = {name: kind for name, kind in _kinds().items() if name not in known}
    if not missing:
        return []
    try:
        await client.operator_service.add_search_attributes(
            AddSearchAttributesRequest(namespace=namespace, search_attributes=missing)
        )
    except RPCError as error:
        commands = _register_commands(missing, namespace)
        raise InvalidConfig(
            f"orga's search attributes {sorted(missing)!r} are not registered on namespace "
            f"{namespace!r} and this client may not add them ({error.message}). "
            f"Register them once: {commands}"
        ) from error
    return sorted(missing)


def _register_commands(
    kinds: dict[str, IndexedValueType.ValueType], namespace: str | None = None
) -> str:
    """The Temporal CLI commands that register these search attributes."""
    where = f" --namespace {namespace}" if namespace else ""
    return "; ".join(
        f"temporal operator search-attribute create{where} --name {name} "
        f"--type {'Keyword' if kind == IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD else 'Int'}"
        for name, kind in kinds.items()
    )


def _kinds() -> dict[str, IndexedValueType.ValueType]:
    # SearchAttributeIndexedValueType mirrors the API enum's numbers.
    return {key.name: IndexedValueType.ValueType(int(key.indexed_value_type)) for key in sa.ALL}


class StartAttributes(Interceptor):
    """Loops started through this client carry their search attributes from the start.

    A loop keeps ``OrgaAgentId``, ``OrgaStatus``, ``OrgaIteration`` and ``OrgaTotalTokens``
    (and, running for a principal, ``OrgaPrincipal`` and ``OrgaTenant``, with the tenant as
    its fairness key) current, and upserts them in its first workflow task unless it was
    started with them: setting them at start saves each loop an event and a visibility
    write. The loop still compares them with its own and upserts any that differ (a thread
    that waits for its first message is ``awaiting_message``). Left alone: a start whose memo
    turns search attributes off (``NO_SEARCH_ATTRIBUTES_MEMO``), one with untyped attributes,
    and keys already given.
    On a namespace without orga's attributes the start fails, naming the commands that
    register them (the loop would otherwise fail its first workflow task until they are).
    """

    def intercept_client(self, next: OutboundInterceptor) -> OutboundInterceptor:
        return _StartAttributesOutbound(next)


class _StartAttributesOutbound(OutboundInterceptor):
    async def start_workflow(self, input: StartWorkflowInput) -> WorkflowHandle[Any, Any]:
        given = input.search_attributes
        if (
            input.workflow != LOOP_WORKFLOW
            or (input.memo or {}).get(sa.NO_SEARCH_ATTRIBUTES_MEMO) is False
            or not (given is None or isinstance(given, TypedSearchAttributes))
            or len(input.args) != 1
        ):
            return await super().start_workflow(input)
        [loop] = input.args
        from orga.contracts.config import LoopInput  # already imported by whoever made one

        if not isinstance(loop, LoopInput):
            return await super().start_workflow(input)
        pairs: list[SearchAttributePair[Any]] = [
            SearchAttributePair(sa.AGENT_ID, loop.config.agent_id),
            SearchAttributePair(sa.STATUS, "running"),
            SearchAttributePair(sa.ITERATION, 0),
            SearchAttributePair(sa.TOTAL_TOKENS, 0),
        ]
        if (principal := loop.principal) is not None:
            # As claimed: the loop corrects them to what its worker resolves.
            pairs.append(SearchAttributePair(sa.PRINCIPAL, principal.user))
            if principal.tenant is not None:
                pairs.append(SearchAttributePair(sa.TENANT, principal.tenant))
            if input.priority == Priority.default:  # its workflow tasks share fairly too
                input.priority = Priority(fairness_key=principal.tenant or principal.user)
        existing: list[SearchAttributePair[Any]] = (
            list(given.search_attributes) if given else []  # pyright: ignore[reportUnknownArgumentType, reportUnknownMemberType]
        )
        present = {pair.key.name for pair in existing}
        input.search_attributes = TypedSearchAttributes(
            [*existing, *(pair for pair in pairs if pair.key.name not in present)]
        )
        try:
            return await super().start_workflow(input)
        except RPCError as error:
            if not any(key.name in error.message for key in sa.ALL):
                raise
            raise InvalidConfig(
                f"the loop was not started: orga's search attributes are not registered on "
                f"this namespace ({error.message}). Register them once: "
                f"{_register_commands(_kinds())} (`orga server` and the worker register "
                "them on a dev server)"
            ) from error

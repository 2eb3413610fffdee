"""Traces: OpenTelemetry through Temporal's own integration, configured by the standard
``OTEL_*`` variables, and off — free — when none is set.

Every loop is one trace, whoever started it. A client that traces (``orga run``, ``orga mcp``,
a ``Client`` with ``tracing_interceptors()``) sends its trace context with the start and is the
trace's root; a loop whose start carried none gets its root from the worker
(``orga.runtime.loop_traces``). Under it, Temporal's ``TracingInterceptor`` adds a span per
workflow step (``RunWorkflow``, ``StartActivity``, ``StartChildWorkflow``, …) and carries the
context to activities, child loops and the next run; inside the activities orga adds a span
per model call (``chat <model>``), gate decision (``orga.gate``) and tool call
(``execute_tool <tool>``) with the GenAI semantic-convention attributes.

Spans leave through the OTLP/HTTP exporter (``OTEL_EXPORTER_OTLP_ENDPOINT``,
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``, ``OTEL_EXPORTER_OTLP_HEADERS``, …, read by the exporter
itself) or, with ``OTEL_TRACES_EXPORTER=console``, to stderr. Without those variables no
provider is installed, no interceptor is added, the SDK is never imported, and the spans
activities open are the OpenTelemetry API's no-ops.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Generator, Mapping
from typing import TYPE_CHECKING

from opentelemetry import trace
from opentelemetry.trace import ProxyTracerProvider, Tracer

from orga.contracts.errors import InvalidConfig

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

    from orga.runtime.loop_traces import LoopTracingInterceptor

__all__ = [
    "client_interceptors",
    "configure_tracing",
    "traced_process",
    "tracer",
    "tracer_provider",
    "tracing_interceptors",
]

_EXPORTERS = ("otlp", "console")


@functools.cache
def tracer() -> Tracer:
    """orga's tracer (a no-op until a tracer provider is installed: OpenTelemetry's proxy
    tracer follows the provider installed later, so one is made once, not per span)."""
    return trace.get_tracer("orga")


def configure_tracing(
    env: Mapping[str, str] | None = None, *, service: str = "orga-worker"
) -> TracerProvider | None:
    """Install a tracer provider when the ``OTEL_*`` variables ask for traces; return it (to
    shut it down, flushing what is buffered), or ``None`` when tracing stays off.

    ``service``: the ``service.name`` unless ``OTEL_SERVICE_NAME`` gives one.

    Raises:
        InvalidConfig: ``OTEL_TRACES_EXPORTER`` names an exporter orga does not ship.
    """
    env = os.environ if env is None else env
    chosen = [
        name.strip().lower()
        for name in env.get("OTEL_TRACES_EXPORTER", "").split(",")
        if name.strip()
    ]
    endpoint = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get(
        "OTEL_EXPORTER_OTLP_ENDPOINT"
    )
    if chosen == ["none"] or (not chosen and not endpoint):
        return None
    unknown = [name for name in chosen if name not in _EXPORTERS]
    if unknown:
        raise InvalidConfig(
            f"OTEL_TRACES_EXPORTER={','.join(chosen)}: orga ships {', '.join(_EXPORTERS)} "
            f"(not {', '.join(unknown)})"
        )
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

    provider = tracer_provider(env.get("OTEL_SERVICE_NAME") or service)
    for name in chosen or ["otlp"]:
        if name == "otlp":
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        else:
            provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter()))
    trace.set_tracer_provider(provider)
    return provider


def tracer_provider(service: str) -> TracerProvider:
    """orga's tracer provider, with no exporter yet: it can export a loop's root span under
    the ids the loop derived for it, and names the loop's conversation on its GenAI spans."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider

    from orga.runtime.loop_traces import ConversationIds, LoopIds

    provider = TracerProvider(
        resource=Resource.create({"service.name": service}), id_generator=LoopIds()
    )
    provider.add_span_processor(ConversationIds())
    return provider


@contextlib.contextmanager
def traced_process(service: str) -> Generator[None]:
    """A short-lived process (a CLI verb) traced as the ``OTEL_*`` variables say: its provider
    is installed first and shut down last, so every span has left before the process exits
    (``os._exit`` skips OpenTelemetry's own exit hook)."""
    provider = configure_tracing(service=service)
    try:
        yield
    finally:
        if provider is not None:
            provider.shutdown()


def tracing_interceptors() -> list[LoopTracingInterceptor]:
    """The client interceptor that traces workflows and activities (the workers of a client
    carry it too). Loops started by a client that does not trace still get their own trace."""
    from orga.runtime.loop_traces import LoopTracingInterceptor

    return [LoopTracingInterceptor()]


def client_interceptors() -> list[LoopTracingInterceptor]:
    """What a client of this process carries: the tracing interceptor once a tracer provider
    is installed (its starts, signals, updates and queries then carry the trace context),
    nothing otherwise."""
    if isinstance(trace.get_tracer_provider(), ProxyTracerProvider):
        return []
    return tracing_interceptors()

"""Traces: OpenTelemetry through Temporal's own integration, configured by the standard
``OTEL_*`` variables, and off — free — when none is set.

With tracing on, a worker's client carries ``temporalio.contrib.opentelemetry``'s
``TracingInterceptor``: every loop is one trace (its workflow span, then a span per activity),
and inside the activities orga adds a span per model call, gate decision and tool call with the
GenAI semantic-convention attributes (``gen_ai.request.model``, ``gen_ai.usage.input_tokens``,
…). Spans leave through the OTLP/HTTP exporter (``OTEL_EXPORTER_OTLP_ENDPOINT``,
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``, ``OTEL_EXPORTER_OTLP_HEADERS``, …, read by the
exporter itself) or, with ``OTEL_TRACES_EXPORTER=console``, to stderr. Without those variables
no provider is installed, no interceptor is added, and the spans activities open are the
OpenTelemetry API's no-ops.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Tracer

from orga.contracts.errors import InvalidConfig

__all__ = ["configure_tracing", "tracer", "tracing_interceptors"]

_EXPORTERS = ("otlp", "console")


def tracer() -> Tracer:
    """orga's tracer (a no-op until a tracer provider is installed)."""
    return trace.get_tracer("orga")


def configure_tracing(env: Mapping[str, str] | None = None) -> Any | None:
    """Install a tracer provider when the ``OTEL_*`` variables ask for traces; return it (to
    shut it down, flushing what is buffered), or ``None`` when tracing stays off.

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
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

    resource = Resource.create({"service.name": env.get("OTEL_SERVICE_NAME") or "orga-worker"})
    provider = TracerProvider(resource=resource)
    for name in chosen or ["otlp"]:
        if name == "otlp":
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        else:
            provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter()))
    trace.set_tracer_provider(provider)
    return provider


def tracing_interceptors() -> list[Any]:
    """The client interceptor that traces workflows and activities (the workers of a client
    carry it too). Loops started by a client that does not trace still get their own trace."""
    from temporalio.contrib.opentelemetry import TracingInterceptor

    return [TracingInterceptor(always_create_workflow_spans=True)]

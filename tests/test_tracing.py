"""Traces: one trace per loop through Temporal's OpenTelemetry integration, with a span per model
call, gate decision and tool call carrying the GenAI attributes; off when no OTEL_* is set."""

from __future__ import annotations

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanContext
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from orga.contracts.errors import InvalidConfig
from orga.runtime.scripted_model import Turn
from orga.runtime.tracing import configure_tracing, tracing_interceptors
from tests.harness import Harness


def test_off_and_free_without_otel_variables() -> None:
    assert configure_tracing({}) is None
    assert configure_tracing({"OTEL_TRACES_EXPORTER": "none"}) is None
    with pytest.raises(InvalidConfig, match="orga ships otlp, console"):
        configure_tracing({"OTEL_TRACES_EXPORTER": "zipkin"})


@pytest.fixture(scope="module")
def spans() -> InMemorySpanExporter:
    """The process's tracer provider, exporting to memory (set once: OpenTelemetry allows one)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    return exporter


async def test_one_trace_per_loop_with_genai_spans(
    env: WorkflowEnvironment, harness: Harness, spans: InMemorySpanExporter
) -> None:
    client = await Client.connect(
        env.client.service_client.config.target_host,
        namespace=env.client.namespace,
        data_converter=env.client.data_converter,
        interceptors=tracing_interceptors(),
    )
    traced = Harness(client=client, model=harness.model, task_queue=harness.task_queue)
    model = traced.new_model(
        [
            Turn(tool_calls=[("add", {"a": 2, "b": 3})], input_tokens=40, output_tokens=7),
            Turn(text="5", input_tokens=60, output_tokens=2),
        ]
    )
    spans.clear()
    async with traced.worker():
        handle = await traced.start("2+3?", model=model, tools=["add"], policy="default")
        await handle.result()
    harness.handles.extend(traced.handles)
    finished = spans.get_finished_spans()
    ours = [s for s in finished if (s.attributes or {}).get("temporalWorkflowID") == handle.id]
    assert ours, [s.name for s in finished]
    trace_id = _context(ours[0]).trace_id
    in_trace = [s for s in finished if _context(s).trace_id == trace_id]
    names = [s.name for s in in_trace]
    assert "StartWorkflow:ReasoningLoop" in names and "RunWorkflow:ReasoningLoop" in names
    assert names.count(f"chat {model}") == 2
    assert names.count("execute_tool add") == 1
    assert names.count("orga.gate") == 2  # the call, then the answer
    chats = [s for s in in_trace if s.name == f"chat {model}"]
    first = dict(chats[0].attributes or {})
    assert first["gen_ai.operation.name"] == "chat"
    assert first["gen_ai.provider.name"] == "openai"
    assert first["gen_ai.request.model"] == model
    usage = [dict(s.attributes or {}) for s in chats]
    tokens = [(u["gen_ai.usage.input_tokens"], u["gen_ai.usage.output_tokens"]) for u in usage]
    assert sorted(tokens, key=str) == [(40, 7), (60, 2)]
    tool = next(s for s in in_trace if s.name == "execute_tool add")
    assert (tool.attributes or {})["gen_ai.tool.name"] == "add"
    # Each span hangs under its activity's span, inside the loop's one trace.
    by_id = {_context(s).span_id: s for s in in_trace}
    assert tool.parent is not None and by_id[tool.parent.span_id].name == "RunActivity:run_tool"
    gate = next(s for s in in_trace if s.name == "orga.gate")
    assert (gate.attributes or {})["orga.policy.decisions"] == ("allow",)


def _context(span: ReadableSpan) -> SpanContext:
    assert span.context is not None
    return span.context

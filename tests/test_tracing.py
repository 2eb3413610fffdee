"""Traces: one trace per loop, whoever started it — a tracing client, ``orga run``, the plain
``temporal`` CLI, a plain ``Client``, a Schedule — with a span per model call, gate decision
and tool call carrying the GenAI attributes, child loops inside their parent's trace, nothing
exported twice on replay; off when no OTEL_* is set.

Spans are read as a collector receives them: OTLP/HTTP protobuf posted to a receiver on
127.0.0.1 by this process's worker (orga's tracer provider with a batch processor, flushed
before each assertion) and by the ``orga`` CLI subprocesses (configured by OTEL_*).
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from mcp import Client as McpClient
from mcp import StdioServerParameters
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionExecutionStartWorkflow,
    ScheduleActionStartWorkflow,
    ScheduleIntervalSpec,
    ScheduleSpec,
    ScheduleState,
)
from temporalio.testing import WorkflowEnvironment

from orga.contracts.approvals import ApprovalDecision
from orga.contracts.config import LoopConfig, LoopInput
from orga.contracts.conversation import Message
from orga.contracts.errors import InvalidConfig
from orga.contracts.state import LoopResult, LoopState
from orga.plugin import replayer
from orga.runtime.loop_traces import root_span_ids
from orga.runtime.tracing import configure_tracing, tracer_provider, tracing_interceptors
from orga.scripted.server import Turn
from tests.harness import TEST_STORE, Harness, scripted_settings
from tests.helpers import ORGA, agents_file, eventually, on, orga, pending, temporal
from tests.otlp_receiver import Received, Receiver, receiving
from tests.sample_tools import transfer


def test_off_and_free_without_otel_variables() -> None:
    assert configure_tracing({}) is None
    assert configure_tracing({"OTEL_TRACES_EXPORTER": "none"}) is None
    with pytest.raises(InvalidConfig, match="orga ships otlp, console"):
        configure_tracing({"OTEL_TRACES_EXPORTER": "zipkin"})


def test_a_loop_root_is_the_same_on_every_replay_and_its_own_per_loop() -> None:
    assert root_span_ids("loop-1", "run-a") == root_span_ids("loop-1", "run-a")
    assert root_span_ids("loop-1", "run-a") != root_span_ids("loop-1", "run-b")
    assert root_span_ids("loop-1", "run-a") != root_span_ids("loop-2", "run-a")


class Collector:
    """The receiver, and the worker-side provider that exports to it."""

    def __init__(self, receiver: Receiver, provider: TracerProvider) -> None:
        self.receiver = receiver
        self.provider = provider

    def trace_of(self, workflow_id: str) -> list[Received]:
        """Every span of the one trace that holds ``workflow_id``'s spans (after a flush)."""
        assert self.provider.force_flush()
        spans = self.receiver.spans
        traces = {
            s.trace_id for s in spans if s.attributes.get("temporalWorkflowID") == workflow_id
        }
        assert len(traces) == 1, _tree(spans, traces)
        [trace_id] = traces
        return [s for s in spans if s.trace_id == trace_id]

    def otel_env(self) -> dict[str, str]:
        """What a process needs to send its spans here."""
        return {"OTEL_EXPORTER_OTLP_ENDPOINT": self.receiver.url}


@pytest.fixture(scope="module")
def collector() -> Iterator[Collector]:
    """This process's tracer provider, exporting over OTLP/HTTP to a receiver (set once:
    OpenTelemetry allows one provider per process)."""
    with receiving() as receiver:
        provider = tracer_provider("orga-test-worker")
        provider.add_span_processor(
            BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{receiver.url}/v1/traces"))
        )
        trace.set_tracer_provider(provider)
        yield Collector(receiver, provider)
        provider.shutdown()


@asynccontextmanager
async def traced_worker(
    env: WorkflowEnvironment, harness: Harness, **worker: Any
) -> AsyncIterator[Harness]:
    """A worker on ``harness``'s task queue whose client carries the tracing interceptor, as
    ``worker.py`` runs with OTEL_* set; loops started through ``harness`` itself do not trace."""
    client = await Client.connect(
        env.client.service_client.config.target_host,
        namespace=env.client.namespace,
        data_converter=env.client.data_converter,
        interceptors=tracing_interceptors(),
    )
    traced = Harness(client=client, model=harness.model, task_queue=harness.task_queue)
    async with traced.worker(**worker):
        yield traced
    harness.handles.extend(traced.handles)


def _roots(spans: list[Received]) -> list[Received]:
    ids = {s.span_id for s in spans}
    return [s for s in spans if s.parent_id is None or s.parent_id not in ids]


def _tree(spans: list[Received], traces: set[str]) -> str:
    return "\n".join(
        f"{s.trace_id[:8]} {s.span_id[:6]}<-{(s.parent_id or '')[:6]} {s.name}"
        for s in spans
        if s.trace_id in traces
    )


def _under(spans: list[Received], span: Received, ancestor: Received) -> bool:
    """``span`` hangs (through any number of parents) under ``ancestor``."""
    by_id = {s.span_id: s for s in spans}
    while span.parent_id is not None and span.parent_id in by_id:
        span = by_id[span.parent_id]
        if span is ancestor:
            return True
    return False


def assert_one_loop_trace(spans: list[Received], model: str, *, root: str, service: str) -> None:
    """The trace has one root, ``root`` sent by ``service``, and every other span under it:
    the loop's workflow spans, two model calls, the gate twice and the ``add`` tool."""
    [top] = _roots(spans)
    assert (top.name, top.service) == (root, service), _tree(spans, {top.trace_id})
    assert all(s is top or _under(spans, s, top) for s in spans)
    names = Counter(s.name for s in spans)
    assert names["RunWorkflow:ReasoningLoop"] == 1
    assert names["CompleteWorkflow:ReasoningLoop"] == 1
    assert names[f"chat {model}"] == 2
    assert names["execute_tool add"] == 1
    assert names["orga.gate"] == 2  # the call, then the answer
    tool = next(s for s in spans if s.name == "execute_tool add")
    assert tool.attributes["gen_ai.tool.name"] == "add"
    by_id = {s.span_id: s for s in spans}
    assert tool.parent_id is not None and by_id[tool.parent_id].name == "RunActivity:run_tool"
    gate = next(s for s in spans if s.name == "orga.gate")
    assert gate.attributes["orga.policy.decisions"] == ("allow",)


def _add_then_answer(harness: Harness) -> str:
    return harness.new_model(
        [
            Turn(tool_calls=[("add", {"a": 2, "b": 3})], input_tokens=40, output_tokens=7),
            Turn(text="5", input_tokens=60, output_tokens=2),
        ]
    )


async def test_a_loop_a_tracing_client_starts_is_one_trace_with_genai_spans(
    env: WorkflowEnvironment, harness: Harness, collector: Collector
) -> None:
    model = _add_then_answer(harness)
    async with traced_worker(env, harness) as traced:
        handle = await traced.start("2+3?", model=model, tools=["add"], policy="default")
        await handle.result()
    spans = collector.trace_of(handle.id)
    assert_one_loop_trace(
        spans, model, root="StartWorkflow:ReasoningLoop", service="orga-test-worker"
    )
    chats = [s for s in spans if s.name == f"chat {model}"]
    first = chats[0].attributes
    assert first["gen_ai.operation.name"] == "chat"
    assert first["gen_ai.provider.name"] == "openai"
    assert first["gen_ai.request.model"] == model
    assert first["gen_ai.conversation.id"] == handle.id
    assert "gen_ai.request.max_tokens" not in first  # the loop set no limit: none is sent
    tokens = sorted(
        (s.attributes["gen_ai.usage.input_tokens"], s.attributes["gen_ai.usage.output_tokens"])
        for s in chats
    )
    assert tokens == [(40, 7), (60, 2)]


async def test_a_loop_orga_run_starts_is_one_trace_under_its_invoke_agent_span(
    env: WorkflowEnvironment, harness: Harness, collector: Collector
) -> None:
    model = _add_then_answer(harness)
    async with traced_worker(env, harness, settings=scripted_settings(harness.model)):
        code, out, err = await orga(
            "run",
            "What is 2+3?",
            *("--tool", "add", "--provider", "openai", "--model", model),
            *("--agent-id", "calc"),
            env={**on(env, harness), **collector.otel_env()},
        )
        assert code == 0, err
    assert out.startswith("5")
    workflow_id = err.split("started ")[1].split()[0]
    harness.handles.append(harness.client.get_workflow_handle(workflow_id))
    spans = collector.trace_of(workflow_id)
    assert_one_loop_trace(spans, model, root="invoke_agent calc", service="orga")
    [cli] = _roots(spans)
    assert cli.kind == "CLIENT"
    assert cli.attributes == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "calc",
        "gen_ai.conversation.id": workflow_id,
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": model,
        "gen_ai.usage.input_tokens": 100,
        "gen_ai.usage.output_tokens": 9,
    }
    started = next(s for s in spans if s.name == "StartWorkflow:ReasoningLoop")
    assert (started.service, started.parent_id) == ("orga", cli.span_id)


async def test_a_loop_orga_mcp_starts_is_one_trace_under_the_caller_s_span(
    env: WorkflowEnvironment, harness: Harness, collector: Collector
) -> None:
    model = _add_then_answer(harness)
    variables = {**on(env, harness), "ORGA_STORE_URL": TEST_STORE.url, **collector.otel_env()}
    server = StdioServerParameters(command=ORGA, args=["mcp"], env=variables)
    async with traced_worker(env, harness), McpClient(server) as client:
        called = await client.call_tool(
            "start_loop",
            {"prompt": "What is 2+3?", "tools": ["add"], "model": model, "wait_seconds": 60},
        )
        assert called.structured_content is not None, called
        workflow_id = called.structured_content["workflow_id"]
        assert called.structured_content["output"] == "5"
    harness.handles.append(harness.client.get_workflow_handle(workflow_id))
    # `orga mcp` sends its spans when it exits, after its client closed it.
    collector.receiver.wait_for(
        lambda spans: any(
            s.name == "StartWorkflow:ReasoningLoop" for s in spans if s.service == "orga"
        )
    )
    spans = collector.trace_of(workflow_id)
    # The caller (this test) sent its trace context in `_meta`; the server's span is its child.
    assert_one_loop_trace(
        spans, model, root="MCP send tools/call start_loop", service="orga-test-worker"
    )
    served = next(s for s in spans if s.name == "tools/call start_loop")
    assert (served.service, served.kind) == ("orga", "SERVER")
    assert served.attributes["gen_ai.tool.name"] == "start_loop"
    started = next(s for s in spans if s.name == "StartWorkflow:ReasoningLoop")
    assert started.parent_id == served.span_id


async def test_a_loop_the_temporal_cli_starts_is_one_trace_the_worker_roots(
    env: WorkflowEnvironment, harness: Harness, collector: Collector
) -> None:
    model = _add_then_answer(harness)
    workflow_id = f"cli-{uuid.uuid4().hex[:8]}"
    loop_input = {
        "messages": [{"role": "user", "content": "What is 2+3?"}],
        "config": {"agent_id": "calc", "model": model, "tools": ["add"], "timeout": "PT1M"},
    }
    async with traced_worker(env, harness):
        code, _, err = await temporal(
            env,
            *("workflow", "execute", "--type", "ReasoningLoop"),
            *("--task-queue", harness.task_queue, "--workflow-id", workflow_id),
            *("--input", json.dumps(loop_input)),
        )
        assert code == 0, err
    harness.handles.append(harness.client.get_workflow_handle(workflow_id))
    spans = collector.trace_of(workflow_id)
    assert_one_loop_trace(spans, model, root="invoke_agent calc", service="orga-test-worker")
    [root] = _roots(spans)
    assert root.kind == "INTERNAL"
    assert {k: v for k, v in root.attributes.items() if not k.startswith("temporal")} == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "calc",
        "gen_ai.conversation.id": workflow_id,
        "gen_ai.request.model": model,  # the input named it; it named no provider
    }
    assert root.attributes["temporalWorkflowID"] == workflow_id


async def test_a_plain_client_s_loop_and_its_delegation_are_one_trace(
    env: WorkflowEnvironment, harness: Harness, collector: Collector, tmp_path: Path
) -> None:
    models = {
        "lead": harness.new_model(
            [
                Turn(tool_calls=[("delegate", {"agent": "research", "task": "Add 2 and 3."})]),
                Turn(text="the figure is 5"),
            ]
        ),
        "research": _add_then_answer(harness),
        "writer": harness.new_model([]),
    }
    settings = scripted_settings(harness.model, agents_file=agents_file(tmp_path, models))
    async with traced_worker(env, harness, settings=settings):
        handle = await harness.start("Write a short report.", agent_id="lead")
        result = await handle.result()
        state = await handle.query("state", result_type=LoopState)
    assert result.output == "the figure is 5"
    [delegation] = state.delegations
    harness.handles.append(harness.client.get_workflow_handle(delegation.workflow_id))
    spans = collector.trace_of(handle.id)
    [root] = _roots(spans)
    assert (root.name, root.service) == ("invoke_agent lead", "orga-test-worker")
    assert all(s is root or _under(spans, s, root) for s in spans)
    child = [s for s in spans if s.attributes.get("temporalWorkflowID") == delegation.workflow_id]
    assert {"RunWorkflow:ReasoningLoop", "CompleteWorkflow:ReasoningLoop"} <= {
        s.name for s in child
    }
    started = next(s for s in spans if s.name == "StartChildWorkflow:ReasoningLoop")
    assert all(_under(spans, s, started) for s in child)
    names = Counter(s.name for s in spans)
    assert names[f"chat {models['lead']}"] == 2
    assert names[f"chat {models['research']}"] == 2
    assert names["execute_tool add"] == 1  # in the child; a delegation is a child workflow
    assert names["invoke_agent research"] == 0  # the child is inside its parent's trace
    conversations = {
        s.attributes["gen_ai.conversation.id"] for s in spans if s.name.startswith("chat ")
    }
    assert conversations == {handle.id, delegation.workflow_id}


async def test_a_loop_that_continues_as_new_stays_one_trace(
    env: WorkflowEnvironment, harness: Harness, collector: Collector
) -> None:
    model = harness.new_model(
        [*[Turn(tool_calls=[("add", {"a": n, "b": 1})]) for n in range(30)], Turn(text="done")]
    )
    async with traced_worker(env, harness):
        handle = await harness.start(
            "count", model=model, tools=["add"], max_iterations=40, max_history_events=200
        )
        assert (await handle.result()).output == "done"
    spans = collector.trace_of(handle.id)
    runs = {s.attributes["temporalRunID"] for s in spans if "temporalRunID" in s.attributes}
    assert len(runs) >= 2  # it did continue as new
    [root] = _roots(spans)
    assert root.name == "invoke_agent agent"
    assert all(s is root or _under(spans, s, root) for s in spans)
    assert Counter(s.name for s in spans)["RunWorkflow:ReasoningLoop"] == len(runs)


async def test_a_scheduled_loop_is_one_trace(
    env: WorkflowEnvironment, harness: Harness, collector: Collector
) -> None:
    model = _add_then_answer(harness)
    name = f"traced-{uuid.uuid4().hex[:8]}"
    action = ScheduleActionStartWorkflow(
        "ReasoningLoop",
        LoopInput(
            messages=[Message(role="user", content="What is 2+3?")],
            config=LoopConfig(model=model, tools=["add"]),
        ),
        id=f"schedule-{name}",
        task_queue=harness.task_queue,
    )
    schedule = await harness.client.create_schedule(
        name,
        Schedule(
            action=action,
            spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=timedelta(hours=1))]),
            state=ScheduleState(paused=True),
        ),
    )
    try:
        async with traced_worker(env, harness):
            await schedule.trigger()

            async def runs() -> list[ScheduleActionExecutionStartWorkflow]:
                actions = (await schedule.describe()).info.recent_actions
                return [
                    a.action
                    for a in actions
                    if isinstance(a.action, ScheduleActionExecutionStartWorkflow)
                ]

            started = await eventually(runs, "the schedule starts the run on its own")
            workflow_id = started[0].workflow_id
            handle = harness.client.get_workflow_handle(workflow_id, result_type=LoopResult)
            await handle.result()
            harness.handles.append(handle)
    finally:
        await schedule.delete()
    spans = collector.trace_of(workflow_id)
    assert_one_loop_trace(spans, model, root="invoke_agent agent", service="orga-test-worker")


async def test_nothing_is_exported_twice_when_a_loop_is_replayed(
    env: WorkflowEnvironment, harness: Harness, collector: Collector
) -> None:
    model = harness.new_model(
        [Turn(tool_calls=[("transfer", {"amount": 5, "to": "bob"})]), Turn(text="sent")]
    )
    async with traced_worker(env, harness, tools=[transfer]):
        handle = await harness.start("pay bob", model=model, tools=["transfer"])
        [waiting] = (await pending(handle)).pending_approvals
    # A new worker replays the loop from its history, then the approval arrives.
    async with traced_worker(env, harness, tools=[transfer]):
        await handle.signal(
            "approval", ApprovalDecision(call_id=waiting.call_id, approved=True, approver="al")
        )
        assert (await handle.result()).output == "sent"
    spans = collector.trace_of(handle.id)
    [root] = _roots(spans)
    names = Counter(s.name for s in spans)
    assert names["invoke_agent agent"] == names["RunWorkflow:ReasoningLoop"] == 1
    assert names["StartActivity:call_model"] == names[f"chat {model}"] == 2
    assert names["HandleSignal:approval"] == 1
    assert len({s.span_id for s in spans}) == len(spans)
    # Replaying the whole history with the tracing interceptor exports nothing at all.
    before = len(collector.receiver.spans)
    await replayer(TEST_STORE, tracing_interceptors()).replay_workflow(await handle.fetch_history())
    assert collector.provider.force_flush()
    assert len(collector.receiver.spans) == before
    assert root.name == "invoke_agent agent"

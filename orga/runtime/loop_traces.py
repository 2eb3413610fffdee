"""One trace per loop, whoever started it: the interceptor of ``orga.runtime.tracing``.

A client that traces sends its trace context with the start, and Temporal's
``TracingInterceptor`` hangs the loop's spans under the client's span. A start that carries
none (the plain ``temporal`` CLI, a Temporal Schedule, a ``Client`` without the interceptor)
would leave every workflow step a trace of its own; ``LoopTracingInterceptor`` gives the
workflow a root instead. Its context is derived from the workflow id and the first run's id
(``root_span_ids``): the same on every replay and on every worker, so it needs no state, no
clock and no randomness in workflow code. The span it names (``invoke_agent <agent>``, with the
GenAI attributes the workflow's ``trace_root()`` gives) is exported once, from outside the
sandbox, when the workflow first runs — never while history is replayed — under those ids,
which ``LoopIds`` (the id generator of orga's tracer provider) pins for that one span. Like
Temporal's own workflow spans it ends where it starts: a span left open is not replay-safe.
Workflow headers carry the root to activities, child loops (delegations, a task's loop
steps) and the next run after continue-as-new.

Exported twice only where Temporal's own workflow spans are too: when a workflow task that
already sent them fails and runs again.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Protocol, cast, runtime_checkable

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.propagators.textmap import CarrierValT
from opentelemetry.sdk.trace import Span, SpanProcessor
from opentelemetry.sdk.trace.id_generator import IdGenerator, RandomIdGenerator
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, TraceFlags
from temporalio import activity, workflow
from temporalio.contrib.opentelemetry import TracingInterceptor, TracingWorkflowInboundInterceptor
from temporalio.worker import WorkflowInterceptorClassInput

from orga.contracts.messages import LOOP_WORKFLOW

__all__ = ["ConversationIds", "LoopIds", "LoopTracingInterceptor", "root_span_ids"]

_ROOT = "__orga_trace_root"
"""The extern function the workflow side calls for its root context (it runs outside the
sandbox, where spans are exported)."""
_PINNED: ContextVar[tuple[int, int] | None] = ContextVar("orga_pinned_ids", default=None)


def root_span_ids(workflow_id: str, first_run_id: str) -> tuple[int, int]:
    """The trace id and span id of the root of a loop whose start carried no trace context:
    from its workflow id and its first run's id, so every replay and every run after
    continue-as-new finds the same trace."""
    digest = hashlib.sha256(f"orga trace\0{workflow_id}\0{first_run_id}".encode()).digest()
    trace_id = int.from_bytes(digest[:16], "big") or 1
    span_id = int.from_bytes(digest[16:24], "big") or 1
    return trace_id, span_id


class LoopIds(IdGenerator):
    """Random ids, except the pinned ones while a loop's root span is made."""

    def __init__(self) -> None:
        self._random = RandomIdGenerator()

    def generate_span_id(self) -> int:
        pinned = _PINNED.get()
        return pinned[1] if pinned else self._random.generate_span_id()

    def generate_trace_id(self) -> int:
        pinned = _PINNED.get()
        return pinned[0] if pinned else self._random.generate_trace_id()


class ConversationIds(SpanProcessor):
    """``gen_ai.conversation.id`` on a loop's GenAI spans (model and tool calls): the loop's
    workflow id, which keeps its conversation across runs. The conventions leave this to a
    processor where the application, not the client library, holds the conversation."""

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        if not activity.in_activity() or not (span.attributes or {}).get("gen_ai.operation.name"):
            return
        info = activity.info()
        if info.workflow_type == LOOP_WORKFLOW and info.workflow_id:
            span.set_attribute("gen_ai.conversation.id", info.workflow_id)


@runtime_checkable
class _Described(Protocol):
    def trace_root(self) -> dict[str, str]:
        """The attributes of the span a trace of this workflow starts with (GenAI agent span)."""
        ...


@dataclass(frozen=True)
class _Root:
    """What the workflow side knows of its root span (sent to the extern function)."""

    workflow_type: str
    workflow_id: str
    run_id: str
    first_run_id: str
    attributes: Mapping[str, str]
    time_ns: int
    export: bool
    """False while replaying: the span left when the workflow first ran."""


class LoopTracingInterceptor(TracingInterceptor):
    """Temporal's ``TracingInterceptor``, with a trace of their own for workflows whose start
    carried no trace context (see the module docstring)."""

    def __init__(self) -> None:
        # Spans in workflows only under a parent: the loop's root, or a traced client's span.
        # A query from a client that does not trace then makes no span (and no new trace).
        super().__init__(always_create_workflow_spans=False)

    def workflow_interceptor_class(
        self, input: WorkflowInterceptorClassInput
    ) -> type[TracingWorkflowInboundInterceptor]:
        super().workflow_interceptor_class(input)
        # The SDK types extern functions as Callable[..., Unknown].
        externs = input.unsafe_extern_functions  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
        externs[_ROOT] = self._root_carrier
        return _LoopWorkflowInterceptor

    def _root_carrier(self, root: _Root) -> dict[str, CarrierValT]:
        """The loop's root context as a carrier; the root span exported when ``root.export``."""
        trace_id, span_id = root_span_ids(root.workflow_id, root.first_run_id)
        if root.export:
            self._export_root(root, trace_id, span_id)
        parent = SpanContext(
            trace_id, span_id, is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED)
        )
        carrier: dict[str, CarrierValT] = {}
        self.text_map_propagator.inject(
            carrier, trace.set_span_in_context(NonRecordingSpan(parent))
        )
        return carrier

    def _export_root(self, root: _Root, trace_id: int, span_id: int) -> None:
        provider = trace.get_tracer_provider()
        if not isinstance(getattr(provider, "id_generator", None), LoopIds):
            # A provider orga did not build cannot take the pinned ids: the loop's spans still
            # share one trace, under a parent that is not exported.
            return
        operation = root.attributes.get("gen_ai.operation.name")
        agent = root.attributes.get("gen_ai.agent.name")
        name = f"{operation} {agent}" if operation and agent else operation or root.workflow_type
        token = _PINNED.set((trace_id, span_id))
        try:
            span = self.tracer.start_span(
                name,
                Context(),
                kind=SpanKind.INTERNAL,
                attributes={
                    **root.attributes,
                    "temporalWorkflowID": root.workflow_id,
                    "temporalRunID": root.run_id,
                },
                start_time=root.time_ns,
            )
        finally:
            _PINNED.reset(token)
        span.end(end_time=root.time_ns)


class _LoopWorkflowInterceptor(TracingWorkflowInboundInterceptor):
    """The workflow side: a start without trace context gets the loop's root context."""

    def _load_workflow_context_carrier(self) -> dict[str, CarrierValT] | None:
        carrier = super()._load_workflow_context_carrier()
        if carrier:
            return carrier
        info = workflow.info()
        described = workflow.instance()
        self._workflow_context_carrier = _root_context(
            _Root(
                workflow_type=info.workflow_type,
                workflow_id=info.workflow_id,
                run_id=info.run_id,
                first_run_id=info.first_execution_run_id,
                attributes=described.trace_root() if isinstance(described, _Described) else {},
                time_ns=workflow.time_ns(),
                export=not workflow.unsafe.is_replaying(),
            )
        )
        return self._workflow_context_carrier


def _root_context(root: _Root) -> dict[str, CarrierValT]:
    """``LoopTracingInterceptor._root_carrier``, called from inside the workflow."""
    externs = workflow.extern_functions()  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    # cast: the SDK types extern functions as ``Callable[..., Unknown]``; this one is ours.
    make = cast("Callable[[_Root], dict[str, CarrierValT]]", externs[_ROOT])
    return make(root)

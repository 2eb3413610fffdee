"""An OTLP/HTTP trace receiver on 127.0.0.1 for tests: what a collector would be sent.

It accepts ``POST /v1/traces`` with a protobuf ``ExportTraceServiceRequest`` (what the
OpenTelemetry OTLP/HTTP exporter sends, with ``OTEL_EXPORTER_OTLP_ENDPOINT`` set to its URL) and
keeps every span, decoded, with the ``service.name`` of the process that sent it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from tests.local_http import Reply, serve

Value = str | int | float | bool | tuple[str | int | float | bool, ...]


@dataclass(frozen=True)
class Received:
    """One span as a collector received it."""

    service: str
    trace_id: str
    span_id: str
    parent_id: str | None
    name: str
    kind: str
    """``CLIENT``, ``SERVER``, ``INTERNAL``, …"""
    attributes: dict[str, Value]


@dataclass
class Receiver:
    """Every span received so far, and a way to wait for the ones a test expects."""

    url: str = ""
    spans: list[Received] = field(default_factory=list[Received])
    _changed: threading.Condition = field(default_factory=threading.Condition)

    def answer(self, method: str, path: str, body: bytes) -> Reply:
        if method != "POST" or path != "/v1/traces":
            return 404, "text/plain", b"not found"
        request = ExportTraceServiceRequest.FromString(body)
        received = [
            _received(span, _service(resource.resource.attributes))
            for resource in request.resource_spans
            for scope in resource.scope_spans
            for span in scope.spans
        ]
        with self._changed:
            self.spans.extend(received)
            self._changed.notify_all()
        return 200, "application/x-protobuf", ExportTraceServiceResponse().SerializeToString()

    def wait_for(
        self, condition: Callable[[list[Received]], bool], timeout: float = 30
    ) -> list[Received]:
        """Block until ``condition(spans)`` holds (checked on every arrival); the spans."""
        with self._changed:
            if not self._changed.wait_for(lambda: condition(list(self.spans)), timeout):
                raise AssertionError(
                    f"the spans never matched: {sorted(s.name for s in self.spans)}"
                )
            return list(self.spans)


@contextmanager
def receiving() -> Iterator[Receiver]:
    """A receiver serving on a free port of 127.0.0.1 (its base URL in ``url``)."""
    receiver = Receiver()
    with serve(receiver.answer) as url:
        receiver.url = url
        yield receiver


def _service(attributes: Iterable[KeyValue]) -> str:
    found = [_value(a.value) for a in attributes if a.key == "service.name"]
    return str(found[0]) if found else ""


def _received(span: Span, service: str) -> Received:
    return Received(
        service=service,
        trace_id=span.trace_id.hex(),
        span_id=span.span_id.hex(),
        parent_id=span.parent_span_id.hex() or None,
        name=span.name,
        kind=Span.SpanKind.Name(span.kind).removeprefix("SPAN_KIND_"),
        attributes={a.key: _value(a.value) for a in span.attributes},
    )


def _value(value: AnyValue) -> Value:
    which = value.WhichOneof("value")
    if which == "array_value":
        items = tuple(_value(v) for v in value.array_value.values)
        return tuple(i for i in items if not isinstance(i, tuple))
    if which is None:
        return ""
    found = getattr(value, which)
    return found if isinstance(found, str | int | float | bool) else str(found)

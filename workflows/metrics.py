"""Emitting orga's metrics from workflow code, through Temporal's workflow metric meter (which
records nothing while a history is replayed). What to count is decided in ``orga.core.metrics``.
"""

from __future__ import annotations

from typing import Literal

from temporalio import workflow
from temporalio.common import MetricCounter

from orga.contracts.journal import JournalEntry
from orga.core.metrics import METRICS, Point, points

__all__ = ["count", "emit_entry"]

_counters: dict[str, MetricCounter] = {}
"""This run's counters (the sandbox gives every workflow run its own module)."""


def _counter(name: str) -> MetricCounter:
    found = _counters.get(name)
    if found is None:
        spec = METRICS[name]
        found = workflow.metric_meter().create_counter(name, spec.description, spec.unit)
        _counters[name] = found
    return found


def _emit(point: Point) -> None:
    if point.value > 0:
        _counter(point.metric).add(int(point.value), point.attributes)


def count(metric: str, **attributes: str) -> None:
    """Add one to ``metric`` (a counter of ``orga.core.metrics.METRICS``)."""
    _emit(Point(metric, 1, attributes))


def emit_entry(
    entry: JournalEntry, workflow_kind: Literal["loop", "task"], provider: str | None = None
) -> None:
    """The metrics a journal entry makes."""
    for point in points(entry, workflow=workflow_kind, provider=provider):
        _emit(point)

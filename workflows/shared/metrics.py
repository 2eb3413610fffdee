"""Emitting orga's metrics from workflow code, through Temporal's workflow metric meter (which
records nothing while a history is replayed). What to count is decided in ``orga.core.metrics``.

Tool and agent labels are bounded by what this run's setup resolved (``know``): before it, and
for any name it did not resolve, they read ``other``.
"""

from __future__ import annotations

from typing import Literal

from temporalio import workflow
from temporalio.common import MetricCounter

from orga.contracts.journal import JournalEntry
from orga.core.metrics import METRICS, KnownLabels, Point, points

__all__ = ["count", "emit_entry", "know"]

_counters: dict[str, MetricCounter] = {}
"""This run's counters (the sandbox gives every workflow run its own module)."""
_known = KnownLabels()
"""The tools and agents this run may name in labels (set once its setup is resolved)."""


def know(*, tools: set[str], agents: set[str]) -> None:
    """The tools and agents this run's setup resolved: the only values its tool and agent
    labels take (any other is ``other``)."""
    global _known
    _known = KnownLabels(frozenset(tools), frozenset(agents))


def _counter(name: str) -> MetricCounter:
    found = _counters.get(name)
    if found is None:
        spec = METRICS[name]
        found = workflow.metric_meter().create_counter(name, spec.description, spec.unit)
        _counters[name] = found
    return found


def _emit(point: Point) -> None:
    if point.value > 0:
        _counter(point.metric).add(int(point.value), _known.bound(point.attributes))


def count(metric: str, **attributes: str) -> None:
    """Add one to ``metric`` (a counter of ``orga.core.metrics.METRICS``)."""
    _emit(Point(metric, 1, attributes))


def emit_entry(
    entry: JournalEntry, workflow_kind: Literal["loop", "task"], provider: str | None = None
) -> None:
    """The metrics a journal entry makes."""
    for point in points(entry, workflow=workflow_kind, provider=provider):
        _emit(point)

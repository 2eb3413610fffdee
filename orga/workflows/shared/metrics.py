"""Emitting orga's metrics from workflow code, through Temporal's workflow metric meter (which
records nothing while a history is replayed). What to count is decided in ``orga.core.metrics``.

Tool and agent labels are bounded by what this run's setup resolved (``know``): before it, and
for any name it did not resolve, they read ``other``. An agent id is known only when an agents
file configures it: under the implicit agent of a worker without one, any id runs, and each is
a label its client chose.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from temporalio import workflow
from temporalio.common import MetricCounter

from orga.contracts.agents import IMPLICIT_AGENT, AgentSpec
from orga.contracts.journal import JournalEntry
from orga.core.metrics import METRICS, KnownLabels, Point, points

__all__ = ["count", "emit_entry", "know"]

_STATE = "_orga_metrics"
"""The attribute of the running workflow instance that holds its run's metric state (this
module is shared by every run, so it keeps none of its own)."""


@dataclass
class _RunMetrics:
    counters: dict[str, MetricCounter] = field(default_factory=dict[str, MetricCounter])
    """This run's counters."""
    known: KnownLabels = field(default_factory=KnownLabels)
    """The tools and agents this run may name in labels (set once its setup is resolved)."""


def _run() -> _RunMetrics:
    instance = workflow.instance()
    found = getattr(instance, _STATE, None)
    if found is None:
        found = _RunMetrics()
        setattr(instance, _STATE, found)
    return found


def know(*, tools: set[str], agents: set[str], runs_as: AgentSpec | None) -> None:
    """The tools and agents this run's setup resolved: the only values its tool and agent
    labels take (any other is ``other``). ``agents`` count only when ``runs_as``, the agent the
    setup resolved, is one an agents file configures (not the implicit agent)."""
    configured = runs_as is not None and runs_as.id != IMPLICIT_AGENT
    _run().known = KnownLabels(frozenset(tools), frozenset(agents if configured else ()))


def _emit(run: _RunMetrics, point: Point) -> None:
    if point.value <= 0:
        return
    counter = run.counters.get(point.metric)
    if counter is None:
        spec = METRICS[point.metric]
        counter = workflow.metric_meter().create_counter(point.metric, spec.description, spec.unit)
        run.counters[point.metric] = counter
    counter.add(int(point.value), run.known.bound(point.attributes))


def count(metric: str, **attributes: str) -> None:
    """Add one to ``metric`` (a counter of ``orga.core.metrics.METRICS``)."""
    if not workflow.unsafe.is_replaying():
        _emit(_run(), Point(metric, 1, attributes))


def emit_entry(
    entry: JournalEntry, workflow_kind: Literal["loop", "task"], provider: str | None = None
) -> None:
    """The metrics a journal entry makes (none while a history is replayed: Temporal's
    workflow meter drops them then anyway)."""
    if workflow.unsafe.is_replaying():
        return
    found = points(entry, workflow=workflow_kind, provider=provider)
    if found:
        run = _run()
        for point in found:
            _emit(run, point)

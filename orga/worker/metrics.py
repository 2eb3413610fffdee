"""Histograms of what activities measure on the worker's clock (the model and tool latencies),
through the activity's metric meter (Temporal's runtime: Prometheus when the worker serves it).
"""

from __future__ import annotations

from temporalio import activity

from orga.core.metrics import METRICS

__all__ = ["observe"]


def observe(metric: str, value: float, **attributes: str) -> None:
    """Record ``value`` in the histogram ``metric`` of ``orga.core.metrics.METRICS``."""
    spec = METRICS[metric]
    meter = activity.metric_meter()
    meter.create_histogram_float(metric, spec.description, spec.unit).record(value, attributes)

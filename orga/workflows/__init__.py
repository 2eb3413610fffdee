"""Temporal workflow definitions: orchestration only, checked by the sandbox on every run.

``ReasoningLoopWorkflow`` (type ``ReasoningLoop``) runs one agent loop; ``TaskWorkflow`` (type
``Task``) runs a multi-step task with saga compensation. Modules: ``loop`` and ``task`` (the
two workflows), ``reasoning`` (the loop's parts), ``saga`` (the task's parts) and ``shared``
(what both use). Workflow code imports ``orga.contracts``, ``orga.core`` and other
``workflows`` modules only; a lint rule (``orga/workflows/ruff.toml``) keeps clocks, randomness,
environment reads and I/O out of it.

Nothing is imported here eagerly: the sandbox imports this package for every workflow run.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from orga.workflows.loop import ReasoningLoopWorkflow
    from orga.workflows.task import TaskWorkflow

__all__ = ["ReasoningLoopWorkflow", "TaskWorkflow"]

_HOMES = {"ReasoningLoopWorkflow": "orga.workflows.loop", "TaskWorkflow": "orga.workflows.task"}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'workflows' has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)

"""Temporal workflow definitions: orchestration only, shared by every run a worker runs.

``ReasoningLoopWorkflow`` (type ``ReasoningLoop``) runs one agent loop; ``TaskWorkflow`` (type
``Task``) runs a multi-step task with saga compensation. Modules: ``loop`` and ``task`` (the
two workflows), ``reasoning`` (the loop's parts), ``saga`` (the task's parts) and ``shared``
(what both use). Workflow code imports ``orga.contracts``, ``orga.core`` and other
``workflows`` modules only; a lint rule (``orga/workflows/ruff.toml``) keeps clocks, randomness,
environment reads and I/O out of it.

Workers pass all of it through the sandbox (one import per worker, not per run); the strict
runner that tests replay with imports it anew for every run and checks what it does
(``orga.worker.sandbox``). Nothing is imported here eagerly.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from orga.workflows.loop import ReasoningLoopWorkflow
    from orga.workflows.task import TaskWorkflow

__all__ = ["ReasoningLoopWorkflow", "TaskWorkflow"]

_HOMES: Final = {
    "ReasoningLoopWorkflow": "orga.workflows.loop",
    "TaskWorkflow": "orga.workflows.task",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'workflows' has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)

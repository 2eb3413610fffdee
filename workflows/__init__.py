"""Temporal workflow definitions (orchestration only: no I/O, no HTTP client)."""

from workflows.loop import ReasoningLoopWorkflow
from workflows.task import TaskWorkflow

__all__ = ["ReasoningLoopWorkflow", "TaskWorkflow"]

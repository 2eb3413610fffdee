"""Temporal workflow definitions (orchestration only: no I/O, no HTTP client)."""

from workflows.loop import ReasoningLoopWorkflow

__all__ = ["ReasoningLoopWorkflow"]

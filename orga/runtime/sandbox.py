"""The workflow sandbox orga's workers and replayers run in.

Temporal re-imports a workflow's module, and everything it imports, for every workflow run, and
checks what that code does (no wall clock, no randomness, no I/O). Only pure, stateless code is
worth sharing across runs: third-party packages (Temporal's defaults: the standard library,
pydantic, temporalio) and orga's ``orga.contracts`` and ``orga.core``, which a lint rule keeps
free of clocks, randomness, environment reads and I/O. Everything under ``workflows/`` is
imported normally, so the sandbox checks it on every run.
"""

from __future__ import annotations

from typing import Final

from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

__all__ = ["PASSTHROUGH", "workflow_runner"]

PASSTHROUGH: Final = ("orga.contracts", "orga.core", "rapidfuzz", "re2", "opentelemetry")
"""Modules shared by every workflow run (with their submodules)."""


def workflow_runner() -> SandboxedWorkflowRunner:
    """The sandbox every worker and replayer of orga's workflows must use."""
    return SandboxedWorkflowRunner(
        restrictions=SandboxRestrictions.default.with_passthrough_modules(*PASSTHROUGH)
    )

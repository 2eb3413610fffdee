"""The workflow sandbox orga's workers and replayers run in.

Temporal re-imports a workflow's module, and everything it imports, for every workflow run, and
checks what that code does (no wall clock, no randomness, no I/O). Re-importing costs CPU and
memory for every run a worker starts or brings back into its cache, so stateless code that is
held to determinism some other way is shared across runs instead ("passed through"):
third-party packages (Temporal's defaults: the standard library, pydantic, temporalio; and
``rapidfuzz``, ``re2``, ``opentelemetry``, ``cryptography``), ``orga.contracts`` and
``orga.core``, and the workflows' helpers (``orga.workflows.reasoning``, ``orga.workflows.saga``,
``orga.workflows.shared``).

What holds the shared code to determinism: a lint rule (``ruff-deterministic.toml``) bans
clocks, randomness, environment reads and I/O in all of it; ``tests/test_architecture.py``
imports every module in a sandbox that shares nothing of orga's and refuses module-level state
in the shared helpers; and every integration test replays its workflows with the ``strict``
runner, in which the helpers are imported per run and checked by the sandbox as they run. The
two workflow definitions (``orga.workflows.loop``, ``orga.workflows.task``) are always sandboxed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

__all__ = ["PASSTHROUGH", "STRICT_PASSTHROUGH", "workflow_runner"]

STRICT_PASSTHROUGH: Final = (
    "orga.contracts",
    "orga.core",
    "rapidfuzz",
    "re2",
    "opentelemetry",
    "cryptography",
)
"""Shared with every run by the strict runner: the workflows' helpers are checked per run."""

PASSTHROUGH: Final = (
    *STRICT_PASSTHROUGH,
    "orga.workflows.reasoning",
    "orga.workflows.saga",
    "orga.workflows.shared",
)
"""Modules shared by every workflow run (with their submodules) on workers and replayers."""


def workflow_runner(*, strict: bool = False) -> SandboxedWorkflowRunner:
    """The sandbox every worker and replayer of orga's workflows must use; ``strict`` re-imports
    the workflows' helpers for every run, so the sandbox checks what they do (tests replay
    with it)."""
    shared = STRICT_PASSTHROUGH if strict else PASSTHROUGH
    return _Runner(restrictions=SandboxRestrictions.default.with_passthrough_modules(*shared))


@dataclass(frozen=True)
class _Runner(SandboxedWorkflowRunner):
    """Temporal's sandboxed runner, validating each workflow once. Every worker and every call
    of a replayer validates its workflows by importing them in a fresh sandbox (the strict
    runner: ~40 ms for both); for one runner the answer cannot change, and a workflow that did
    not import would fail its runs anyway."""

    _validated: set[type] = field(default_factory=set[type], init=False, compare=False)

    def prepare_workflow(self, defn: Any) -> None:  # a temporalio.workflow._Definition
        if defn.cls not in self._validated:
            super().prepare_workflow(defn)
            self._validated.add(defn.cls)

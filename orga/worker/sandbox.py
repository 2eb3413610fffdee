"""The workflow sandbox orga's workers and replayers run in.

Temporal re-imports a workflow's module, and everything it imports, for every workflow run, and
checks what that code does (no wall clock, no randomness, no I/O). Re-importing costs CPU and
memory for every run a worker starts or brings back into its cache, so stateless code that is
held to determinism some other way is shared across runs instead ("passed through"):
third-party packages (Temporal's defaults: the standard library, pydantic, temporalio; and
``rapidfuzz``, ``re2``, ``opentelemetry``, ``cryptography``), ``orga.contracts`` and
``orga.core``, and orga's workflow code (``orga.workflows``: the two definitions and their
helpers). Re-importing the definitions alone cost ~6 ms of CPU for every run a worker started
or replayed (performance guide).

What holds the shared code to determinism: a lint rule (``ruff-deterministic.toml``) bans
clocks, randomness, environment reads and I/O in all of it; ``tests/test_architecture.py``
imports every module in a sandbox that shares nothing of orga's and refuses module-level state
in the workflow code; and every integration test replays its workflows with the ``strict``
runner, in which all of ``orga.workflows`` is imported per run and checked by the sandbox as
it runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from temporalio.converter import SerializationContext, StorageDriverStoreContext
from temporalio.worker import WorkflowInstance, WorkflowInstanceDetails
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions
from temporalio.worker.workflow_sandbox import _runner as sandbox_runner  # pyright: ignore[reportPrivateUsage]

__all__ = ["PASSTHROUGH", "STRICT_PASSTHROUGH", "workflow_runner"]

STRICT_PASSTHROUGH: Final = (
    "orga.contracts",
    "orga.core",
    "rapidfuzz",
    "re2",
    "opentelemetry",
    "cryptography",
)
"""Shared with every run by the strict runner: orga's workflow code is checked per run."""

PASSTHROUGH: Final = (*STRICT_PASSTHROUGH, "orga.workflows")
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

    def create_instance(self, det: WorkflowInstanceDetails) -> WorkflowInstance:
        return _Instance(det, self.runner_class, self.restrictions)


class _Instance(sandbox_runner._Instance):  # pyright: ignore[reportPrivateUsage]
    """Temporal's sandboxed instance, asked for a payload's serialisation and store contexts
    directly.

    Temporal asks the instance for both for every payload of every activation (twice for the
    store's), and the stock instance answers each by ``exec``-ing a line of code inside the
    sandbox's import context (answering directly took orga's CPU over the minimal loop's at
    25 turns from +884 to +42 ms a loop, under yappi: ``bench/profile_turn.py``). The answer
    is the in-sandbox workflow instance's — a plain lookup of its pending commands, which
    imports nothing and runs no workflow code — so it is asked for it outright.
    ``tests/test_sandbox_contexts.py`` holds the two ways equal."""

    def get_serialization_context(self, command_info: Any) -> SerializationContext | None:
        inner = self._inner()
        if inner is None:
            return super().get_serialization_context(command_info)
        return inner.get_serialization_context(command_info)

    def get_external_store_context(self, command_info: Any) -> StorageDriverStoreContext:
        inner = self._inner()
        if inner is None:
            return super().get_external_store_context(command_info)
        return inner.get_external_store_context(command_info)

    def _inner(self) -> WorkflowInstance | None:
        in_sandbox = self.globals_and_locals.get("__temporal_in_sandbox")
        inner = getattr(in_sandbox, "instance", None)
        return inner if isinstance(inner, WorkflowInstance) else None

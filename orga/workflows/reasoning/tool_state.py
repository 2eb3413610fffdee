"""The loop's state that tool dispatching reads and changes, and the callbacks it reports to.

Workflow code. One ``ToolState`` lives in the loop for its whole life (and is carried across
continue-as-new through ``ToolStateSnapshot``): the tool definitions, one circuit breaker per
tool, the results kept for ``CachedResult``, the dead letters, and the desk where people answer.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import Priority

from orga.contracts.carry import CachedEntry, ToolStateSnapshot
from orga.contracts.conversation import ToolCall, ToolResult
from orga.contracts.journal import JournalEntry, Stamp
from orga.contracts.policy import PolicyDecision
from orga.contracts.resilience import Breaker, BreakerConfig, DeadLetterEntry, RecoveryConfig
from orga.contracts.tools import ToolDefinition
from orga.core.arguments import try_parse_arguments
from orga.workflows.shared.human_desk import HumanDesk
from orga.workflows.shared.stopping import Stopping

__all__ = ["ToolState", "cache_key"]

_CACHE_LIMIT = 200


def cache_key(call: ToolCall) -> str:
    """The tool and its arguments as canonical JSON (invalid JSON is used as written)."""
    arguments = try_parse_arguments(call.arguments)
    canonical = call.arguments if arguments is None else json.dumps(arguments, sort_keys=True)
    return f"{call.name}\n{canonical}"


@dataclass
class ToolState:
    """Everything dispatching shares with the loop."""

    workflow_id: str
    definitions: dict[str, ToolDefinition]
    breaker_config: BreakerConfig
    recovery: RecoveryConfig
    desk: HumanDesk
    max_concurrent: int
    default_timeout: timedelta
    approval_timeout: timedelta
    max_payload_bytes: int
    record: Callable[[JournalEntry], None]
    """Append a journal entry."""
    stamp: Callable[[], Stamp]
    """The stamp of a journal entry made now."""
    gate: Callable[[ToolCall], Awaitable[PolicyDecision]]
    """Ask the gate about one extra call (a fallback)."""
    delegate: Callable[[ToolCall], Awaitable[ToolResult]] | None = None
    """Runs a ``delegate`` call as a child loop (loops whose agent may delegate)."""
    plan_delegations: Callable[[int], None] | None = None
    """Told how many ``delegate`` calls a turn is about to run (they share what is left)."""
    knowledge_namespace: str | None = None
    """The loop's knowledge store, passed to its tool calls (``recall_knowledge`` …)."""
    knowledge_directory: str | None = None
    """Where the loop works (``config.knowledge.directory``): its recalls stay there."""
    agent_id: str | None = None
    """The loop's agent, passed to its tool calls: a pause of it holds them
    (``orga pause --agent``)."""
    wait_for_cancelled_tools: bool = False
    """A cancelled tool call is waited for until it has stopped (a child loop's: its parent
    compensates only once it has ended, so its tools' effects must have landed by then)."""
    breakers: dict[str, Breaker] = field(default_factory=dict[str, Breaker])
    cache: dict[str, CachedEntry] = field(default_factory=dict[str, CachedEntry])
    dead_letters: list[DeadLetterEntry] = field(default_factory=list[DeadLetterEntry])
    waiting_for_workers: dict[str, int] = field(default_factory=dict[str, int])
    """Tools whose calls wait for a worker that registers them, and how many calls each."""
    worker_wait_changed: Callable[[], None] | None = None
    """Told when a call begins or ends waiting for a worker (the loop's status says it)."""
    pause_recheck: timedelta = field(default_factory=lambda: timedelta(seconds=10))
    """How long a call of a paused tool waits before it asks again (plus up to as much)."""
    paused: Callable[[str, str, str | None], None] | None = None
    """Told a call's id and tool when it begins (its reason) or ends (``None``) waiting for its
    paused tool."""
    pauses_lifted: Callable[[], int] | None = None
    """How many ``pause_lifted`` signals the loop has had (a held call waits for the next)."""
    receipt: Callable[[dict[str, Any]], None] | None = None
    """Journals what became of a call (``LoopBooks.receipt``): an ``unknown`` one at once."""
    priority: Priority = field(default_factory=lambda: Priority.default)
    """Its tool calls' fairness key and weight (the principal's tenant)."""
    setup_level: int = 0
    """The worker's ``SETUP_LEVEL`` when it set the loop up (``patches.taken``)."""
    stopping: Stopping = field(default_factory=Stopping)
    """Whether the loop is stopping: a call's outcome then ends the turn (no recovery, no
    wait for a person), and nothing new runs."""

    def breaker(self, tool: str) -> Breaker:
        found = self.breakers.get(tool)
        if found is None:
            found = self.breakers[tool] = Breaker()
        return found

    def remember(self, call: ToolCall, content: str) -> None:
        key = cache_key(call)
        self.cache.pop(key, None)
        self.cache[key] = CachedEntry(content=content, at=workflow.now())
        while len(self.cache) > _CACHE_LIMIT:
            del self.cache[next(iter(self.cache))]

    def snapshot(self) -> ToolStateSnapshot:
        return ToolStateSnapshot(
            breakers=self.breakers,
            cache=self.cache,
            dead_letters=self.dead_letters,
            decided_ids=sorted(self.desk.decided_ids),
        )

    def restore(self, snapshot: ToolStateSnapshot) -> None:
        self.breakers = dict(snapshot.breakers)
        self.cache = dict(snapshot.cache)
        self.dead_letters = list(snapshot.dead_letters)
        self.desk.decided_ids = set(snapshot.decided_ids)

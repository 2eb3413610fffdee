"""A loop's search attributes: what readers filter on, kept current without an upsert a turn.

Workflow code. ``OrgaAgentId``, ``OrgaStatus``, ``OrgaPrincipal`` and ``OrgaTenant`` are
upserted as soon as they change (the loop starts, waits for a person, goes on, ends; its
worker resolves whom it runs for); ``OrgaIteration`` and ``OrgaTotalTokens`` alone at most
once a minute in between (one history event per upsert: a per-turn upsert would add one to
every turn). Live progress is in the ``state`` query and the Web UI's current details. A
loop its client started with the attributes as the loop would set them
(``orga.runtime.connect.StartAttributes``) counts its start as the first upsert; any other
value given at start — a client's claim of a principal the worker resolves otherwise — is
corrected at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

from temporalio import workflow
from temporalio.common import SearchAttributeUpdate

from orga.contracts import search_attributes as sa
from orga.contracts.principals import Principal
from orga.workflows.shared.common import upsert

__all__ = ["LoopAttributes", "LoopFacts"]

_AT_ONCE: Final = frozenset({sa.AGENT_ID.name, sa.STATUS.name, sa.PRINCIPAL.name, sa.TENANT.name})
"""Search attributes a filter must see at once when they change (progress can wait)."""

_PROGRESS_EVERY: Final = timedelta(minutes=1)
"""How often a running loop's ``OrgaIteration`` and ``OrgaTotalTokens`` are brought up to date
when nothing else about it changed."""


@dataclass(frozen=True)
class LoopFacts:
    """What the attributes say of the loop now."""

    agent_id: str
    status: str
    iteration: int
    total_tokens: int
    principal: Principal | None
    principal_known: bool
    """Its worker has resolved whom it runs for (until then the start's values stand)."""


def _on_the_server() -> dict[str, object]:
    given = workflow.info().typed_search_attributes
    found: dict[str, object] = {}
    for key in (sa.AGENT_ID, sa.STATUS, sa.PRINCIPAL, sa.TENANT):
        if (text := given.get(key)) is not None:
            found[key.name] = text
    for key in (sa.ITERATION, sa.TOTAL_TOKENS):
        if (number := given.get(key)) is not None:
            found[key.name] = number
    return found


class LoopAttributes:
    """The loop's search attributes as the server has them, brought up to date by
    ``publish`` (see the module docstring)."""

    def __init__(self, facts: LoopFacts, started_at: datetime) -> None:
        self._published = _on_the_server()
        """As the server has them (a run after continue-as-new keeps its predecessor's)."""
        fresh = workflow.info().continued_run_id is None
        self._published_at: datetime | None = (
            started_at if fresh and self._published == self._wanted(facts) else None
        )
        """When they were last upserted (the start counts, when it set them as wanted)."""
        self._settled: tuple[object, ...] | None = None
        """The facts that decide the attributes upserted at once, as of the last ``publish``
        that left none of those to upsert."""

    def _wanted(self, facts: LoopFacts) -> dict[str, object]:
        """The attributes as the loop would have them: the principal's only once the loop
        runs for one, or where a start set them (then corrected, or cleared: a filter by
        principal finds only its loops)."""
        wanted: dict[str, object] = {
            sa.AGENT_ID.name: facts.agent_id,
            sa.STATUS.name: facts.status,
            sa.ITERATION.name: facts.iteration,
            sa.TOTAL_TOKENS.name: facts.total_tokens,
        }
        principal = facts.principal
        for key, value in (
            (sa.PRINCIPAL, principal.user if principal is not None else None),
            (sa.TENANT, principal.tenant if principal is not None else None),
        ):
            if not facts.principal_known:  # until the setup says, as the start set them
                value = self._published.get(key.name)
            if value is not None or key.name in self._published:
                wanted[key.name] = value
        return wanted

    def publish(self, facts: LoopFacts) -> None:
        """Upsert what changed, when it may not wait (see the module docstring)."""
        settled = (facts.agent_id, facts.status, facts.principal, facts.principal_known)
        now = workflow.now()
        waits = self._published_at is not None and now - self._published_at < _PROGRESS_EVERY
        if waits and settled == self._settled:
            return  # nothing to upsert at once, and progress waits: the usual turn
        wanted = self._wanted(facts)
        changed = {n: v for n, v in wanted.items() if self._published.get(n) != v}
        if not changed.keys() & _AT_ONCE:
            self._settled = settled
            if not changed or waits:
                return
        updates: list[SearchAttributeUpdate[Any]] = [
            sa.AGENT_ID.value_set(facts.agent_id),
            sa.STATUS.value_set(facts.status),
            sa.ITERATION.value_set(facts.iteration),
            sa.TOTAL_TOKENS.value_set(facts.total_tokens),
        ]
        for key in (sa.PRINCIPAL, sa.TENANT):
            value = wanted.get(key.name)
            updates.append(key.value_set(value) if isinstance(value, str) else key.value_unset())
        upsert([u for u in updates if u.key.name in changed])
        self._published.update(changed)
        self._published_at = now
        self._settled = settled

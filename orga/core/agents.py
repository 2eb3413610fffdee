"""Resolving a loop or task against its agent: the config may narrow the agent, never widen it.

Pure decisions (the worker's ``resolve_loop`` / ``resolve_task`` activities call them and record
the outcome in history). Every refusal is ``InvalidConfig`` naming the ceiling and where it is
defined:

* **tools** — every tool a loop or task may run must match one of the agent's globs (an agent
  with ``delegates`` may also name ``delegate``). A top-level loop that names no tools may
  use what its agent may; one that names tools, or a delegated child, may use just those
  (``narrows_tools``), and is offered ``delegate`` only when they include it
  (``offers_delegation``). A delegated child gets its own agent's tools — not its parent's:
  an orchestrator need not hold what its specialists use — within what the client at the top
  of the tree named, when it named any (``delegation_bound``); every ancestor's gate still
  judges its calls;
* **policy** — no policy: the agent's floor. A stronger gate is allowed (``default`` →
  ``cedar``/``opa``), a weaker one is not; ``cedar`` and ``opa`` are different engines, so a
  floor of one refuses the other; an engine the worker has not configured is refused;
  ``permissive`` only on a worker started with ``ORGA_ALLOW_PERMISSIVE=1`` and an agent whose
  floor is ``default``;
* **budgets** — a value above the agent's ceiling is refused; no value: the default, or the
  ceiling when that is lower;
* **provider and model** — the loop's choice, else the agent's, else the worker's; it must be
  one the agent lists (when it lists any);
* **memory** — ``knowledge.auto_persist`` writes the agent's knowledge, so it needs the agent's
  leave: ``store_knowledge`` among its tools, or ``auto_persist = true`` in its definition.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from orga.contracts.agents import IMPLICIT_AGENT, AgentSpec
from orga.contracts.config import Limits, LoopConfig
from orga.contracts.delegation import DELEGATE_TOOL
from orga.contracts.errors import InvalidConfig
from orga.contracts.knowledge import STORE_TOOL
from orga.contracts.vocabulary import PolicyMode, ProviderName
from orga.core.profile import glob_matches

__all__ = [
    "LoopResolution",
    "Offer",
    "check_local",
    "check_memory",
    "check_model",
    "check_tools",
    "choose_policy",
    "delegation_bound",
    "narrows_tools",
    "offers_delegation",
    "resolve_loop",
]

_STRENGTH: dict[PolicyMode, int] = {"permissive": 0, "default": 1, "cedar": 2, "opa": 2}


@dataclass(frozen=True)
class Offer:
    """What the worker offers, against which loops and tasks are resolved."""

    engines: frozenset[PolicyMode]
    """The gates this worker can run (``default`` always; ``cedar``/``opa`` when configured)."""
    allow_permissive: bool
    default_provider: ProviderName
    default_model: Callable[[ProviderName], str]
    """The worker's default model of a provider (raises ``InvalidConfig`` if not served)."""
    origin: str
    """Where the agents are defined, for messages (``ORGA_AGENTS=agents.toml``)."""


@dataclass(frozen=True)
class LoopResolution:
    """A loop's effective gate, budgets, provider and model."""

    policy: PolicyMode
    limits: Limits
    provider: ProviderName
    model: str


def _named(agent: AgentSpec) -> str:
    return "the worker's implicit agent" if agent.id == IMPLICIT_AGENT else f"agent {agent.id!r}"


def check_local(agent: AgentSpec, offer: Offer, named_by: str = "config.agent_id") -> None:
    """Refuse an agent that runs at an A2A endpoint: loops delegate to it, none runs as it.

    Raises:
        InvalidConfig: naming the agent, its endpoint and where it is defined.
    """
    if agent.a2a is not None:
        raise InvalidConfig(
            f"{named_by} names {_named(agent)}, which runs at the A2A endpoint {agent.a2a} "
            f"(defined in {offer.origin}): loops hand it work with the delegate tool; none "
            "runs as it here"
        )


def check_tools(agent: AgentSpec, names: Sequence[str], offer: Offer, named_by: str) -> None:
    """Refuse tools outside the agent's globs.

    Raises:
        InvalidConfig: naming the tools, the globs and where they are defined.
    """
    outside = [n for n in names if not any(glob_matches(g, n) for g in agent.tools)]
    if outside:
        raise InvalidConfig(
            f"{named_by} names tools {_named(agent)} may not use: {outside!r} (its tools: "
            f"{agent.tools!r}, defined in {offer.origin}). Ask for fewer tools, or have the "
            "worker's operator extend the agent."
        )


def narrows_tools(config: LoopConfig) -> bool:
    """Whether a loop's ``tools`` are all it may use: a client named some, or it is a
    delegated child (its parent set them). A top-level loop that names none advertises none,
    yet may hand on its agent's tools to the children it delegates to."""
    return bool(config.tools) or config.delegation_depth > 0


def delegation_bound(config: LoopConfig) -> list[str] | None:
    """The tools a loop's delegated children may have at most: what the client at the top of
    the delegation tree named (its ``tools`` at the top, carried down as ``client_tools``), or
    None where it named none (each child then has its own agent's tools)."""
    if config.delegation_depth == 0 and config.tools:
        named = list(config.tools)
        return (
            named if config.client_tools is None else [t for t in named if t in config.client_tools]
        )
    return None if config.client_tools is None else list(config.client_tools)


def offers_delegation(agent: AgentSpec, config: LoopConfig, max_depth: int) -> bool:
    """Whether a loop of ``agent`` is offered ``delegate``: its agent has delegates, it is not
    at ``max_depth``, and its tools include ``delegate`` (or it names none: see
    ``narrows_tools``) — a client that names tools without it takes delegation away."""
    return (
        bool(agent.delegates)
        and config.delegation_depth < max_depth
        and (DELEGATE_TOOL in config.tools or not narrows_tools(config))
    )


def check_memory(agent: AgentSpec, offer: Offer) -> None:
    """Refuse ``auto_persist`` for an agent that may not write its knowledge.

    Raises:
        InvalidConfig: naming the agent, what it lacks and where it is defined.
    """
    if agent.auto_persist or any(glob_matches(g, STORE_TOOL) for g in agent.tools):
        return
    raise InvalidConfig(
        f"config.knowledge.auto_persist writes the knowledge of {_named(agent)}, which may not "
        f"write it: it has neither {STORE_TOOL!r} among its tools ({agent.tools!r}) nor "
        f"auto_persist = true (defined in {offer.origin}). Leave auto_persist off, or have the "
        "worker's operator give the agent that leave."
    )


def choose_policy(agent: AgentSpec, requested: PolicyMode | None, offer: Offer) -> PolicyMode:
    """The gate a loop or task of ``agent`` runs under.

    Raises:
        InvalidConfig: ``requested`` is weaker than the floor, another engine, not configured
            on this worker, or ``permissive`` where it is not allowed.
    """
    floor: PolicyMode = agent.policy
    chosen: PolicyMode = requested or floor
    where = f"(policy floor of {_named(agent)}, defined in {offer.origin})"
    if chosen == "permissive":
        if not offer.allow_permissive:
            raise InvalidConfig(
                "policy 'permissive' allows every call; this worker refuses it unless it runs "
                "with ORGA_ALLOW_PERMISSIVE=1 (for development only)"
            )
        if floor != "default":
            raise InvalidConfig(f"policy 'permissive' is weaker than {floor!r} {where}")
        return chosen
    if _STRENGTH[chosen] < _STRENGTH[floor]:
        raise InvalidConfig(f"policy {chosen!r} is weaker than {floor!r} {where}")
    if _STRENGTH[floor] == 2 and chosen != floor:
        raise InvalidConfig(f"policy {chosen!r} is another engine than {floor!r} {where}")
    if chosen not in offer.engines:
        setting = {"cedar": "ORGA_POLICY_DIR", "opa": "ORGA_OPA_URL"}.get(chosen, "")
        raise InvalidConfig(
            f"policy {chosen!r} is not configured on this worker (set {setting}); its gates: "
            f"{sorted(offer.engines)!r}"
        )
    return chosen


@dataclass(frozen=True)
class _Over:
    name: str
    requested: str
    ceiling: str


def _shown(value: Any) -> str:
    return f"{value.total_seconds():g} s" if isinstance(value, timedelta) else str(value)


def _budget(name: str, requested: Any, ceiling: Any, default: Any) -> Any:
    """The budget that applies: the request, else the default capped by the ceiling."""
    if requested is None:
        return default if ceiling is None else min(default, ceiling)
    if ceiling is not None and requested > ceiling:
        return _Over(name, _shown(requested), _shown(ceiling))
    return requested


def resolve_loop(
    agent: AgentSpec, config: LoopConfig, tools: Sequence[str], offer: Offer
) -> LoopResolution:
    """The effective setup of a loop of ``agent`` asking for ``config``.

    Args:
        agent: the agent the loop runs as.
        config: what the loop asks for.
        tools: every tool the loop may run (its own and the fallbacks').
        offer: what the worker offers.

    Raises:
        InvalidConfig: the config asks for more than the agent allows (see the module).
    """
    check_local(agent, offer)
    # An agent's delegates give it ``delegate``, whatever its globs say.
    named = [n for n in tools if n != DELEGATE_TOOL or not agent.delegates]
    check_tools(agent, named, offer, "config.tools (with the recovery fallbacks)")
    if config.knowledge is not None and config.knowledge.auto_persist:
        check_memory(agent, offer)
    policy = choose_policy(agent, config.policy, offer)
    defaults = Limits()
    chosen = {
        name: _budget(name, getattr(config, name), getattr(agent, name), getattr(defaults, name))
        for name in Limits.model_fields
    }
    over = [why for why in chosen.values() if isinstance(why, _Over)]
    if over:
        first = over[0]
        raise InvalidConfig(
            f"config.{first.name}={first.requested} is above the ceiling of {_named(agent)}: "
            f"{first.ceiling} (defined in {offer.origin}). Ask for at most that."
        )
    limits = Limits.model_validate(chosen)
    provider: ProviderName = config.provider or agent.provider or offer.default_provider
    agents_model = agent.model if config.provider in (None, agent.provider) else None
    model = config.model or agents_model or offer.default_model(provider)
    check_model(agent, provider, model, offer, "; name one in config.model")
    return LoopResolution(policy=policy, limits=limits, provider=provider, model=model)


def check_model(
    agent: AgentSpec, provider: ProviderName, model: str, offer: Offer, hint: str = ""
) -> None:
    """Refuse a provider or model outside ``agent``'s lists: the loop's own, or a critic's,
    which the loop's conversation would leave through too.

    Raises:
        InvalidConfig: naming the agent's list and the file that defines it.
    """
    if agent.providers and provider not in agent.providers:
        raise InvalidConfig(
            f"provider {provider!r} is not one {_named(agent)} may use: {agent.providers!r} "
            f"(defined in {offer.origin}){hint}"
        )
    if agent.models and not any(glob_matches(g, model) for g in agent.models):
        raise InvalidConfig(
            f"model {model!r} is not one {_named(agent)} may use: {agent.models!r} (defined in "
            f"{offer.origin}){hint}"
        )

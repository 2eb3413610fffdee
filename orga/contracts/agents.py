"""The worker's agents: who a loop may run as, with which tools, gate and budgets.

An agent is the worker operator's decision, read from the TOML file ``ORGA_AGENTS`` names
(``orga.worker.agent_registry``). A loop names its agent (``config.agent_id``); its config may only
narrow what the agent allows (``orga.core.agents``). The resolved agent is recorded in the
loop's history with the loop's setup. Example:

    [agents.support]
    description = "Answers customer questions from the docs"
    tools = ["file_read", "kb_*"]
    policy = "cedar"
    max_iterations = 20
    max_total_tokens = 50_000
    timeout = "PT10M"
    providers = ["openai"]
    models = ["gpt-4o*"]
    system_prompt = "You answer from the documentation only."

An agent may run elsewhere: ``a2a`` names an Agent2Agent endpoint (another orga deployment's
``orga api --a2a``, or any A2A agent), which loops of this worker may delegate to like a local
agent (``orga.activities.remote_agents``); ``a2a_token_env`` names the worker's environment
variable that holds the bearer token to present (the token itself never leaves the worker):

    [agents.pricing]
    description = "Prices a basket of goods"
    a2a = "https://pricing.example/a2a/"
    a2a_token_env = "PRICING_A2A_TOKEN"
    timeout = "PT5M"
"""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Final, Literal

from pydantic import ConfigDict, Field, model_validator

from orga.contracts.vocabulary import ProviderName
from orga.contracts.wire import Contract

__all__ = ["IMPLICIT_AGENT", "AgentSpec", "ModelChoice", "PolicyFloor"]

PolicyFloor = Literal["default", "cedar", "opa"]
"""The weakest gate an agent's loops may run under."""

IMPLICIT_AGENT: Final = "*"
"""The id of the one agent a worker without ``ORGA_AGENTS`` has: any ``agent_id`` runs as it."""

_LOCAL_ONLY: Final = (
    "tools",
    "providers",
    "models",
    "provider",
    "model",
    "fallbacks",
    "system_prompt",
    "knowledge",
    "auto_persist",
    "delegates",
    "approvals_needed",
    "judge",
    "max_concurrent_tools",
    "a2a_deciders",
)
"""What an agent that runs elsewhere (``a2a``) cannot have: its endpoint decides them."""


class ModelChoice(Contract):
    """A provider and a model (either may be left to the default: the worker's provider, the
    provider's default model)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    provider: ProviderName | None = None
    model: str | None = Field(default=None, min_length=1, max_length=200)


class AgentSpec(Contract):
    """One agent of the worker."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1, max_length=200)
    description: str | None = None
    tools: list[str] = Field(default_factory=list[str])
    """Globs (``*``, ``?``) of the tools its loops may use; none: no tools."""
    policy: PolicyFloor = "default"
    """Its policy floor: a loop may ask for a stronger gate, never a weaker one."""
    max_iterations: int | None = Field(default=None, ge=1)
    """Ceilings: a loop's budget may be lower, never higher."""
    max_total_tokens: int | None = Field(default=None, ge=1)
    timeout: timedelta | None = Field(default=None, gt=timedelta(0))
    max_concurrent_tools: int | None = Field(default=None, ge=1)
    providers: list[ProviderName] = Field(default_factory=list[ProviderName])
    """The providers its loops may use; none listed: any the worker has."""
    models: list[str] = Field(default_factory=list[str])
    """Globs of the models its loops may use; none listed: any."""
    provider: ProviderName | None = None
    """Its loops' provider when they name none (else the worker's default)."""
    model: str | None = None
    """Its loops' model when they name none (else the provider's default)."""
    fallbacks: list[ModelChoice] = Field(default_factory=list[ModelChoice], max_length=5)
    """Models its loops turn to, in order, when theirs is unavailable after its retries (5xx,
    429, timeouts — never a 4xx the request caused); each within ``providers`` and
    ``models``."""
    system_prompt: str | None = None
    """Put before the loop's own messages (and before the config's system prompt)."""
    knowledge: str | None = Field(default=None, min_length=1, max_length=200)
    """The knowledge store its loops read and write (default: its own id). Agents that name the
    same store share what they know; no other agent ever reads it."""
    auto_persist: bool = False
    """Its loops may store their task and answer in its knowledge when they complete
    (``config.knowledge.auto_persist``). Without this, only an agent with ``store_knowledge``
    among its tools may: writing shared memory is the operator's leave to give, never a
    client's to take. Each write still passes the gate (``Action::"remember"``)."""
    delegates: list[str] = Field(default_factory=list[str])
    """The agents its loops may hand work to (the ``delegate`` tool): each runs as a child loop
    of that agent — its tools, policy floor, models and system prompt — on a budget carved
    from the parent's."""
    approvals_needed: dict[str, Annotated[int, Field(ge=1, le=10)]] = Field(
        default_factory=dict[str, int]
    )
    """Four eyes: for the tools matching each glob, how many distinct approvers must approve a
    call the gate sends to a person (the highest of the globs a tool matches; default 1)."""
    judge: str | None = Field(default=None, min_length=1, max_length=200)
    """The judge (``[judges.<name>]``) that decides its loops' held calls before a person does,
    where it is sure and the policies let it (``orga.contracts.judges``)."""
    max_delegation_depth: int = Field(default=2, ge=0, le=10)
    """How deep its loops' delegations may nest (a ceiling: a loop may ask for less, never
    more; a child runs with the lower of its parent's depth and its own agent's)."""
    a2a_deciders: list[str] = Field(default_factory=list[str], max_length=100)
    """Callers of its A2A endpoint (``orga api --a2a``, ``/a2a/<agent>``) who may decide their
    own tasks' ``input-required``, each with a decision signed by its enrolled approver key;
    others wait for orga's people."""
    a2a: str | None = Field(default=None, pattern=r"^https?://[^\s]+$", max_length=2_000)
    """An A2A endpoint (its base URL: the agent card is under it) where this agent runs: loops
    delegate to it there, and none runs as it here."""
    a2a_token_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    """The environment variable of the worker that holds the bearer token ``a2a`` asks for."""

    @model_validator(mode="after")
    def _elsewhere(self) -> AgentSpec:
        if self.a2a is None:
            if self.a2a_token_env is not None:
                raise ValueError("a2a_token_env is the token of an a2a endpoint: name a2a too")
            return self
        fields = type(self).model_fields
        local = [
            name
            for name in _LOCAL_ONLY
            if getattr(self, name) != fields[name].get_default(call_default_factory=True)
        ]
        if local:
            raise ValueError(
                f"an agent that runs at an a2a endpoint has its own tools, models and prompt "
                f"there: {', '.join(local)} cannot be set here"
            )
        return self

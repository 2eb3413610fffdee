"""What a loop is asked to do and within which limits: ``LoopInput`` and ``LoopConfig``.

Both arrive as JSON from the Temporal CLI or as models from the Python client, are validated
strictly (unknown keys are errors, so a typo cannot silently fall back to a default), and are
stored in history: add fields with defaults, never rename or remove one.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from pydantic import ConfigDict, Field, field_validator, model_validator

from orga.contracts.agents import ModelChoice
from orga.contracts.carry import LoopCarry
from orga.contracts.conversation import Message
from orga.contracts.critic import CriticConfig
from orga.contracts.forks import ForkRequest
from orga.contracts.inference import ContextStrategy
from orga.contracts.knowledge import KnowledgeConfig
from orga.contracts.policy import AncestorGate
from orga.contracts.prehydration import PreHydrationConfig
from orga.contracts.principals import PrincipalClaim
from orga.contracts.resilience import BreakerConfig, RecoveryConfig
from orga.contracts.threads import ThreadConfig
from orga.contracts.tools import ToolProfile
from orga.contracts.vocabulary import PolicyMode, ProviderName
from orga.contracts.wire import Compact, Contract

__all__ = ["Limits", "LoopConfig", "LoopInput"]


class LoopConfig(Contract):
    """Limits and choices of one reasoning loop. Every field has a safe default."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    agent_id: str = Field(default="agent", min_length=1, max_length=200)
    """Which of the worker's agents the loop runs as (``ORGA_AGENTS``): its tools, policy floor
    and budget ceilings apply, and it is the policy principal ``Agent::"<agent_id>"``. Without
    an agents file every id is accepted as a label of the worker's one implicit agent."""

    provider: ProviderName | None = None
    """``openrouter`` | ``openai`` | ``anthropic``. Default: the worker's (``ORGA_PROVIDER``, else
    the first provider whose API key the worker has)."""

    model: str | None = None
    """Model name as the provider spells it. Default: the worker's (``OPENROUTER_MODEL``,
    ``OPENAI_MODEL``, ``ANTHROPIC_MODEL``)."""

    system_prompt: str | None = None
    """Prepended as a system message when the loop starts, if given."""

    tools: list[str] = Field(default_factory=list[str])
    """Names of registered tools this loop advertises to the model. Unknown names are a config
    error when the loop starts."""

    max_iterations: int | None = Field(default=None, ge=1, le=100_000)
    """Hard cap on model calls (reasoning steps). Reaching it fails with ``BudgetExceeded``.
    Default 25, or the agent's ceiling if lower; above the ceiling is ``InvalidConfig``."""

    max_total_tokens: int | None = Field(default=None, ge=1)
    """Hard cap on tokens (input + output, as the provider reports them) over the whole loop.
    Default 100 000, or the agent's ceiling if lower."""

    max_cost: float | None = Field(default=None, gt=0)
    """Hard cap on what the loop's model calls cost, in USD (its own, its critic's, its
    context summaries' and its children's), priced by the worker's price table (genai-prices,
    cache reads and writes at their own prices; ``ORGA_MODEL_PRICES`` for a model it does not
    know). Past it the loop ends ``BudgetExceeded`` naming the cost; a call of a model whose
    price is unknown ends it too (it is never counted as free). In a thread, each turn's.
    Default: no cap."""

    timeout: timedelta | None = Field(default=None, gt=timedelta(0))
    """Hard cap on the loop's working time, measured on the workflow clock (time spent waiting
    for a person's approval or an operator is not counted). JSON: seconds or an ISO 8601
    duration (``"PT5M"``). Default 5 minutes, or the agent's ceiling if lower."""

    tool_timeout: timedelta = Field(default=timedelta(seconds=30), gt=timedelta(0))
    """Start-to-close timeout of one tool attempt, unless the tool declares its own."""

    model_timeout: timedelta = Field(default=timedelta(minutes=2), gt=timedelta(0))
    """Start-to-close timeout of one model call attempt."""

    max_concurrent_tools: int | None = Field(default=None, ge=1, le=100)
    """How many independent tool calls of one turn may run at once. Default 5, or the agent's
    ceiling if lower."""

    context_token_budget: int = Field(default=32_000, ge=256)
    """Tokens of conversation sent to the model per call (estimated before the call)."""

    context_strategy: ContextStrategy = "observation_masking"
    """How the conversation is fitted to ``context_token_budget`` (the durable record never
    changes): ``sliding_window``, ``observation_masking`` or ``anchored_summary``."""

    max_output_tokens: int | None = Field(default=None, ge=1)
    """The provider's ``max_tokens``. Default: unset for OpenAI-compatible APIs, 4096 for
    Anthropic (which requires it)."""

    temperature: float | None = Field(default=None, ge=0, le=2)
    """Sampling temperature; the provider's default when unset."""

    prompt_cache: bool = True
    """Mark the stable prefix of each model call for the provider's prompt cache (Anthropic:
    ``cache_control`` on the tools, the system prompt and the conversation up to the newest
    turn; OpenAI-compatible APIs cache by themselves and only report it). Cache reads and
    writes are recorded in ``Usage``; ``max_total_tokens`` counts them at face value. ``False``:
    no ``cache_control`` is sent."""

    policy: PolicyMode | None = None
    """The gate: ``default`` (fail closed), ``cedar``, ``opa``, or ``permissive`` (development
    only; refused unless the worker runs with ``ORGA_ALLOW_PERMISSIVE=1``). Default: the
    agent's policy floor; asking for a weaker gate than the floor is ``InvalidConfig``."""

    approval_timeout: timedelta = Field(default=timedelta(hours=1), gt=timedelta(0))
    """How long a call that needs approval waits for a person; then it is denied ("approval
    timed out"). Time spent waiting for people does not count against ``timeout``."""
    pause_recheck: timedelta = Field(
        default=timedelta(seconds=10), ge=timedelta(seconds=1), le=timedelta(minutes=10)
    )
    """A call a pause holds (its tool's, its loop's or its agent's: ``orga pause``) asks again
    after this long plus a random share of it, then when the pause ends, so the calls a resume
    releases run spread out, not all at once. The wait does not count against ``timeout``. A
    task has its own (``TaskInput.pause_recheck``)."""

    circuit_breaker: BreakerConfig = Field(default_factory=BreakerConfig)
    """One breaker per tool: opens after consecutive failures, probes after a pause."""

    pre_hydration: PreHydrationConfig | None = None
    """Fetch what the task refers to (URLs, files, issues) before the first reasoning step;
    off unless set (``{}`` turns it on with the defaults)."""

    max_delegation_depth: int | None = Field(default=None, ge=0, le=10)
    """How deep ``delegate`` may nest: a loop at this depth has no ``delegate`` tool (default:
    its agent's ``max_delegation_depth``, 2; above it is ``InvalidConfig``)."""

    delegation_depth: int = Field(default=0, ge=0, le=10)
    """How deep this loop is in a chain of delegations (set by the parent; 0 at the top). A
    loop below the top is a delegated child: its ``tools`` are exactly what it may use."""

    client_tools: list[str] | None = None
    """The tools the client that started the top of a delegation tree named (set by a parent
    for its delegated child: its own ``tools`` at the top, else its ``client_tools``; None: the
    client named none). What a loop hands on to its children stays within them; a parent's
    agent never needs its children's tools. A client may set it to narrow further."""

    ancestor_gates: list[AncestorGate] = Field(default_factory=list[AncestorGate], max_length=10)
    """The gates of the loops that delegated to this one, nearest first (set by the parent: its
    own gate and its ancestors'). Every action of this loop passes them too, each judging as
    its own agent, besides this loop's gate; a client may add gates, never remove one."""

    stream: bool = False
    """Publish the model's text while it arrives (a Workflow Stream on the loop, topic
    ``text``: ``orga run --stream``, ``orga journal --follow``); only the assembled answer
    enters history as the model call's result."""

    output_schema: dict[str, Any] | None = None
    """Typed answers: the JSON Schema the final answer must match (the answer is JSON text; the
    result's ``value`` is it parsed). An answer that does not match goes back to the model with
    the validation error, at most ``output_retries`` times, then the loop ends ``OutputInvalid``.
    In Python, ``orga.start_loop(..., output_type=Model)`` sets it from a pydantic model."""
    output_retries: int = Field(default=2, ge=0, le=10)
    """How many answers that do not match ``output_schema`` go back to the model, each with
    its validation errors, before the loop ends ``OutputInvalid``."""
    structured_output: bool = True
    """With ``output_schema``: ask the provider for an answer that matches it (its structured
    output: OpenAI-compatible ``response_format``, Anthropic ``output_config.format``). Off for
    a schema a provider refuses (it answers 400); the answer is validated either way."""
    thread: ThreadConfig | None = None
    """A conversation: after each answer the loop waits for the next message (``orga chat``,
    ``orga say``, ``orga.start_thread``) instead of ending. Its ``max_iterations``,
    ``max_total_tokens`` and ``timeout`` are then each turn's; the ``ThreadConfig`` bounds the
    whole thread and sets the idle timeout (default a week). Off unless set (``{}`` turns it on
    with the defaults)."""
    fallbacks: list[ModelChoice] | None = Field(default=None, max_length=5)
    """Models to turn to, in order, when the loop's is unavailable after its retries (5xx, 429,
    timeouts — never a 4xx the request caused): the loop goes on with the first that answers,
    journaled as ``ModelSwitched`` and counted in the same budgets. Default: its agent's
    ``fallbacks``; each must be a provider and model its agent may use."""
    critic: CriticConfig | None = None
    """Review the final answer before it is accepted: a critic model (``{"kind": "model",
    "agent": "<id>"}``) or a person (``{"kind": "human"}``); ``revise`` sends the feedback back
    to the model. Off unless set."""

    knowledge: KnowledgeConfig | None = None
    """Use the agent's knowledge: inject what is relevant before each reasoning step, offer
    ``recall_knowledge`` / ``store_knowledge``, optionally remember the final answer. Off unless
    set (``{}`` turns it on with the defaults)."""

    tool_profile: ToolProfile = Field(default_factory=ToolProfile)
    """Which of the loop's tools the model sees (include/exclude globs, [verified], max)."""

    max_no_gain: int = Field(default=2, ge=1, le=100)
    """Consecutive evidence results judged NO_GAIN (or duplicate scopes) that saturate
    evidence collection; the model is then told to answer with what it has."""

    recovery: RecoveryConfig = Field(default_factory=RecoveryConfig)
    """What happens when a tool call fails: a default strategy and per-tool strategies."""

    max_payload_bytes: int = Field(default=256 * 1024, ge=1024, le=1024 * 1024)
    """A tool result or model answer larger than this is cut before it enters history, with a
    marker for the model; the store keeps the full text (``orga blob get``)."""

    journal_limit: int = Field(default=1_000, ge=10, le=100_000)
    """How many journal entries the loop keeps (oldest dropped first; the count is kept)."""

    max_state_bytes: int = Field(default=128 * 1024 * 1024, ge=64 * 1024)
    """The largest state (conversation and carried state, as JSON) a loop carries into its next
    run when it continues as new; past it the loop fails with ``StateTooLarge`` rather than
    hand on an input no worker should hold. The store keeps it out of history either way."""

    max_history_events: int = Field(default=4_000, ge=200, le=40_000)
    """Continue as new at the next iteration boundary once the history is this long (or when
    Temporal suggests it): well under Temporal's 10 240-event warning."""

    upgrade_on_continue: bool = True
    """On versioned workers (``ORGA_DEPLOYMENT_NAME``) a run stays on the build it started
    on. A thread whose deployment has a new current build when its next message arrives
    continues as new onto that build before it answers (Temporal's upgrade on
    continue-as-new), so a thread that waits for weeks picks up new code without a patch.
    ``False`` keeps the thread on its build. A loop that is not a thread always finishes on
    the build it started on."""

    @field_validator("tools")
    @classmethod
    def _unique_tools(cls, tools: list[str]) -> list[str]:
        duplicates = sorted({name for name in tools if tools.count(name) > 1})
        if duplicates:
            raise ValueError(f"tools are listed more than once: {duplicates!r}")
        return tools


class Limits(Contract):
    """The budgets that apply to a loop: its config's, within its agent's ceilings."""

    model_config = ConfigDict(frozen=True)

    max_iterations: int = 25
    max_total_tokens: int = 100_000
    timeout: timedelta = timedelta(minutes=5)
    max_concurrent_tools: int = 5
    max_delegation_depth: int = 2

    @classmethod
    def of(cls, config: LoopConfig) -> Limits:
        """The config's budgets, with the defaults where it names none (no agent ceilings)."""
        named = {
            "max_iterations": config.max_iterations,
            "max_total_tokens": config.max_total_tokens,
            "timeout": config.timeout,
            "max_concurrent_tools": config.max_concurrent_tools,
            "max_delegation_depth": config.max_delegation_depth,
        }
        return cls.model_validate({k: v for k, v in named.items() if v is not None})


class LoopInput(Compact):
    """The input of the ``ReasoningLoop`` workflow."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    messages: list[Message] = Field(default_factory=list[Message])
    """The conversation so far; usually one user message with the task. Empty only for a
    thread (``config.thread``), which then waits for its first message."""

    config: LoopConfig = Field(default_factory=LoopConfig)

    carry: LoopCarry | None = None
    """Set by the loop itself when it continues as new (``messages`` is then the whole
    conversation). A run that does not continue an earlier one refuses it (``InvalidConfig``):
    a client cannot hand a loop its journal, budgets spent or decided approvals."""

    fork: ForkRequest | None = None
    """Start from another loop's state after one of its turns (``orga fork``): the worker reads
    that state from the source itself; ``messages`` is then empty."""

    principal: PrincipalClaim | None = None
    """Who the loop runs for (``orga.contracts.principals``): a claim, or a binding an enrolled
    issuer signed for this workflow id. Its model calls are charged to that user's and
    tenant's spend ledger. A delegated child and a next run carry their parent's and
    predecessor's (the loop sets it; a client's is not taken for theirs). None: nobody's
    (refused where the operator requires principals)."""

    @model_validator(mode="after")
    def _something_to_do(self) -> LoopInput:
        if self.fork is not None:
            if self.messages:
                raise ValueError(
                    "a fork takes its conversation from its source: messages must be empty "
                    "(fork.say adds a message)"
                )
            return self
        if not self.messages and self.config.thread is None:
            raise ValueError(
                "messages is empty: a loop needs its task (only a thread, config.thread, may "
                "start without a message and wait for the first)"
            )
        return self

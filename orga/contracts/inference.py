"""Contracts of the inference activity: what the loop asks a model and what comes back.

The request does not carry the whole conversation. The workflow holds it; each request carries
only the messages added since the previous call plus a digest of the whole — not the model's
own last turn, which the worker that made that call keeps as the loop records it — and the
worker keeps the conversation in memory (rebuilding it from the workflow's ``conversation``
query on a miss). History therefore grows linearly with the number of turns, not
quadratically, and holds the model's answers once.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Final, Literal

from pydantic import ConfigDict, Field, NonNegativeFloat, NonNegativeInt

from orga.contracts.conversation import Message, Reasoning, ToolCall
from orga.contracts.principals import Principal
from orga.contracts.verdicts import PolicyResult
from orga.contracts.vocabulary import ProviderName
from orga.contracts.wire import Compact, Contract

__all__ = [
    "CALL_MODEL",
    "KNOWN_STOP_REASONS",
    "STREAM_BATCH",
    "STREAM_TOPIC",
    "SUMMARISE_CONTEXT",
    "ContextStrategy",
    "ConversationRange",
    "ConversationSlice",
    "InferenceRequest",
    "InferenceResponse",
    "StreamedText",
    "SummaryRequest",
    "SummaryResponse",
    "Usage",
]

ContextStrategy = Literal["sliding_window", "observation_masking", "anchored_summary"]
"""How the conversation sent to a model is fitted into its budget (``orga.core.context``)."""

KNOWN_STOP_REASONS: Final = frozenset(
    {
        "end_turn",
        "tool_use",
        "max_tokens",
        "stop_sequence",
        "pause_turn",
        "refusal",
        "model_context_window_exceeded",
    }
)
"""The normalised vocabulary. A provider value outside it is passed through raw (and so fails)."""

CALL_MODEL: Final = "call_model"
"""Name of the inference activity."""
SUMMARISE_CONTEXT: Final = "summarise_context"
"""Name of the activity that folds turns into an ``anchored_summary`` loop's running summary."""


class Usage(Contract):
    """Tokens spent, as the provider reported them.

    The rule budgets count by: ``total_tokens`` = ``input_tokens`` + ``output_tokens``, where
    ``input_tokens`` is every input token the provider reported, cache reads and cache writes
    included (Anthropic's ``input_tokens`` + ``cache_creation_input_tokens`` +
    ``cache_read_input_tokens``; OpenAI's ``prompt_tokens``, which already holds
    ``cached_tokens``). Every token counts at face value against ``max_total_tokens``: a cache
    read is billed cheaper (Anthropic: a tenth) but counted fully, so a budget never depends on
    whether a provider's cache happened to hit. The two ``cache_*`` fields say how many of the
    input tokens came from or went into the provider's prompt cache.
    """

    model_config = ConfigDict(frozen=True)

    input_tokens: NonNegativeInt = 0
    """Every input token, cache reads and writes included."""
    output_tokens: NonNegativeInt = 0
    total_tokens: NonNegativeInt = 0
    """``input_tokens`` + ``output_tokens`` (what ``max_total_tokens`` counts)."""
    estimated: bool = False
    """True when the provider reported no usage and the numbers are orga's estimate."""
    cache_read_input_tokens: NonNegativeInt = 0
    """Input tokens served from the provider's prompt cache (Anthropic
    ``cache_read_input_tokens``, OpenAI ``prompt_tokens_details.cached_tokens``, DeepSeek
    ``prompt_cache_hit_tokens``); part of ``input_tokens``."""
    cache_creation_input_tokens: NonNegativeInt = 0
    """Input tokens written to the provider's prompt cache (Anthropic
    ``cache_creation_input_tokens``, OpenAI ``prompt_tokens_details.cache_write_tokens``);
    part of ``input_tokens``."""
    cost_usd: NonNegativeFloat = Field(default=0.0, exclude_if=lambda v: v == 0)
    """What the priced calls cost, in USD (the worker's price table: genai-prices, or
    ``ORGA_MODEL_PRICES``; cache reads and writes at their own prices)."""
    unpriced_calls: NonNegativeInt = Field(default=0, exclude_if=lambda v: v == 0)
    """Calls of a model whose price is unknown: never counted as free (``max_cost`` cannot
    be kept past one)."""

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            total_tokens=self.total_tokens + other.total_tokens,
            estimated=self.estimated or other.estimated,
            cache_read_input_tokens=self.cache_read_input_tokens + other.cache_read_input_tokens,
            cache_creation_input_tokens=self.cache_creation_input_tokens
            + other.cache_creation_input_tokens,
            cost_usd=self.cost_usd + other.cost_usd,
            unpriced_calls=self.unpriced_calls + other.unpriced_calls,
        )

    def since(self, earlier: Usage) -> Usage:
        """What was spent after ``earlier`` (a snapshot of the same running total; a count
        below it, which a running total never has, is taken as nothing spent)."""
        return Usage(
            input_tokens=max(0, self.input_tokens - earlier.input_tokens),
            output_tokens=max(0, self.output_tokens - earlier.output_tokens),
            total_tokens=max(0, self.total_tokens - earlier.total_tokens),
            estimated=self.estimated,
            cache_read_input_tokens=max(
                0, self.cache_read_input_tokens - earlier.cache_read_input_tokens
            ),
            cache_creation_input_tokens=max(
                0, self.cache_creation_input_tokens - earlier.cache_creation_input_tokens
            ),
            cost_usd=max(0.0, self.cost_usd - earlier.cost_usd),
            unpriced_calls=max(0, self.unpriced_calls - earlier.unpriced_calls),
        )


class ConversationSlice(Contract):
    """The tail of the conversation a model call must see, and how to check the rest.

    ``messages`` are the conversation's messages from index ``start`` to ``length``; the
    whole conversation ``[0, length)`` has digest ``digest`` (``chain_digest`` from "").
    """

    model_config = ConfigDict(frozen=True)

    workflow_id: str
    start: int = Field(ge=0)
    length: int = Field(ge=1)
    digest: str
    messages: list[Message]


class ConversationRange(Contract):
    """The argument of the workflow's ``conversation`` query: messages ``[start, end)``."""

    model_config = ConfigDict(frozen=True)

    start: int = Field(default=0, ge=0)
    end: int | None = Field(default=None, ge=0)
    """Exclusive; ``None`` means to the end."""


class InferenceRequest(Compact):
    """The input of the ``call_model`` activity."""

    model_config = ConfigDict(frozen=True)

    provider: ProviderName | None = None
    model: str | None = None
    iteration: int = Field(ge=1)
    conversation: ConversationSlice
    tools: list[str] = Field(default_factory=list[str])
    """Names of the tools to advertise; the worker's registry supplies their schemas."""
    max_output_tokens: int | None = None
    temperature: float | None = None
    context_token_budget: int = 32_000
    context_strategy: ContextStrategy = "observation_masking"
    token_calibration: float = 1.0
    """Reported input tokens per estimated token, from the previous call (1.0 at first)."""
    judged_tools: list[str] = Field(default_factory=list[str])
    """Evidence tools whose schema gets the ``previous_gain`` judgement argument."""
    max_response_bytes: int = 256 * 1024
    """A longer answer is cut (the full text is kept in the store)."""
    stream: bool = False
    """Stream the answer and publish its text to the loop's Workflow Stream as it arrives."""
    gate: bool = False
    """Decide the ``default`` gate for the answer's actions here, on the worker, with the same
    rules as the policy activity (the loop then needs no policy call for this turn)."""
    agent_id: str = ""
    """Whose actions the gate decides (with ``gate``)."""
    knowledge: str | None = None
    """The ``[KNOWLEDGE_CONTEXT]`` message for this call (it replaces any earlier one: the
    durable conversation never holds it)."""
    prompt_cache: bool = True
    """Mark the stable prefix for the provider's prompt cache (``LoopConfig.prompt_cache``)."""
    token_budget: int | None = None
    """Tokens the loop has left (``max_total_tokens`` less what it and its children and critic
    spent): the fitted input must fit, and the answer is capped to the rest
    (``orga.core.budget``); a call that cannot fit fails ``BudgetExceeded`` without asking the
    provider. ``None``: not checked here."""
    context_summary: str | None = None
    """``anchored_summary``: the loop's running summary of messages ``[0,
    summarised_through)``; they are left out (the anchors stay) and the summary is shown in
    their place (``orga.core.context.fit``)."""
    summarised_through: int = Field(default=0, ge=0)
    """How many messages of the conversation ``context_summary`` covers."""
    output_schema: dict[str, Any] | None = None
    """A typed loop's answer schema: shown to the model (``orga.core.typed_answers``) and, with
    ``constrain_output``, asked of the provider's structured output (OpenAI-compatible
    ``response_format``, Anthropic ``output_config.format``); ``None``: free text."""
    constrain_output: bool = True
    """Ask the provider to constrain the answer to ``output_schema``; False: only show it (the
    loop constrains only where the model is to answer: ``typed_answers.constrains``)."""
    principal: Principal | None = None
    """Who the loop runs for: the call is charged to that user's and tenant's spend ledger
    (``orga.activities.principals``), its worst case held before it is sent."""


class InferenceResponse(Compact):
    """One model turn, normalised. The workflow routes on ``stop_reason`` and nothing else."""

    model_config = ConfigDict(frozen=True)

    stop_reason: str
    """Normalised: ``end_turn``, ``tool_use``, ``max_tokens``, ``refusal`` … or the raw value."""
    raw_stop_reason: str | None = None
    """What the provider said (``finish_reason`` or ``stop_reason``), for the journal."""
    text: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list[ToolCall])
    usage: Usage = Field(default_factory=Usage)
    provider: ProviderName
    model: str
    """The model that answered, as the provider named it."""
    response_id: str | None = None
    refusal: str | None = None
    """The provider's refusal text, when it gave one."""
    blob_ref: str | None = None
    """When ``text`` was cut by the payload guard: where the worker keeps the full text."""
    estimated_input_tokens: int = 0
    """orga's estimate of what it sent (messages and tool schemas), for calibration."""
    context_dropped: int = 0
    """Messages left out of this call to fit the context budget."""
    context_masked: int = 0
    """Tool results replaced by a placeholder in this call."""

    gate: PolicyResult | None = None
    """With ``InferenceRequest.gate``: the ``default`` gate's decisions for the answer's actions
    (its tool calls in order, or its final answer), made when the answer arrived."""
    budget_capped: bool = False
    """The answer's length was capped to what ``token_budget`` left (below the loop's own
    ``max_output_tokens``): a ``max_tokens`` stop then means the budget ran out."""
    reasoning: list[Reasoning] = Field(default_factory=list[Reasoning])
    """The model's reasoning (thinking blocks, ``reasoning_content``): never part of ``text``."""
    source: str | None = None
    """``<provider>:<model>`` the call asked (``Message.source`` of the turn it adds)."""

    def as_message(self) -> Message:
        """The assistant turn this response adds to the conversation."""
        return Message(
            role="assistant",
            content=self.text,
            tool_calls=list(self.tool_calls),
            reasoning=list(self.reasoning),
            source=self.source,
        )


class SummaryRequest(Compact):
    """The input of the ``summarise_context`` activity: fold messages ``[start, through)``
    (less the anchors: ``orga.core.context.summarised``) into the summary so far."""

    model_config = ConfigDict(frozen=True)

    provider: ProviderName | None = None
    model: str | None = None
    iteration: int = Field(ge=1)
    """The model call the summary is made for."""
    conversation: ConversationSlice
    """The loop's conversation, as the model call it prepares carries it (the worker keeps the
    rest): the summariser reads the leaving messages from it, none travel twice."""
    start: int = Field(ge=0)
    through: int = Field(ge=1)
    previous: str | None = None
    """The running summary of the messages before ``start`` (``None``: the first fold)."""
    max_output_tokens: int = Field(ge=1)
    """How long the summary may be (``orga.core.context.summary_tokens``)."""
    context_token_budget: int = Field(default=32_000, ge=1)
    """The loop's; the leaving messages are cut to fit it."""
    token_calibration: float = 1.0
    token_budget: int | None = None
    """Tokens the loop has left (as ``InferenceRequest.token_budget``)."""
    principal: Principal | None = None
    """Who the loop runs for: the call is charged to its spend ledger, as the loop's own are."""


class SummaryResponse(Compact):
    """The new running summary and what making it spent (an empty ``text``: the summariser
    answered nothing, and what it spent is charged all the same)."""

    model_config = ConfigDict(frozen=True)

    text: str
    usage: Usage = Field(default_factory=Usage)
    model: str = ""
    """The model that wrote it, as the provider named it."""
    folded: int = 0
    """Messages folded in."""
    cut: bool = False
    """The summary was cut at ``max_output_tokens`` (or the tokens the loop had left)."""
    stop_reason: str = ""
    """Why the summariser stopped (``end_turn``, ``max_tokens``, …): with an empty ``text``,
    why there is no summary (a reasoning model that spent its output on thinking)."""


STREAM_TOPIC: Final = "text"
"""The Workflow Stream topic a streaming loop publishes its model's text on."""
STREAM_BATCH: Final = timedelta(milliseconds=250)
"""How often the model call flushes what arrived (each flush is one signal in history)."""


class StreamedText(Contract):
    """One item of a loop's ``text`` stream: a piece of the answer of model call
    ``iteration``, or a mark that the call was retried (``restart``: drop what this call showed
    so far) or has ended (``done``)."""

    model_config = ConfigDict(frozen=True)

    iteration: int
    text: str = ""
    restart: bool = False
    done: bool = False

"""The inference activity: one model call, over the worker's shared HTTP client."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass

import httpx
from opentelemetry.trace import SpanKind
from temporalio import activity
from temporalio.client import Client
from temporalio.contrib.workflow_streams import WorkflowStreamClient
from temporalio.exceptions import ApplicationError

from orga.activities.elsewhere import Elsewhere, hand_on
from orga.activities.principals import SpendGuard
from orga.contracts.conversation import Message
from orga.contracts.errors import (
    BudgetExceeded,
    ConversationUnavailable,
    ToolNotOnThisWorker,
)
from orga.contracts.inference import (
    CALL_MODEL,
    STREAM_BATCH,
    STREAM_TOPIC,
    ConversationRange,
    InferenceRequest,
    InferenceResponse,
    StreamedText,
    Usage,
)
from orga.contracts.messages import CONVERSATION_QUERY
from orga.contracts.policy import PolicyAction, PolicyRequest, PolicyResult
from orga.contracts.tools import ToolDefinition
from orga.core.budget import OutOfBudget, output_cap, served
from orga.core.context import Fitted, fit
from orga.core.evidence import with_judgement
from orga.core.ids import with_internal_ids
from orga.core.knowledge import with_knowledge
from orga.core.text import estimate_tokens
from orga.core.typed_answers import with_schema
from orga.providers.client import complete
from orga.providers.prices import priced
from orga.runtime.pauses import LOOP_PAUSED, PauseBook
from orga.runtime.settings import Settings
from orga.runtime.tracing import tracer
from orga.tools.sdk import ToolRegistry
from orga.worker.blobs import BlobStore
from orga.worker.conversation_cache import ConversationCache
from orga.worker.heartbeat import heartbeating
from orga.worker.metrics import observe
from orga.worker.provider_health import ProviderHealth

__all__ = ["InferenceActivities"]


def _cache_attributes(usage: Usage) -> dict[str, int]:
    """The GenAI semantic conventions' cache counts (part of ``gen_ai.usage.input_tokens``),
    only those the provider reported: none is exported as a made-up 0."""
    counts = {
        "gen_ai.usage.cache_read.input_tokens": usage.cache_read_input_tokens,
        "gen_ai.usage.cache_creation.input_tokens": usage.cache_creation_input_tokens,
    }
    return {name: count for name, count in counts.items() if count > 0}


@dataclass(frozen=True)
class _Prompt:
    """What one model call sends, built within the loop's budgets."""

    fitted: Fitted
    tools: list[ToolDefinition]
    estimated: int
    """Input tokens, as orga estimates them (calibrated by what the provider counted)."""
    max_output: int | None
    capped: bool
    """The output cap is what the token budget leaves, below the configured one."""


class InferenceActivities:
    """Holds what model calls share on one worker: settings, HTTP client, conversation cache,
    the health of the models it calls."""

    def __init__(
        self,
        *,
        settings: Settings,
        http: httpx.AsyncClient,
        registry: ToolRegistry,
        client: Client,
        blobs: BlobStore,
        spend: SpendGuard,
        decide: Callable[[PolicyRequest], Awaitable[PolicyResult]] | None = None,
        health: ProviderHealth | None = None,
        pauses: PauseBook | None = None,
        elsewhere: Elsewhere | None = None,
    ) -> None:
        self._elsewhere = elsewhere
        """Whether a live worker of a task queue registers a tool (``hand_on``)."""
        self.pauses = pauses
        """Loops and agents paused (``orga pause ID``, ``--agent``): their model calls wait."""
        self.health = health or ProviderHealth()
        """One breaker per (provider, model) for the worker's model calls: a model that is down
        is not asked again until its cool-off ends (``orga.worker.provider_health``)."""
        self._spend = spend
        """Charges each call to its principal's ledger (``orga.activities.principals``)."""
        self._decide = decide
        """The policy activity's rules, for calls that decide the ``default`` gate here."""
        self._blobs = blobs
        self._settings = settings
        self._http = http
        self._registry = registry
        self._client = client
        self.cache = ConversationCache(self._fetch_conversation)

    async def _fetch_conversation(self, workflow_id: str, length: int) -> list[Message]:
        handle = self._client.get_workflow_handle(workflow_id)
        try:
            return await handle.query(
                CONVERSATION_QUERY,
                ConversationRange(start=0, end=length),
                result_type=list[Message],
            )
        except Exception as error:
            raise ConversationUnavailable(
                f"could not read the conversation of workflow {workflow_id!r} back from the "
                f"workflow ({type(error).__name__}: {error}); retrying"
            ) from error

    def _tools(self, names: list[str], judged: list[str]) -> list[ToolDefinition]:
        definitions: list[ToolDefinition] = []
        for name in names:
            found = self._registry.get(name)
            if found is None and (why := self._registry.absent(name)) is not None:
                # A tool its MCP server withdrew: no longer offered; a call the model still
                # makes gets a clear error result from the tool activity.
                activity.logger.warning("not offering tool %r to the model: %s", name, why)
                continue
            if found is None:  # the loop's setup found it: another worker registers it
                # Not retried by Temporal unless a live worker has it (``hand_on``): the loop
                # waits for a worker with the tool, durably and visibly (awaiting_worker).
                raise ToolNotOnThisWorker(
                    f"tool {name!r} is not registered on this worker (registered: "
                    f"{self._registry.names()!r}); the call waits for a worker that has it. "
                    "Run the same tool modules on every worker of a task queue.",
                    {"tool": name},
                    non_retryable=True,
                )
            definition = found.definition
            if name in judged:
                definition = with_judgement(definition)
            definitions.append(definition)
        return definitions

    @contextlib.asynccontextmanager
    async def _publisher(
        self, request: InferenceRequest
    ) -> AsyncGenerator[Callable[[str], None] | None]:
        """With ``request.stream``: a function that publishes each piece of text to the loop's
        Workflow Stream (topic ``text``), in batches, flushed when the call ends. A retried
        call first says so, so readers drop what the broken attempt showed."""
        if not request.stream:
            yield None
            return
        stream = WorkflowStreamClient.from_within_activity()
        text = stream.topic(STREAM_TOPIC, type=StreamedText)
        ended = asyncio.Event()

        async def flush_now_and_then() -> None:
            # Flushed here rather than by the client's own background task: that one is
            # cancelled on exit, and a signal cancelled in flight stalls the exit for long.
            while not ended.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(ended.wait(), STREAM_BATCH.total_seconds())
                await stream.flush()

        flushing = asyncio.create_task(flush_now_and_then())
        try:
            if activity.info().attempt > 1:
                text.publish(StreamedText(iteration=request.iteration, restart=True))

            def publish(piece: str) -> None:
                text.publish(StreamedText(iteration=request.iteration, text=piece))

            yield publish
            text.publish(StreamedText(iteration=request.iteration, done=True))
        finally:
            ended.set()
            await flushing  # its last round sends what is left

    @activity.defn(name=CALL_MODEL)
    async def call_model(self, request: InferenceRequest) -> InferenceResponse:
        """Ask the model for its next turn: the prompt built within the budgets, the provider
        asked, the answer gated (the ``default`` gate) and bounded, and kept in the worker's
        copy of the conversation as the loop will record it. A model that is down on this
        worker is not asked: the call fails ``ProviderDown`` at once."""
        if self.pauses is not None:  # a paused loop or agent: its loop waits, asks again
            loop = activity.info().workflow_id
            held = self.pauses.held(f"loop:{loop}", f"agent:{request.agent_id}")
            if held is not None:
                raise ApplicationError(held.describe(), type=LOOP_PAUSED, non_retryable=True)
        provider = self._settings.provider(request.provider)
        model = request.model or provider.default_model
        with self.health.guard(provider.name, model):
            try:
                prompt = await self._prompt(request)
            except ToolNotOnThisWorker as missing:  # to a worker with the tool, if one is live
                await hand_on(self._elsewhere, missing)
            async with self._spend.held(
                request.principal,
                provider=provider.name,
                model=model,
                estimated=prompt.estimated,
                max_output=prompt.max_output,
            ) as settle:
                response = await self._ask(request, prompt)
                await settle(response.usage)
        answered = await self._answer(request, prompt, response)
        # The loop records the answer as its next message (its ids): keep it, so the next call
        # need not carry it back (orga.workflows.reasoning.durable_conversation).
        turn = with_internal_ids(answered, request.iteration).as_message()
        self.cache.expect(request.conversation, turn)
        return answered

    async def _prompt(self, request: InferenceRequest) -> _Prompt:
        """The conversation (the worker's copy, topped up), fitted to the context budget, the
        tools' definitions, and the output cap the token budget leaves.

        Raises:
            BudgetExceeded: the call cannot fit in what the budget leaves (not asked).
        """
        conversation = await self.cache.resolve(request.conversation)
        fitted = fit(
            with_knowledge(with_schema(conversation, request.output_schema), request.knowledge),
            request.context_token_budget,
            request.context_strategy,
            request.token_calibration,
            request.context_summary,
            request.summarised_through,
        )
        tools = self._tools(request.tools, request.judged_tools)
        estimated = fitted.estimated_tokens + round(
            estimate_tokens(json.dumps([t.model_dump(mode="json") for t in tools]))
            * request.token_calibration
        )
        try:
            max_output, capped = output_cap(
                request.max_output_tokens, request.token_budget, estimated
            )
        except OutOfBudget as error:  # the provider is not asked: the loop ends BudgetExceeded
            raise BudgetExceeded(str(error), {"estimated_input_tokens": estimated}) from error
        return _Prompt(fitted, tools, estimated, max_output, capped)

    async def _ask(self, request: InferenceRequest, prompt: _Prompt) -> InferenceResponse:
        """The provider's answer, heartbeating and streaming while it comes, in a GenAI span,
        charged what was served (else the estimate)."""
        provider = self._settings.provider(request.provider)
        model = request.model or provider.default_model
        info = activity.info()
        timeout = (
            info.start_to_close_timeout.total_seconds() if info.start_to_close_timeout else 120
        )
        started = time.monotonic()
        with tracer().start_as_current_span(
            f"chat {model}",
            kind=SpanKind.CLIENT,
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": provider.name,
                "gen_ai.request.model": model,
                # Only a limit that was sent: none is the provider's own, not 0.
                **(
                    {}
                    if prompt.max_output is None
                    else {"gen_ai.request.max_tokens": prompt.max_output}
                ),
            },
        ) as span:
            async with heartbeating(), self._publisher(request) as on_text:
                response = await complete(
                    self._http,
                    provider,
                    prompt.fitted.messages,
                    prompt.tools,
                    model=model,
                    max_output_tokens=prompt.max_output,
                    temperature=request.temperature,
                    timeout=timeout,
                    on_text=on_text,
                    prompt_cache=request.prompt_cache,
                    output_schema=request.output_schema if request.constrain_output else None,
                )
            usage = priced(
                served(response, prompt.estimated),
                provider.name,
                model,
                self._settings.model_prices,
            )
            response = response.model_copy(update={"usage": usage})
            span.set_attributes(
                {
                    "gen_ai.response.model": response.model,
                    "gen_ai.response.finish_reasons": [response.raw_stop_reason or ""],
                    "gen_ai.usage.input_tokens": response.usage.input_tokens,
                    "gen_ai.usage.output_tokens": response.usage.output_tokens,
                    "orga.stop_reason": response.stop_reason,
                    **_cache_attributes(response.usage),
                    **({"orga.cost_usd": usage.cost_usd} if not usage.unpriced_calls else {}),
                }
            )
        observe(
            "orga_model_call_latency",
            (time.monotonic() - started) * 1000,
            provider=provider.name,
            model=model,
        )
        if not response.usage.unpriced_calls:
            observe(
                "orga_model_call_cost", response.usage.cost_usd, provider=provider.name, model=model
            )
        return response

    async def _answer(
        self, request: InferenceRequest, prompt: _Prompt, response: InferenceResponse
    ) -> InferenceResponse:
        """The response as the loop takes it: gated here under the ``default`` gate, a long
        answer in the blob store, and what the prompt cost and dropped."""
        gate = await self._gate(request, response) if request.gate else None
        text, reference = self._blobs.guard(response.text, request.max_response_bytes, "answer")
        return response.model_copy(
            update={
                "text": text,
                "blob_ref": reference,
                "estimated_input_tokens": prompt.estimated,
                "context_dropped": prompt.fitted.dropped,
                "context_masked": prompt.fitted.masked,
                "gate": gate,
                "budget_capped": prompt.capped,
            }
        )

    async def _gate(
        self, request: InferenceRequest, response: InferenceResponse
    ) -> PolicyResult | None:
        """The ``default`` gate's decisions for the answer's actions, by the policy activity's
        own rules (``None`` when this worker cannot decide here: the loop asks the gate)."""
        if self._decide is None:
            return None
        actions = PolicyAction.of_turn(response.tool_calls)
        info = activity.info()
        return await self._decide(
            PolicyRequest(
                mode="default",
                agent_id=request.agent_id,
                workflow_id=info.workflow_id or "",
                iteration=request.iteration,
                usage=response.usage,
                advertised=list(request.tools),
                actions=actions,
            )
        )

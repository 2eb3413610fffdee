"""The ``critique`` activity: a critic model reviews a loop's final answer.

One model call of the critic agent's provider and model, offered exactly one tool,
``submit_review {verdict, feedback}``. The verdict is taken only from that structured call
(``stop_reason`` ``tool_use`` with valid arguments); an answer in prose, or arguments that do
not fit, fail the attempt with ``CriticFailed`` (retried by Temporal, then the loop fails
typed) — a verdict is never guessed from text.
"""

from __future__ import annotations

from typing import Literal

import httpx
from pydantic import BaseModel, ValidationError
from temporalio import activity

from orga.activities.principals import SpendGuard
from orga.contracts.conversation import Message
from orga.contracts.critic import CRITIQUE, REVIEW_TOOL, CritiqueRequest, CritiqueVerdict
from orga.contracts.errors import BudgetExceeded, CriticFailed, ToolInputError
from orga.contracts.tools import ToolDefinition
from orga.core.arguments import parse_arguments
from orga.core.budget import OutOfBudget, output_cap
from orga.core.context import estimate_message_tokens
from orga.core.text import estimate_tokens
from orga.providers.client import complete
from orga.runtime.settings import Settings

__all__ = ["REVIEW_DEFINITION", "CriticActivities"]


class _Submitted(BaseModel):
    verdict: Literal["approve", "revise"]
    feedback: str = ""


REVIEW_DEFINITION = ToolDefinition(
    name=REVIEW_TOOL,
    description=(
        "Submit your review of the answer: approve it as it is, or ask for a revision and "
        "say exactly what must change."
    ),
    parameters={
        "type": "object",
        "properties": {
            "verdict": {"type": "string", "enum": ["approve", "revise"]},
            "feedback": {"type": "string", "description": "What must change (for revise)."},
        },
        "required": ["verdict"],
        "additionalProperties": False,
    },
)

_INSTRUCTIONS = (
    "You review another agent's final answer to a task before it is accepted. Check that it "
    "answers the task, is correct as far as you can tell, and says what it does not know. "
    f"Reply only by calling {REVIEW_TOOL} once: verdict approve, or revise with feedback."
)


class CriticActivities:
    """Critic calls over the worker's providers and HTTP client."""

    def __init__(self, *, settings: Settings, http: httpx.AsyncClient, spend: SpendGuard) -> None:
        self._spend = spend
        self._settings = settings
        self._http = http

    @activity.defn(name=CRITIQUE)
    async def critique(self, request: CritiqueRequest) -> CritiqueVerdict:
        """The critic's verdict on the answer.

        Raises:
            CriticFailed: the critic did not answer with a valid ``submit_review`` call.
        """
        messages = [
            Message(role="system", content=_INSTRUCTIONS),
            Message(
                role="user",
                content=f"Task:\n{request.task}\n\nAnswer (review {request.round}):\n"
                f"{request.answer}",
            ),
        ]
        info = activity.info()
        timeout = info.start_to_close_timeout.total_seconds() if info.start_to_close_timeout else 60
        estimated = sum(estimate_message_tokens(m) for m in messages) + estimate_tokens(
            REVIEW_DEFINITION.model_dump_json()
        )
        try:
            max_output, capped = output_cap(None, request.token_budget, estimated)
        except OutOfBudget as error:  # the critic is not asked: the loop ends BudgetExceeded
            raise BudgetExceeded(str(error), {"estimated_input_tokens": estimated}) from error
        provider = self._settings.provider(request.provider)
        model = request.model or provider.default_model

        response, usage = await self._spend.charged(
            request.principal,
            provider=provider.name,
            model=model,
            estimated=estimated,
            max_output=max_output,
            call=lambda: complete(
                self._http,
                provider,
                messages,
                [REVIEW_DEFINITION],
                model=request.model,
                max_output_tokens=max_output,
                temperature=None,
                timeout=timeout,
            ),
        )
        if capped and response.stop_reason == "max_tokens":
            raise BudgetExceeded(
                f"the critic's review was cut at the {max_output} tokens the loop had left",
                {"usage": usage.model_dump()},
            )
        calls = [c for c in response.tool_calls if c.name == REVIEW_TOOL]
        if response.stop_reason != "tool_use" or len(calls) != 1:
            raise CriticFailed(
                f"the critic {request.critic!r} answered with stop_reason "
                f"{response.stop_reason!r} and {len(calls)} {REVIEW_TOOL} call(s), not one "
                f"{REVIEW_TOOL} call: its verdict is not taken from prose"
            )
        try:
            submitted = _Submitted.model_validate(parse_arguments(REVIEW_TOOL, calls[0].arguments))
        except (ToolInputError, ValidationError) as error:
            raise CriticFailed(
                f"the critic {request.critic!r} called {REVIEW_TOOL} with arguments that do not "
                f"fit ({error.__class__.__name__}): {calls[0].arguments[:300]}"
            ) from error
        return CritiqueVerdict(verdict=submitted.verdict, feedback=submitted.feedback, usage=usage)

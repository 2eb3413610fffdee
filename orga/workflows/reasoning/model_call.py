"""The Reason step's activity call: one model call, retried by Temporal, failing typed.

Workflow code. The request carries only the messages the model has not seen (the worker keeps
the rest, checked by the digest); the call heartbeats while the provider thinks; after
Temporal's retries a failure ends the loop with ``ModelCallFailed`` naming the cause.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError

from orga.contracts.errors import BudgetExceeded, ModelCallFailed
from orga.contracts.inference import CALL_MODEL, InferenceRequest, InferenceResponse
from orga.workflows.shared.failures import failure_of
from orga.workflows.shared.options import MODEL_HEARTBEAT_TIMEOUT, MODEL_RETRY

__all__ = ["call_model"]


async def call_model(
    request: InferenceRequest, timeout: timedelta, task_queue: str | None = None
) -> InferenceResponse:
    """The model's response to ``request`` (asked on ``task_queue``: the loop's by default).

    Raises:
        BudgetExceeded: the call could not fit in ``request.token_budget`` and was not made.
        ModelCallFailed: the inference activity failed for good (the cause is chained).
    """
    model = request.model or f"{request.provider or 'default provider'}'s default model"
    try:
        return await workflow.execute_activity(
            CALL_MODEL,
            request,
            result_type=InferenceResponse,
            start_to_close_timeout=timeout,
            heartbeat_timeout=MODEL_HEARTBEAT_TIMEOUT,
            retry_policy=MODEL_RETRY,
            task_queue=task_queue,
            summary=f"model {model} · iteration {request.iteration}",
        )
    except ActivityError as error:
        failure = failure_of(error)
        kind, message = failure.kind, failure.message
        if kind == BudgetExceeded.__name__:  # refused before the provider was asked
            raise BudgetExceeded(message, {"iteration": request.iteration}) from error
        raise ModelCallFailed(
            f"the model call at iteration {request.iteration} failed for good ({kind}): {message}",
            {"iteration": request.iteration, "error_type": kind, "error": message},
        ) from error

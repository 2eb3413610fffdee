"""The Reason step's activity call: one model call, retried by Temporal, failing typed.

Workflow code. The request carries only the messages the model has not seen (the worker keeps
the rest, checked by the digest); the call heartbeats while the provider thinks; after
Temporal's retries a failure ends the loop with ``ModelCallFailed`` naming the cause — except
a call the workers that took it could not make because they lack a tool the loop names, which
waits for a worker that has it and is made again (patch ``model-waits-for-worker``). A loop
whose model is unavailable after its retries asks its next fallback model
(``call_with_fallbacks``), and keeps it from then on. A model that is down on the worker
(``orga.worker.provider_health``: it failed unavailable for other calls too) fails the call
``ProviderDown`` at once; a loop with a fallback left takes that as final and switches without
retrying (patch ``provider-down-switches``), one without retries as it would any outage.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any, Final, cast

from temporalio import workflow
from temporalio.common import Priority, RetryPolicy
from temporalio.exceptions import ActivityError

from orga.contracts.errors import BudgetExceeded, ModelCallFailed, ProviderDown, ToolNotOnThisWorker
from orga.contracts.inference import CALL_MODEL, InferenceRequest, InferenceResponse
from orga.contracts.journal import ModelSwitched
from orga.core.eager import not_eager
from orga.workflows.reasoning.loop_books import LoopBooks
from orga.workflows.reasoning.loop_parts import LoopParts
from orga.workflows.shared.failures import failure_of
from orga.workflows.shared.options import MODEL_HEARTBEAT_TIMEOUT, MODEL_RETRY
from orga.workflows.shared.patches import MODEL_WAITS_FOR_WORKER, PROVIDER_DOWN_SWITCHES
from orga.workflows.shared.pause_wait import wait_out_pause
from orga.workflows.shared.stopping import Stopping
from orga.workflows.shared.tool_calls import WorkerWait

__all__ = ["call_model", "call_with_fallbacks"]

_PROVIDER_DOWN: Final = ProviderDown.__name__
"""The type of a call the worker refused because its model is down there (the worker's
``orga.worker.provider_health.PROVIDER_DOWN``)."""

_UNAVAILABLE: Final = frozenset({"ProviderUnavailable", _PROVIDER_DOWN, "TimeoutError"})
"""Failures of a model call after its retries that a fallback model may not share (5xx, 429,
network errors, timeouts, a model down on the worker); never a refusal of the request itself
(4xx, bad credentials)."""

_SWITCHING_RETRY: Final = dataclasses.replace(
    MODEL_RETRY,
    non_retryable_error_types=[*(MODEL_RETRY.non_retryable_error_types or ()), _PROVIDER_DOWN],
)
"""A loop with a fallback left: a model down on the worker is final, the fallback is next."""


async def call_model(
    request: InferenceRequest,
    timeout: timedelta,
    task_queue: str | None = None,
    *,
    waiting: dict[str, int] | None = None,
    waiting_changed: Callable[[], None] | None = None,
    priority: Priority = Priority.default,
    retry_policy: RetryPolicy = MODEL_RETRY,
    paused: Callable[[str | None], None] | None = None,
    recheck: timedelta = timedelta(seconds=10),
    stopping: Stopping | None = None,
    lifted: Callable[[], int] | None = None,
) -> InferenceResponse:
    """The model's response to ``request`` (asked on ``task_queue``: the loop's by default).

    ``waiting`` / ``waiting_changed``: the loop's count of calls waiting for a worker with a
    tool (``waiting_for_workers``) and what to tell when it changes. ``priority``: the
    call's fairness key and weight (the principal's tenant). ``retry_policy``: the
    activity's (``MODEL_RETRY``, or ``_SWITCHING_RETRY`` when a fallback is left).
    ``paused``: told why (or ``None`` once it goes on) while the loop or its agent is paused
    (``orga pause``): the call did not run, and is asked again after ``recheck`` plus a random
    share of it, then for ``pause_lifted`` (``lifted``: how many the loop has had;
    ``wait_out_pause``). ``stopping``: the loop's stop — a call its cancellation cut short ends the
    loop there (no failure of the model, no fallback).

    Raises:
        BudgetExceeded: the call could not fit in ``request.token_budget`` and was not made.
        ModelCallFailed: the inference activity failed for good (the cause is chained).
    """
    model = request.model or f"{request.provider or 'default provider'}'s default model"
    wait: WorkerWait | None = None
    was_paused = False
    while True:
        asked = lifted() if lifted is not None else 0
        try:
            not_eager(wait is not None)  # not back to a worker that lacked a tool
            response = await workflow.execute_activity(
                CALL_MODEL,
                request,
                result_type=InferenceResponse,
                start_to_close_timeout=timeout,
                heartbeat_timeout=MODEL_HEARTBEAT_TIMEOUT,
                retry_policy=retry_policy,
                task_queue=task_queue,
                summary=f"model {model} · iteration {request.iteration}",
                priority=priority,
            )
            break
        except ActivityError as error:
            if stopping is not None:
                stopping.check()
            failure = failure_of(error)
            if failure.kind == "LoopPaused" and paused is not None:  # not run: wait, ask again
                first, was_paused = not was_paused, True
                paused(failure.message)
                await wait_out_pause(
                    lifted,
                    recheck,
                    first=first,
                    summary=f"paused · model {model} · iteration {request.iteration}",
                    asked=asked,
                )
                continue
            tool = _missing_tool(failure.kind, failure.details)
            if tool is not None and workflow.patched(MODEL_WAITS_FOR_WORKER):
                if wait is None or wait.tool != tool:
                    if wait is not None:
                        wait.end()
                    wait = WorkerWait(tool, waiting, waiting_changed)
                await wait.pause()
                continue
            if wait is not None:
                wait.end()
            kind, message = failure.kind, failure.message
            if kind == BudgetExceeded.__name__:  # refused before the provider was asked
                # A principal's spend limit names itself (the thread then ends the turn only).
                named = _named_budget(failure.details)
                raise BudgetExceeded(message, {"iteration": request.iteration, **named}) from error
            raise ModelCallFailed(
                f"the model call at iteration {request.iteration} failed for good ({kind}): "
                f"{message}",
                {"iteration": request.iteration, "error_type": kind, "error": message},
            ) from error
    if wait is not None:
        wait.end()
    if was_paused and paused is not None:
        paused(None)
    return response


def _named_budget(details: Sequence[Any]) -> dict[str, str]:
    """The budget and principal a refused call's failure names (none for a loop's own)."""
    if not details or not isinstance(details[0], dict):
        return {}
    said = cast(dict[str, Any], details[0])
    return {k: str(said[k]) for k in ("budget", "principal") if k in said}


def _missing_tool(kind: str, details: Sequence[Any]) -> str | None:
    """The tool the workers that took the call lack, when that is why it failed."""
    if kind != ToolNotOnThisWorker.__name__ or not details or not isinstance(details[0], dict):
        return None
    tool = cast(dict[str, Any], details[0]).get("tool")
    return tool if isinstance(tool, str) else None


async def call_with_fallbacks(
    request: InferenceRequest, timeout: timedelta, parts: LoopParts, books: LoopBooks
) -> InferenceResponse:
    """The model's answer; when the loop's model is unavailable after its retries (not for a
    request it refused), the next fallback's (``parts.fallbacks``), which the loop keeps from
    then on (``parts.provider``/``model``, journaled ``ModelSwitched``). While a fallback is
    left, a model down on the worker (``ProviderDown``) is not retried: the fallback is asked
    at once.

    Raises:
        BudgetExceeded, ModelCallFailed: as ``call_model``, once no fallback is left.
    """
    while True:
        retry = MODEL_RETRY
        if parts.fallbacks and workflow.patched(PROVIDER_DOWN_SWITCHES):
            retry = _SWITCHING_RETRY
        try:
            return await call_model(
                request,
                timeout,
                parts.model_task_queue,
                waiting=books.waiting_for_workers,
                waiting_changed=books.worker_wait_changed,
                priority=parts.priority,
                retry_policy=retry,
                paused=lambda why: books.call_paused("(model call)", "(model call)", why),
                recheck=books.config.pause_recheck,
                stopping=books.stopping,
                lifted=lambda: books.pauses_lifted,
            )
        except ModelCallFailed as failed:
            details: object = failed.details[0] if failed.details else None
            kind = (
                cast(dict[str, object], details).get("error_type")
                if isinstance(details, dict)
                else None
            )
            if kind not in _UNAVAILABLE or not parts.fallbacks:
                raise
            provider, model = parts.fallbacks.pop(0)
            books.record(
                ModelSwitched(
                    **books.stamp(),
                    from_provider=parts.provider,
                    from_model=parts.model,
                    to_provider=provider,
                    to_model=model,
                    error=failed.message,
                )
            )
            parts.provider, parts.model = provider, model
            books.provider = provider
            request = request.model_copy(update={"provider": provider, "model": model})

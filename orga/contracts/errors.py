"""Every error orga raises, as one tree.

Each class is a Temporal ``ApplicationError`` whose ``type`` is the class name, so the same
error reads the same in Python (``except BudgetExceeded``), on the wire (``failure.type ==
"BudgetExceeded"``), in the Web UI and in ``temporal workflow show``. Whether Temporal retries
it is a property of the class (``retryable``), decided once here:

    OrgaError
    ├── InvalidConfig ............ a loop input, tool registration or worker setting is wrong
    ├── LoopFailure .............. ends a loop without an answer
    │   ├── UnhandledStopReason .. the model stopped for a reason the routing table does not run
    │   ├── BudgetExceeded ....... max_iterations, max_total_tokens or timeout was reached
    │   ├── ModelCallFailed ...... the inference activity failed for good (cause chained)
    │   ├── CriticFailed ......... the critic could not review the answer (retryable)
    │   ├── Aborted .............. an operator aborted the loop
    │   ├── OutputInvalid ........ the answer did not match ``output_schema`` after its retries
    │   ├── StateTooLarge ........ the loop's state no longer fits into its next run
    │   └── TaskAborted .......... a task stopped and compensated its completed steps
    ├── ProviderError ............ raised by the inference activity
    │   ├── ProviderAuthError .... 401/403: key refused (names its variable, never the key)
    │   ├── ProviderRejected ..... any other 4xx: the request itself is wrong
    │   ├── ProviderUnavailable .. 408/409/429/5xx, network errors, in-band errors (retryable)
    │   ├── ProviderDown ......... the model is down on this worker: not asked (retryable)
    │   ├── MalformedModelResponse  the body does not follow the provider's wire format (retryable)
    │   │   └── ImplausibleUsage .. token usage negative or beyond the request: never a credit
    │   └── ConversationUnavailable the worker could not rebuild the conversation (retryable)
    ├── PolicyUnavailable ........ an external policy engine (OPA) could not be asked (retryable)
    └── ToolError ................ raised by the tool activity; the model sees it as ``is_error``
        ├── ToolNotFound ......... no tool of that name is registered on this worker
        │   └── ToolNotOnThisWorker  another worker registers it, this one does not (retryable)
        ├── ToolInputError ....... arguments are not JSON, not an object or not valid for the schema
        ├── ToolPermissionError .. the tool may not do this (raised by tools; never retried)
        ├── ToolFailed ........... the tool function raised (retryable, if the tool asks so)
        ├── OutcomeUnknown ....... an attempt was lost mid-effect; a person settles it
        ├── RemoteAgentFailed .... a remote A2A agent delegated to did not answer
        ├── ToolPaused ........... the tool is paused (orga pause --tool); the loop waits
        └── ToolUnavailable ...... the tool's MCP server is not reachable right now (retryable)

A ``LoopFailure`` is raised by workflow code, which ends the loop at once, or by an activity
whose failure ends the loop as it stands: the model call and the critic's call raise
``BudgetExceeded`` before asking a model the budget cannot pay for (never retried), and the
critic's call raises ``CriticFailed`` for an answer with no structured verdict (retried: a model
may answer properly next time; the loop fails with it once the retries are spent). A class
marked "(retryable)" above is retried by Temporal; ``tests/test_errors.py`` checks the tree
against the classes.

Messages name the thing (``!r``), the rule it broke and the fix.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, ClassVar

from pydantic import ValidationError
from temporalio.exceptions import ApplicationError

__all__ = [
    "Aborted",
    "BudgetExceeded",
    "ConversationUnavailable",
    "CriticFailed",
    "ImplausibleUsage",
    "InvalidConfig",
    "LoopFailure",
    "MalformedModelResponse",
    "ModelCallFailed",
    "OrgaError",
    "OutcomeUnknown",
    "OutputInvalid",
    "PolicyUnavailable",
    "ProviderAuthError",
    "ProviderDown",
    "ProviderError",
    "ProviderRejected",
    "ProviderUnavailable",
    "RemoteAgentFailed",
    "StateTooLarge",
    "TaskAborted",
    "ToolError",
    "ToolFailed",
    "ToolInputError",
    "ToolNotFound",
    "ToolNotOnThisWorker",
    "ToolPaused",
    "ToolPermissionError",
    "ToolUnavailable",
    "UnhandledStopReason",
    "describe_validation_error",
]


class OrgaError(ApplicationError):
    """Base of every orga error: an ``ApplicationError`` typed by its class name."""

    retryable: ClassVar[bool] = False

    def __init__(
        self,
        message: str,
        *details: Any,
        next_retry_delay: timedelta | None = None,
        non_retryable: bool | None = None,
    ) -> None:
        super().__init__(
            message,
            *details,
            type=type(self).__name__,
            non_retryable=(not self.retryable) if non_retryable is None else non_retryable,
            next_retry_delay=next_retry_delay,
        )


class InvalidConfig(OrgaError):
    """A loop input, a tool registration or a worker setting is invalid."""


class LoopFailure(OrgaError):
    """A reason a loop ended without an answer: raised by workflow code, or by an activity
    whose failure ends the loop as it stands (see the module's docstring)."""


class UnhandledStopReason(LoopFailure):
    """The model stopped with a stop reason that the routing table does not continue on."""


class BudgetExceeded(LoopFailure):
    """A hard budget (``max_iterations``, ``max_total_tokens``, ``timeout``) was reached."""


class ModelCallFailed(LoopFailure):
    """The inference activity failed after Temporal's retries; the cause is chained."""


class CriticFailed(LoopFailure):
    """The critic could not review the answer: a critic model that did not answer with a
    structured verdict (after Temporal's retries), or a review the gate refused."""

    retryable: ClassVar[bool] = True  # a model may answer properly on the next attempt


class Aborted(LoopFailure):
    """An operator aborted the loop."""


class OutputInvalid(LoopFailure):
    """The final answer did not match the loop's ``output_schema``, after the model was shown
    the validation error ``output_retries`` times."""


class StateTooLarge(LoopFailure):
    """The input a loop would continue as new with is larger than a worker should hold."""


class TaskAborted(LoopFailure):
    """A task stopped (a step could not succeed, or an operator aborted) and compensated."""


class ProviderError(OrgaError):
    """The model provider could not produce a usable response."""


class ProviderAuthError(ProviderError):
    """The provider refused the API key (HTTP 401/403). Retrying cannot help."""


class ProviderRejected(ProviderError):
    """The provider rejected the request (a 4xx other than 401/403/408/409/429)."""


class ProviderUnavailable(ProviderError):
    """A transient provider failure: rate limit, overload, 5xx or network error."""

    retryable = True


class ProviderDown(ProviderError):
    """The model is down on this worker (its breaker, ``orga.worker.provider_health``): the call
    was not made. Retryable, when its trial is due; a loop with a fallback turns to it now."""

    retryable = True


class MalformedModelResponse(ProviderError):
    """The provider answered, but not in its documented wire format. Retried: models vary."""

    retryable = True


class ImplausibleUsage(MalformedModelResponse):
    """The provider reported token usage no answer can have: a count that is negative or not
    an integer, or more input than the request could hold. Budgets are kept in these counts,
    so it is a protocol error, never a credit; not retried (each attempt is served, and what it
    served could not be charged)."""

    retryable = False


class ConversationUnavailable(ProviderError):
    """The worker could not rebuild the conversation to send. Retried."""

    retryable = True


class PolicyUnavailable(OrgaError):
    """An external policy engine could not be asked. Retried; then the gate denies (fail closed)."""

    retryable = True


class ToolError(OrgaError):
    """A tool call did not produce a result. The model sees the message as an error result."""


class ToolNotFound(ToolError):
    """No tool of that name is registered on the worker that picked up the call."""


class ToolNotOnThisWorker(ToolNotFound):
    """The loop's setup found the tool, but the worker that picked up the call does not register
    it (workers of one task queue with different tool modules): the call waits for a worker
    that has it, and is never given to the model as an error."""

    retryable = True


class ToolInputError(ToolError):
    """The call's arguments are not valid for the tool."""


class ToolPermissionError(ToolError):
    """A tool refuses the call for lack of permission. Never retried; the model sees why."""


class ToolFailed(ToolError):
    """The tool function raised an exception.

    Retryable as a class; the tool activity marks an instance non-retryable unless the tool's
    recovery strategy asks for retries (by default the error goes straight back to the model).
    """

    retryable = True


class OutcomeUnknown(ToolError):
    """The attempt that ran a call was lost after its effect began (its worker died, or it
    timed out), and the tool is neither idempotent nor reconcilable: whether the effect
    happened, nobody can say. Never retried; a person settles it on the desk."""


class RemoteAgentFailed(ToolError):
    """A remote A2A agent a loop delegated to did not answer: its task failed, was rejected or
    cancelled there, ran past its time, or its endpoint refused the request. Never retried; the
    model sees why."""


class ToolPaused(ToolError):
    """The call's tool is paused (``orga pause --tool``): the call did not run, and its loop
    waits for the pause to end. Never retried by Temporal; the loop asks again."""


class ToolUnavailable(ToolError):
    """The server behind a tool (an MCP server) is down or lost its connection: retried while
    it is restarted or reconnected; after the last attempt, the model sees why."""

    retryable = True


def describe_validation_error(error: ValidationError, what: str = "input") -> str:
    """Each problem of a pydantic validation error as ``field.path: message``, on one line."""
    return "; ".join(
        f"{'.'.join(str(part) for part in e['loc']) or f'({what})'}: {e['msg']}"
        for e in error.errors(include_url=False)
    )

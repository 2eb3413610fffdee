"""What a failed activity, local activity or child workflow says, read one way everywhere.

Workflow code. Temporal hands an activity's failure to workflow code wrapped: an
``ActivityError`` whose cause is the ``ApplicationError`` the activity raised (or a timeout, or
a cancellation); a child workflow's as a ``ChildWorkflowError`` wrapping the child's own; a
local activity's may arrive as the error itself. ``failure_of`` walks to the root cause once,
so every caller reads the same type and message.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    CancelledError,
    ChildWorkflowError,
    FailureError,
    TimeoutError,
)

__all__ = ["Failure", "failure_message", "failure_of"]


@dataclass(frozen=True)
class Failure:
    """The root cause of a failure, as orga reads it."""

    kind: str
    """The ``ApplicationError``'s type (orga's error class names), else the exception's class
    (``TimeoutError``, ``CancelledError``, …)."""
    message: str
    details: Sequence[Any] = ()
    """The ``ApplicationError``'s details (a failed loop's carry its state)."""
    timed_out: bool = False
    cancelled: bool = False

    @property
    def described(self) -> str:
        """``kind: message``, as the journal and results say a failure."""
        return f"{self.kind}: {self.message}"


def failure_of(error: BaseException) -> Failure:
    """The root cause of ``error`` (an activity's, a local activity's or a child's failure)."""
    cause: BaseException = error
    while isinstance(cause, ActivityError | ChildWorkflowError) and cause.cause is not None:
        cause = cause.cause
    if isinstance(cause, ApplicationError):
        return Failure(cause.type or "ApplicationError", cause.message, tuple(cause.details))
    message = cause.message if isinstance(cause, FailureError) else str(cause)
    return Failure(
        type(cause).__name__,
        message or str(error),
        timed_out=isinstance(cause, TimeoutError),
        cancelled=isinstance(cause, CancelledError),
    )


def failure_message(error: BaseException) -> str:
    """The root cause's message (``failure_of(error).message``)."""
    return failure_of(error).message

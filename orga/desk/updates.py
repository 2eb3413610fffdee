"""The one way an update of orga's is sent: with one update id, and sent again with that id
while its answer is lost on the way (the server or the connection failed after the workflow may
have taken it). Temporal answers a resend with the first one's outcome instead of running it
twice; a loop remembers its newest messages' ids across continue-as-new as well
(``orga.workflows.reasoning.steering``)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any, Final, TypeAlias, TypeVar

from pydantic import BaseModel
from temporalio.client import WorkflowHandle, WorkflowUpdateRPCTimeoutOrCancelledError
from temporalio.service import RPCError, RPCStatusCode

__all__ = ["RESEND_PAUSES", "update"]

_M = TypeVar("_M", bound=BaseModel)
_Handle: TypeAlias = WorkflowHandle[Any, Any]

RESEND_PAUSES: Final = (0.2, 0.5, 1.0, 2.0, 4.0)
"""Seconds before each resend of an update whose answer was lost (five resends, ~8 s)."""

_LOST: Final = frozenset(
    {
        RPCStatusCode.UNAVAILABLE,
        RPCStatusCode.UNKNOWN,
        RPCStatusCode.INTERNAL,
        RPCStatusCode.ABORTED,
        RPCStatusCode.RESOURCE_EXHAUSTED,
        RPCStatusCode.DEADLINE_EXCEEDED,
        RPCStatusCode.CANCELLED,
    }
)
"""What Temporal's client raises (after its own retries) when the update's outcome is not
known: it may have run, or may not have been admitted (too many updates in flight)."""


async def update(
    handle: _Handle,
    name: str,
    payload: BaseModel,
    result_type: type[_M],
    update_id: str | None = None,
) -> _M:
    """The update ``name``'s answer, sent with ``update_id`` (default: a new one) and sent
    again with the same id, after ``RESEND_PAUSES``, while its answer is lost on the way.
    The last such error is raised as it came; a caller's cancel (``deliver``'s ``wait``) is
    never resent."""
    update_id = update_id or f"{name}-{uuid.uuid4()}"
    for pause in (*RESEND_PAUSES, None):
        try:
            # temporalio's overloads of execute_update mention a bare Callable: "partially
            # unknown" to pyright.
            found = await handle.execute_update(  # pyright: ignore[reportUnknownMemberType]
                name, payload, id=update_id, result_type=result_type
            )
            return result_type.model_validate(found)
        except (WorkflowUpdateRPCTimeoutOrCancelledError, RPCError) as error:
            if pause is None or not _lost(error):
                raise
        await asyncio.sleep(pause)
    raise AssertionError("unreachable: the last attempt returns or raises")


def _lost(error: WorkflowUpdateRPCTimeoutOrCancelledError | RPCError) -> bool:
    """Whether ``error`` leaves the update's outcome unknown — not this task's own cancel."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        return False
    return isinstance(error, WorkflowUpdateRPCTimeoutOrCancelledError) or error.status in _LOST

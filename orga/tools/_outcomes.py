"""A tool call whose attempt was lost after its effect began: what became of the effect.

Worker code. Before a tool with effects runs, the tool activity records that its effect
begins (``BEGAN``) in the attempt's heartbeat details — and waits until the server has it
(``mark_began``: one call to the server, answered once the details are stored), so that an
attempt lost at any instant after that, however soon, leaves the mark behind. Once the tool
returned or raised, the activity says it ended (``ENDED``, also carried by the attempt's
failure). The server hands the last details it kept to the next attempt. An attempt that
finds ``BEGAN`` follows one that was lost while the tool ran — its worker died, or the
attempt timed out — so the effect may or may not have happened. ``settle`` decides what to do
before anything runs again:

* a tool declared ``idempotent`` runs again (with the same ``ctx.idempotency_key``), and says
  so in its result;
* a tool with ``reconcile`` asks the outside world, by the key: what the call returned if the
  effect happened (the call is delivered, and not run again), ``None`` if it did not (it runs
  again, and says so). A reconcile that raises, runs past ``reconcile_timeout`` or answers
  something that is neither (``True``, an unreadable value) settles nothing: the outcome is
  unknown;
* any other tool with effects fails the call ``OutcomeUnknown``, never retried: a person
  settles it on the desk (confirm what happened, run it again, or skip it) and the loop's
  model sees what they decided, never a silent retry.

A tool with no effect of its own (neither ``serial`` nor ``requires_approval``, nor
``idempotent``, nor with a ``reconcile``) is not marked: it simply runs again.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from temporalio import activity
from temporalio.client import AsyncActivityCancelledError

from orga.contracts.errors import OutcomeUnknown, ToolUnavailable
from orga.tools._loading import render_value
from orga.tools.sdk import Tool, ToolContext

__all__ = [
    "BEGAN",
    "ENDED",
    "MAX_HUNG_RECONCILES",
    "Reconciled",
    "has_effects",
    "lost_before",
    "mark_began",
    "settle",
]

BEGAN: Final = "orga:effect-began"
ENDED: Final = "orga:effect-ended"

MAX_HUNG_RECONCILES: Final = 4
"""Threads a worker lets synchronous reconciles that ran past their timeout keep (a thread
cannot be stopped): past it, a reconcile is not started at all and the outcome is unknown."""

log = logging.getLogger("orga.tools")

_hung = 0
"""Synchronous reconciles still running past their timeout, in this process."""
_hung_lock = threading.Lock()


def has_effects(tool: Tool) -> bool:
    """Whether a lost attempt of ``tool`` needs settling: it declares effects (``serial``, or
    ``requires_approval``), says a rerun is harmless (``idempotent``: it has effects worth
    saying so) or says how to reconcile them. Others run again, as ever."""
    definition = tool.definition
    return (
        definition.serial
        or definition.requires_approval
        or tool.idempotent
        or tool.reconcile is not None
    )


def lost_before(attempt: int, details: Sequence[Any]) -> bool:
    """Whether the attempt before this one (``attempt`` > 1) was lost after its effect began:
    the last heartbeat details the server kept say so."""
    return attempt > 1 and bool(details) and details[-1] == BEGAN


async def mark_began() -> None:
    """Record, where the next attempt reads it, that this attempt's effect begins: the
    attempt's heartbeat details, sent to the server and answered once it stored them (the
    SDK's own heartbeat only queues them: a worker that died right after the effect left no
    mark, and the next attempt ran the tool again).

    Raises:
        asyncio.CancelledError: the call was cancelled before its effect began (nothing ran).
        ToolUnavailable: the server could not be told (retried: nothing ran).
    """
    info = activity.info()
    handle = activity.client().get_async_activity_handle(task_token=info.task_token)
    try:
        await handle.heartbeat(BEGAN)
    except AsyncActivityCancelledError as stopped:
        raise asyncio.CancelledError("cancelled before its effect began") from stopped
    except Exception as error:  # the server out of reach: the effect must not begin unmarked
        raise ToolUnavailable(
            f"could not record that the effect of call {info.activity_id!r} begins "
            f"({type(error).__name__}: {error}); it did not run, and is tried again"
        ) from error


@dataclass(frozen=True)
class Reconciled:
    """The outside world says the effect happened: what the call returned."""

    value: Any


async def settle(tool: Tool, context: ToolContext) -> Reconciled | None:
    """What to do with a call whose last attempt was lost after its effect began: ``None`` to
    run it again, ``Reconciled`` when its effect happened.

    Raises:
        OutcomeUnknown: the tool can neither run again safely nor tell (a person settles it).
    """
    call = f"call {context.call_id!r} of tool {tool.name!r}"
    lost = (
        f"the attempt that ran it (attempt {context.attempt - 1}) was lost after it began — "
        "its worker stopped answering, or it timed out — so the effect may or may not have "
        "happened"
    )
    if tool.idempotent:
        log.warning(
            "%s: its last attempt was lost mid-call; it is idempotent: running it again", call
        )
        return None
    if tool.reconcile is not None:
        found = await _reconcile(tool, context, f"the outcome of {call} is unknown: {lost}")
        log.warning(
            "%s: its last attempt was lost mid-call; reconcile says the effect %s",
            call,
            "did not happen: running it again" if found is None else "happened",
        )
        return found
    raise OutcomeUnknown(
        f"the outcome of {call} is unknown: {lost}, and {tool.name!r} is neither idempotent "
        "nor able to reconcile (@tool(idempotent=True) or @tool(reconcile=...)): a person "
        "decides on the desk whether it happened, runs it again, or skips it",
        non_retryable=True,
    )


async def _reconcile(tool: Tool, context: ToolContext, unknown: str) -> Reconciled | None:
    """Ask the tool's ``reconcile``, within its time, and read its answer strictly.

    Raises:
        OutcomeUnknown: it raised, ran past its time or answered nonsense.
    """
    reconcile = tool.reconcile
    assert reconcile is not None
    seconds = tool.reconcile_timeout.total_seconds()
    try:
        if inspect.iscoroutinefunction(reconcile):
            found = await asyncio.wait_for(reconcile(context), seconds)
        else:
            found = await _in_a_thread(reconcile, context, seconds)
        if found is not None:
            if isinstance(found, bool):  # "it happened" says nothing of what it returned
                raise TypeError(f"it answered {found!r}, not what the call returned or None")
            render_value(found)  # what the model would read: it must be readable
    except TimeoutError:
        why = f"reconcile did not answer within {seconds:g} s"
    except Exception as error:
        why = f"reconcile raised {type(error).__name__}: {error}"
    else:
        return None if found is None else Reconciled(found)
    raise OutcomeUnknown(
        f"{unknown}, and its {why}: a person decides on the desk whether it happened, runs it "
        "again, or skips it",
        non_retryable=True,
    )


async def _in_a_thread(reconcile: Any, context: ToolContext, seconds: float) -> Any:
    """A synchronous reconcile, in a daemon thread of its own: one that hangs keeps its
    thread (nothing can stop it), never the activity's or the process's exit; at most
    ``MAX_HUNG_RECONCILES`` do at once, past which none is started."""
    global _hung
    with _hung_lock:
        if _hung >= MAX_HUNG_RECONCILES:
            raise RuntimeError(
                f"{_hung} reconciles of this worker still hang past their timeout; no other "
                "is started"
            )
    loop = asyncio.get_running_loop()
    answer: asyncio.Future[Any] = loop.create_future()
    state = {"finished": False, "late": False}
    """Whether the thread ended, and whether the activity gave up on it first (under the lock)."""

    def deliver(value: Any, error: BaseException | None) -> None:
        if answer.done():
            return
        if error is not None:
            answer.set_exception(error)
        else:
            answer.set_result(value)

    def run() -> None:
        global _hung
        value, error = None, None
        try:
            value = reconcile(context)
        except BaseException as raised:  # handed to the activity, which reads it
            error = raised
        with _hung_lock:
            state["finished"] = True
            if state["late"]:
                _hung -= 1
        if not loop.is_closed():
            loop.call_soon_threadsafe(deliver, value, error)

    threading.Thread(target=run, name=f"reconcile {context.call_id}", daemon=True).start()
    try:
        return await asyncio.wait_for(asyncio.shield(answer), seconds)
    except TimeoutError:
        with _hung_lock:
            if not state["finished"]:
                state["late"] = True
                _hung += 1
        raise

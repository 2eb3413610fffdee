"""A tool call whose attempt was lost after its effect began: what became of the effect.

Worker code. The tool activity says in its heartbeat details that a call's effect has begun
(``BEGAN``) and, once the tool returned or raised, that it ended (``ENDED``, also carried by
the attempt's failure): the server keeps the last details it received and hands them to the
next attempt. An attempt that finds ``BEGAN`` follows one that was lost while the tool ran —
its worker died, or the attempt timed out — so the effect may or may not have happened.
``settle`` decides what to do before anything runs again:

* a tool with no effect of its own — neither ``serial`` nor ``requires_approval`` — or one
  declared ``idempotent`` runs again (with the same ``ctx.idempotency_key``);
* a tool with ``reconcile`` asks the outside world, by the key: what the call returned if the
  effect happened (the call is delivered, and not run again), ``None`` if it did not (it runs);
* any other tool with effects fails the call ``OutcomeUnknown``, never retried: a person
  settles it on the desk (confirm what happened, run it again, or skip it) and the loop's
  model sees what they decided, never a silent retry.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from orga.contracts.errors import OutcomeUnknown
from orga.tools.sdk import Tool, ToolContext

__all__ = ["BEGAN", "ENDED", "Reconciled", "has_effects", "lost_before", "settle"]

BEGAN: Final = "orga:effect-began"
ENDED: Final = "orga:effect-ended"

log = logging.getLogger("orga.tools")


def has_effects(tool: Tool) -> bool:
    """Whether a lost attempt of ``tool`` needs settling: it declares effects (``serial``, or
    ``requires_approval``) or says how to reconcile them. Others run again, as ever."""
    definition = tool.definition
    return definition.serial or definition.requires_approval or tool.reconcile is not None


def lost_before(attempt: int, details: Sequence[Any]) -> bool:
    """Whether the attempt before this one (``attempt`` > 1) was lost after its effect began:
    the last heartbeat details the server kept say so."""
    return attempt > 1 and bool(details) and details[-1] == BEGAN


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
    if tool.idempotent:
        log.warning(
            "%s: its last attempt was lost mid-call; it is idempotent: running it again", call
        )
        return None
    if tool.reconcile is not None:
        if inspect.iscoroutinefunction(tool.reconcile):
            found = await tool.reconcile(context)
        else:
            found = await asyncio.to_thread(tool.reconcile, context)
        log.warning(
            "%s: its last attempt was lost mid-call; reconcile says the effect %s",
            call,
            "did not happen: running it again" if found is None else "happened",
        )
        return None if found is None else Reconciled(found)
    raise OutcomeUnknown(
        f"the outcome of {call} is unknown: the attempt that ran it (attempt "
        f"{context.attempt - 1}) was lost after it began — its worker stopped answering, or it "
        f"timed out — so the effect may or may not have happened, and {tool.name!r} is neither "
        "idempotent nor able to reconcile (@tool(idempotent=True) or @tool(reconcile=...)): a "
        "person decides on the desk whether it happened, runs it again, or skips it",
        non_retryable=True,
    )

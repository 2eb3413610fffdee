"""Whether the activity a workflow schedules next may run on its own worker at once.

Temporal hands an activity that a workflow schedules on its own task queue straight back to
the worker that completed the workflow task (eager dispatch: a round trip saved). A call that
failed because that worker lacks its tool (``ToolNotOnThisWorker``, ``SetupElsewhere``) would
land there again every time: a call asked again for that reason is scheduled after
``not_eager()``, so the server hands it to any worker of the queue. The flag is no part of
history: replay is the same either way (``orga.worker.eager`` applies it, and clears it).

A flag the next scheduled activity takes, not a block around an ``await``: a workflow's
coroutine may be closed while it waits (evicted from the worker's cache), in another context,
where a context variable cannot be reset.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Final

__all__ = ["NOT_EAGER", "not_eager"]

NOT_EAGER: Final[ContextVar[bool]] = ContextVar("orga_not_eager", default=False)
"""True until the workflow code's task schedules its next activity, which must not run
eagerly (``orga.worker.eager`` reads it and sets it back)."""


def not_eager(when: bool = True) -> None:
    """The next activity this task of the workflow schedules is handed to any worker of the
    queue, never eagerly to this one (``when``: else nothing changes)."""
    if when:
        NOT_EAGER.set(True)

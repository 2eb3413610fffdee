"""Where a local activity needs tools its worker lacks, but another live worker of the queue
registers them: it says so (``SETUP_ELSEWHERE``), and the workflow asks again as a plain
activity that a worker with the tools runs (``orga.workflows.shared.elsewhere``). A model or
tool call taken by a worker without its tool is handed on the same way: retried by the server
within a tenth of a second, on any worker of the queue (``hand_on``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from datetime import timedelta
from typing import Final, NoReturn, cast

from temporalio import activity
from temporalio.exceptions import ApplicationError

from orga.contracts.errors import ToolNotOnThisWorker
from orga.contracts.setup import SETUP_ELSEWHERE
from orga.tools.sdk import ToolRegistry

__all__ = ["HAND_ON_DELAY", "Elsewhere", "elsewhere_if_missing", "hand_on"]

Elsewhere = Callable[[str, list[str]], Awaitable[bool]]
"""Whether a live worker of a task queue registers all of some tools (the store's lists:
``orga.plugin``)."""


async def elsewhere_if_missing(
    registry: ToolRegistry, elsewhere: Elsewhere | None, names: Iterable[str]
) -> None:
    """Fail ``SetupElsewhere`` where tools of ``names`` are not registered here but a live
    worker of this activity's task queue registers them all.

    Raises:
        ApplicationError: ``SetupElsewhere``: non-retryable in a local activity (its retries
            stay on this worker; the workflow asks elsewhere), retryable in a plain one (the
            server hands the next try to any worker of the queue).
    """
    missing = sorted({name for name in names if name not in registry})
    if not missing or elsewhere is None:
        return
    info = activity.info()
    if await elsewhere(info.task_queue, missing):
        raise ApplicationError(
            f"tools {missing!r} are registered by another worker of this task queue, not this "
            "one: asked again on a worker that has them",
            type=SETUP_ELSEWHERE,
            non_retryable=info.is_local,
        )


HAND_ON_DELAY: Final = timedelta(milliseconds=100)
"""How soon the server hands a call this worker lacks the tool for to the next worker."""


async def hand_on(elsewhere: Elsewhere | None, missing: ToolNotOnThisWorker) -> NoReturn:
    """Raise ``missing`` — retryable within ``HAND_ON_DELAY`` where another live worker of
    this activity's task queue registers its tool (the server hands the next try to any
    worker of the queue), else as it is (the loop waits for a worker with the tool: its
    tries are spent at once). The tool is the error's first detail."""
    said = missing.details[0] if missing.details else None
    tool = cast(dict[str, object], said).get("tool") if isinstance(said, dict) else None
    queue = activity.info().task_queue
    if elsewhere is not None and isinstance(tool, str) and await elsewhere(queue, [tool]):
        raise ToolNotOnThisWorker(
            missing.message,
            *missing.details,
            next_retry_delay=HAND_ON_DELAY,
            non_retryable=False,
        ) from None
    raise missing

"""A person's answer sent by signal, given to the wait it names — also when the signal is
recorded in the workflow task that raises that wait.

Workflow code. A query is answered from a worker's memory, which can show a wait that a task
still running raised (the task's events are applied, then the query answered, before the task
is recorded as started). A person's signal sent then is recorded in that same task, and the
worker that listed the wait answers it. Replay hands the workflow both at once, the signal
first (Python's SDK runs signals before activity results), where it would find nothing listed.
``SignalAnswers`` keeps such a signal until its task ends and gives it to the wait if the same
task lists it — once the other reactions to the listing (the deadline's timer cancelled) are
done, as in the worker's next activation, so the commands come in the worker's order. A signal
that names no wait of its own task is ignored, as before, when the next task begins.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping

from temporalio import workflow

__all__ = ["SignalAnswers"]


class SignalAnswers:
    """The answers of one workflow's signals, each given to its wait (or logged as ignored).
    Kept answers wait in workflow-internal tasks, not in the signal handlers, so
    ``workflow.all_handlers_finished`` never waits on them."""

    def __init__(self) -> None:
        self._kept: set[asyncio.Task[None]] = set()

    def give(
        self, waits: Mapping[str, object], key: str, answer: Callable[[], object], name: str
    ) -> None:
        """Answer the wait ``key`` of ``waits`` (``answer`` raises ``ValueError`` to refuse) now
        if it is listed, else if the signal's own workflow task lists it (module docstring)."""
        if key in waits:
            _answered(answer, name)
            return
        asked_in = workflow.info().get_current_history_length()

        def task_ended() -> bool:
            return workflow.info().get_current_history_length() != asked_in

        async def when_listed() -> None:
            await workflow.wait_condition(lambda: key in waits or task_ended())
            if task_ended():
                _ignored(name, f"{key!r} was not waiting when the signal came")
            else:
                _answered(answer, name)

        kept = asyncio.get_running_loop().create_task(when_listed())
        self._kept.add(kept)
        kept.add_done_callback(self._kept.discard)


def _answered(answer: Callable[[], object], name: str) -> None:
    """Give a signal's answer, or log why it was ignored (a signal carries no error back)."""
    try:
        answer()
    except ValueError as error:
        _ignored(name, str(error))


def _ignored(name: str, why: str) -> None:
    workflow.logger.warning("%s signal ignored: %s", name, why)

"""A streamed loop's steps, published on its Workflow Stream (``orga.contracts.progress``).

Workflow code. A publish from the workflow only appends to the stream's log (no command, no
history event): replay appends the same items at the same offsets. The books and the thread
say what happened (``calls``, ``results``, ``turn``, ``answered``, ``ended``); the desk says
that its waits changed, and ``desk_changed`` publishes once all the calls of the step have
asked (a task that runs after the coroutines that are ready), so one ``waiting`` item lists
every call that waits. A thread keeps its current and previous turns' items
(``turn`` truncates the rest).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, Final, cast

from temporalio import workflow
from temporalio.contrib.workflow_streams import PublishInput, WorkflowStream, WorkflowTopicHandle

from orga.contracts.conversation import ToolCall, ToolResult
from orga.contracts.inference import STREAM_TOPIC
from orga.contracts.progress import (
    PROGRESS_TOPIC,
    RESULT_SHOWN,
    CallResult,
    ProgressItem,
    ProgressKind,
    ProgressView,
    ProposedCall,
    StreamCarry,
)
from orga.contracts.threads import TurnResult
from orga.core.text import cut

__all__ = ["ProgressStream"]


class ProgressStream:
    """Publishes a streamed loop's ``ProgressItem`` s and keeps its stream bounded."""

    def __init__(
        self,
        stream: WorkflowStream,
        view: Callable[[], ProgressView],
        carried: StreamCarry | None = None,
    ) -> None:
        self.stream = stream
        self._view = view
        self._topic: WorkflowTopicHandle[ProgressItem] = stream.topic(
            PROGRESS_TOPIC, type=ProgressItem
        )
        self._turn_began_at = carried.turn_began_at if carried is not None else None
        state = stream.get_state()
        self._run_began_at = state.base_offset + len(state.log)
        """Where this run's items begin: a loop that is not a thread hands on only these."""
        _only_text_from_outside()
        self._waiting: tuple[str, ...] = ()
        """The calls the last ``waiting`` item listed (empty: none waits)."""
        self._desk_task: asyncio.Task[None] | None = None
        """The publish ``desk_changed`` asked for, until it has run."""

    def turn(self, turn: int) -> None:
        """A thread's turn began: the items before the previous turn's go."""
        state = self.stream.get_state()
        now = state.base_offset + len(state.log)
        if self._turn_began_at is not None:
            self.stream.truncate(self._turn_began_at)
        self._turn_began_at = now
        self._publish("turn", turn=turn)

    def calls(self, calls: Sequence[ToolCall]) -> None:
        if calls:
            proposed = [
                ProposedCall(call_id=c.id, tool=c.name, arguments=c.arguments) for c in calls
            ]
            self._publish("calls", calls=proposed)

    def results(self, results: Sequence[ToolResult]) -> None:
        if results:
            ended = [
                CallResult(
                    call_id=r.call_id,
                    tool=r.name,
                    status=r.status,
                    is_error=r.is_error,
                    content=cut(r.content, RESULT_SHOWN),
                )
                for r in results
            ]
            self._publish("results", results=ended)

    def answered(self, answer: TurnResult) -> None:
        self._publish("answered", turn=answer.turn, answer=answer)

    def ended(self, message: str) -> None:
        self._publish("ended", message=message)

    def desk_changed(self) -> None:
        """The desk's waits changed: say so once every call of this step has asked."""
        if self._desk_task is None:
            self._desk_task = asyncio.get_running_loop().create_task(self._desk())

    async def _desk(self) -> None:
        self._desk_task = None
        waiting = tuple(p.call_id for p in self._view().pending_approvals)
        if waiting == self._waiting:
            return
        was, self._waiting = self._waiting, waiting
        if waiting:
            self._publish("waiting")
        elif was:
            self._publish("resumed")

    def carry(self) -> StreamCarry:
        """What the next run's stream starts from (continue-as-new): a thread's items since
        its turn began; a loop's, this run's (it has no turn to cut at, and carried every
        item through every run, each run's input larger than the last)."""
        if self._turn_began_at is None:
            self.stream.truncate(self._run_began_at)
        return StreamCarry(state=self.stream.get_state(), turn_began_at=self._turn_began_at)

    def _publish(self, kind: ProgressKind, **fields: object) -> None:
        self._topic.publish(
            ProgressItem.model_validate({"kind": kind, "view": self._view(), **fields})
        )


_PUBLISH_SIGNAL: Final = "__temporal_workflow_stream_publish"
"""The signal a Workflow Stream takes publishes from outside by (the model call's text)."""


def _only_text_from_outside() -> None:
    """The stream's publish signal takes the model's text (``text``) and nothing else: steps
    are the workflow's own, and a client that signals a ``progress`` item (a made-up answer
    or approval) has it dropped, so readers never show it."""
    handlers: Any = workflow  # its handler lookups take and give untyped callables
    found = cast(
        Callable[[PublishInput], None] | None, handlers.get_signal_handler(_PUBLISH_SIGNAL)
    )
    assert found is not None, "the stream registers its publish signal first"
    publish = found

    def text_only(given: PublishInput) -> None:
        kept = [entry for entry in given.items if entry.topic == STREAM_TOPIC]
        if len(kept) < len(given.items):
            workflow.logger.warning(
                "dropped %d stream item(s) published from outside on topics other than %r",
                len(given.items) - len(kept),
                STREAM_TOPIC,
            )
        publish(dataclasses.replace(given, items=kept))  # its order and dedup kept

    handlers.set_signal_handler(_PUBLISH_SIGNAL, text_only)

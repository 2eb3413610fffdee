"""Forks: where each turn of this loop ended (for ``orga fork``), and a fork's start.

Workflow code. ``ForkMarks`` notes, at every Observe and at the answer, how long the
conversation was and what the budgets had spent after that turn — a few numbers per turn, kept
in memory only (a replay rebuilds them, so a loop that has ended still answers the
``fork_point`` query). A fork's run starts with ``start_fork``: the worker reads the source's
state (``fetch_fork_point``, never the client's word for it: only from an orga loop that ran on
the fork's own task queue, for the run asked), the fork checks it is a state a loop records
(``orga.core.fork_points``), journals ``Forked`` (an audit record: source, run, turn, state
hash) before anything else, and goes on from there with budgets spent as the source had spent
them. The conversation's opening system messages are the fork's own — its config's prompt, and
its agent's, which its setup puts before them as any loop's does — never the source's copies
(which doubled the agent's prompt, and which a forged source could have written). Its tool
calls are new calls of a new workflow (new idempotency keys); nothing of the source runs again.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from temporalio import workflow
from temporalio.exceptions import ActivityError

from orga.contracts.carry import ToolStateSnapshot
from orga.contracts.config import LoopConfig
from orga.contracts.conversation import Message
from orga.contracts.errors import InvalidConfig
from orga.contracts.evidence import EvidenceCollection
from orga.contracts.forks import FETCH_FORK_POINT, ForkPoint, ForkPointAsk, ForkRequest
from orga.contracts.inference import Usage
from orga.contracts.journal import Forked
from orga.core.context import leading_system
from orga.core.fork_points import fork_point_problem
from orga.core.text import cut
from orga.workflows.reasoning.durable_conversation import Conversation
from orga.workflows.reasoning.loop_books import LoopBooks
from orga.workflows.reasoning.running_summary import RunningSummary
from orga.workflows.reasoning.steering import Steering
from orga.workflows.reasoning.tool_state import ToolState
from orga.workflows.shared.failures import failure_of
from orga.workflows.shared.options import SETUP_TIMEOUT, SHORT_RETRY
from orga.workflows.shared.patches import FORK_OWN_PROMPTS, THREAD_FORK_WAITS

__all__ = ["ForkMarks", "forked_summary", "start_fork", "state_hash"]


@dataclass(frozen=True)
class _Mark:
    length: int
    digest: str
    usage: Usage
    model_calls: int
    tool_call_count: int
    answered: bool
    tools: ToolStateSnapshot
    evidence: EvidenceCollection | None
    summary: tuple[str | None, int, int]
    calibration: float


_NO_TOOL_STATE = ToolStateSnapshot()


def _copied(tools: ToolState) -> ToolStateSnapshot:
    """The tool state as it is now, for a mark: each breaker copied (``orga.core.breaker``
    changes them in place); the cached results and dead letters are replaced or appended, never
    changed, so copies of their containers hold them."""
    return ToolStateSnapshot.model_construct(
        breakers={name: breaker.model_copy() for name, breaker in tools.breakers.items()},
        cache=dict(tools.cache),
        dead_letters=list(tools.dead_letters),
        decided_ids=[],
    )


def state_hash(at: int, digest: str, usage: Usage, model_calls: int, tool_calls: int) -> str:
    """SHA-256 of a fork point's state: the conversation's digest and the budgets spent."""
    text = f"{at}|{digest}|{usage.total_tokens}|{model_calls}|{tool_calls}"
    return hashlib.sha256(text.encode()).hexdigest()


class ForkMarks:
    """Where each turn of this run ended."""

    def __init__(self) -> None:
        self._marks: dict[int, _Mark] = {}

    def holds(self, at: int) -> bool:
        return at in self._marks

    def note(
        self,
        books: LoopBooks,
        conversation: Conversation,
        *,
        answered: bool,
        tools: ToolState,
        evidence: EvidenceCollection | None,
        summary: tuple[str | None, int, int],
        calibration: float,
    ) -> None:
        """Turn ``books.iteration`` has ended here (a later note of the same turn wins): its
        conversation's length, budgets spent, trackers (tool state, evidence) and summary."""
        held = tools.breakers or tools.cache or tools.dead_letters
        self._marks[books.iteration] = _Mark(
            length=len(conversation.messages),
            digest=conversation.digest,
            usage=books.usage,
            model_calls=books.model_calls,
            tool_call_count=books.tool_call_count,
            answered=answered,
            tools=_copied(tools) if held else _NO_TOOL_STATE,
            evidence=evidence.model_copy(deep=True) if evidence is not None else None,
            summary=summary,
            calibration=calibration,
        )

    def point(self, ask: ForkPointAsk, conversation: Conversation, config: LoopConfig) -> ForkPoint:
        """The state after turn ``ask.at`` (the ``fork_point`` query's answer)."""
        info = workflow.info()
        first, last = (min(self._marks), max(self._marks)) if self._marks else (0, 0)
        where = ForkPoint(
            workflow_id=info.workflow_id,
            run_id=info.run_id,
            at=ask.at,
            task_queue=info.task_queue,
            first=first,
            last=last,
            found=False,
        )
        mark = self._marks.get(ask.at)
        if mark is None:
            earlier = info.continued_run_id if ask.at < first else None
            return where.model_copy(update={"earlier_run_id": earlier})
        return where.model_copy(
            update={
                "found": True,
                "messages": conversation.messages[: mark.length],
                "usage": mark.usage,
                "model_calls": mark.model_calls,
                "tool_call_count": mark.tool_call_count,
                "answered": mark.answered,
                "tools": mark.tools.model_copy(update={"decided_ids": []}),
                "evidence": mark.evidence,
                "context_summary": mark.summary[0],
                "summarised_through": mark.summary[1],
                "unsummarised_through": mark.summary[2],
                "calibration": mark.calibration,
                "config": config.model_dump(mode="json", exclude_defaults=True),
                "state_hash": state_hash(
                    ask.at, mark.digest, mark.usage, mark.model_calls, mark.tool_call_count
                ),
            }
        )


async def start_fork(
    request: ForkRequest,
    books: LoopBooks,
    conversation: Conversation,
    tools: ToolState,
    steering: Steering,
) -> ForkPoint:
    """Read the source's state after turn ``request.at`` (on the worker), journal ``Forked``,
    and take that state on: the conversation, with the fork's message, budgets spent and the
    tool state (breakers, cached results, dead letters). Returns the point, whose evidence,
    summary and calibration the loop takes on as it sets up.

    Raises:
        InvalidConfig: the source or its turn cannot be read, or the turn is an answer and the
            fork says nothing after it.
    """
    if request.say is not None and (refused := steering.refused([request.say])):
        raise InvalidConfig(f"cannot fork: {refused}")
    try:
        point = await workflow.execute_activity(
            FETCH_FORK_POINT,
            request,
            result_type=ForkPoint,
            start_to_close_timeout=SETUP_TIMEOUT,
            retry_policy=SHORT_RETRY,
            summary=f"fork {request.workflow_id} after turn {request.at}",
        )
    except ActivityError as error:
        raise InvalidConfig(f"cannot fork: {failure_of(error).message}") from None
    messages = list(point.messages)
    if workflow.patched(FORK_OWN_PROMPTS):
        _check_point(point, request, books)
        own = conversation.messages[: leading_system(conversation.messages)]
        messages = [*own, *messages[leading_system(messages) :]]
    if request.say is not None:
        said = Message(role="user", content=request.say)
        if request.replace:
            last_user = max((i for i, m in enumerate(messages) if m.role == "user"), default=None)
            if last_user is None:
                raise InvalidConfig("cannot fork with replace: no user message before that turn")
            messages = messages[:last_user]
        messages.append(said)
    elif point.answered and (
        books.config.thread is None or not workflow.patched(THREAD_FORK_WAITS)
    ):  # a thread's fork after an answer waits for its next message
        raise InvalidConfig(
            f"turn {request.at} of {request.workflow_id} is its answer: a fork after it must say "
            "something (fork.say / orga fork --say)"
        )
    books.record(
        Forked(
            **books.stamp(),
            source_workflow_id=request.workflow_id,
            source_run_id=point.run_id,
            turn=point.at,
            state_hash=point.state_hash,
            said=cut(request.say, 2_000) if request.say is not None else None,
            replaced=request.replace,
        )
    )
    books.usage = point.usage
    books.iteration = point.at
    books.other_calls = max(0, point.model_calls - point.at)
    books.tool_call_count = point.tool_call_count
    conversation.reset(messages)
    tools.restore(point.tools)
    return point


def _check_point(point: ForkPoint, request: ForkRequest, books: LoopBooks) -> None:
    """Refuse a point that names another loop, is a state no loop records, or whose source ran
    as another agent than the fork's.

    Raises:
        InvalidConfig: saying which.
    """
    problem = fork_point_problem(point)
    if point.workflow_id != request.workflow_id:
        problem = f"it names another loop, {point.workflow_id!r}"
    if problem is not None:
        raise InvalidConfig(
            f"cannot fork: the state read for {request.workflow_id!r} is not one a loop "
            f"records ({problem})"
        )
    source_agent = point.config.get("agent_id", LoopConfig.model_fields["agent_id"].default)
    if source_agent != books.config.agent_id:
        raise InvalidConfig(
            f"cannot fork {request.workflow_id!r} as agent {books.config.agent_id!r}: a "
            f"fork runs as its source's agent ({source_agent!r}), within that agent's "
            "tools, models, gate and ceilings; start a new loop to ask another agent"
        )


def forked_summary(
    books: LoopBooks, point: ForkPoint, conversation: Conversation
) -> RunningSummary:
    """The fork's running summary (``anchored_summary``), once its setup has put its own
    opening system messages in place: the source's marks, moved by how many more (or fewer)
    opening messages the fork has than its source had."""
    shift = 0
    if workflow.patched(FORK_OWN_PROMPTS):
        shift = leading_system(conversation.messages) - leading_system(point.messages)

    def moved(index: int) -> int:
        return max(0, index + shift) if index else 0

    return RunningSummary(
        books,
        point.context_summary,
        moved(point.summarised_through),
        moved(point.unsummarised_through),
    )

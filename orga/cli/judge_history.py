"""The calls people decided, read back from histories for ``orga judge``: each as the case a
judge would have been shown, with the person's decision.

Each loop and task of the period (found through Temporal's visibility, as ``orga policy
what-if`` finds them) is replayed with the worker's workflow code — as ``orga audit --verify``
does; no worker is needed. The replay hands out every call that waited for approval, exactly
as a judge is shown it (``HumanDesk.on_wait``: the tool, the arguments, the gate's reason; the
workflow's ``judged_as``: its agent and task), and its journal says who decided each: a call
a person decided (the ``approve`` update, the ``approval`` signal, ``orga mcp``'s elicitation
— not a judge, not a timeout) becomes a ``DecidedCall``.

A history is data to check, never state to adopt: one that does not replay with this code, or
is not an orga loop, is set aside (``Unreadable``, in one bounded line) without stopping the
reading of the others, and the verbs say their answer is incomplete.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from orga.cli.common import client_for, settings
from orga.cli.policy_history import Unreadable, period_query, why
from orga.contracts.approvals import PendingApproval
from orga.contracts.journal import ApprovalDecided
from orga.contracts.judges import JudgeCase

__all__ = ["PEOPLE", "Decided", "DecidedCall", "read_decided"]

PEOPLE: Final = frozenset({"signal", "update", "mcp-elicitation"})
"""How a person's decision arrives (``DecisionSource``): a judge's and a timeout's are not."""


@dataclass(frozen=True)
class DecidedCall:
    """A call a person decided: what a judge would have been shown, and the decision."""

    workflow_id: str
    run_id: str
    case: JudgeCase
    approved: bool
    approver: str | None
    reason: str | None

    def as_json(self) -> dict[str, Any]:
        return {
            "workflow_id": self.workflow_id,
            "run_id": self.run_id,
            "agent": self.case.agent,
            "task": self.case.task,
            "call_id": self.case.call_id,
            "tool": self.case.tool,
            "arguments": self.case.arguments,
            "approved": self.approved,
            "approver": self.approver,
        }


@dataclass
class Decided:
    """What the period's histories hold: the calls people decided, what was set aside, and
    how many runs were read."""

    calls: list[DecidedCall] = field(default_factory=list[DecidedCall])
    unreadable: list[Unreadable] = field(default_factory=list[Unreadable])
    workflows: int = 0


async def read_decided(
    since: str, agent: str | None, workflow: str | None, task_queue: str | None
) -> Decided:
    """The calls people decided in the loops and tasks that started in the period."""
    # the workflow code and Temporal's worker, loaded only to replay
    from orga.cli.capture import Capture, replaying

    found = settings()
    client = await client_for(found)
    waited: list[PendingApproval] = []
    instances: list[Any] = []

    def started(instance: Any) -> None:
        desk: Any = getattr(instance, "desk", None)  # a loop's: DeskHandlers.desk
        if desk is not None:
            desk().on_wait = waited.append

    with replaying(found.store(), [Capture(instances, started)]) as replay:
        read = Decided()
        query = period_query(since, agent, workflow, task_queue, types=("ReasoningLoop", "Task"))
        async for execution in client.list_workflows(query):
            read.workflows += 1
            waited.clear()
            instances.clear()
            where = (execution.id, execution.run_id)
            try:
                history = await client.get_workflow_handle(
                    execution.id, run_id=execution.run_id
                ).fetch_history()
                await replay(history)
                if not instances or not hasattr(instances[-1], "judged_as"):
                    raise TypeError("it is not an orga loop or task")
                instance = instances[-1]
                journal = instance.journal()
                agent_id, task = instance.judged_as()
            except Exception as error:  # a history is data: anything replaying it raises
                read.unreadable.append(Unreadable(*where, 0, why(error)))
                continue
            asked = {p.call_id: p for p in waited}
            for entry in journal.entries:
                if not isinstance(entry, ApprovalDecided) or entry.source not in PEOPLE:
                    continue
                pending = asked.get(entry.call_id)
                if pending is None:
                    continue  # decided in an earlier run (its wait began there)
                case = JudgeCase.of(pending, workflow_id=execution.id, agent=agent_id, task=task)
                read.calls.append(
                    DecidedCall(*where, case, entry.approved, entry.approver, entry.reason)
                )
    return read

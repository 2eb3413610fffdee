"""A task's setup: its agent, the tools its steps name, and its gate, resolved on the worker.

Workflow code. ``set_up_task`` runs the ``resolve_task`` local activity and arms what the task
works with from its answer: the gate its steps pass, the tools it may call, the approvers its
desk enrols, and the judge it asks first (its agent's, if any: ``orga.workflows.shared.
judging``). A task naming an unknown agent or a tool the worker lacks fails before any step
runs.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from temporalio.exceptions import FailureError

from orga.contracts.inference import Usage
from orga.contracts.journal import JournalEntry, Stamp
from orga.contracts.setup import RESOLVE_TASK, TaskSetup, TaskSetupRequest
from orga.contracts.task import LoopStep, TaskInput
from orga.core.judging import task_of
from orga.core.principals import handed_on
from orga.workflows.saga.steps import TaskClearance
from orga.workflows.shared.elsewhere import where_the_tools_are
from orga.workflows.shared.failures import failure_message
from orga.workflows.shared.gate import Gate
from orga.workflows.shared.human_desk import HumanDesk
from orga.workflows.shared.judging import JudgeAsker
from orga.workflows.shared.metrics import know
from orga.workflows.shared.options import SETUP_TIMEOUT, SHORT_RETRY
from orga.workflows.shared.principals import fair_share, principal_setup

__all__ = ["set_up_task"]


async def set_up_task(
    task: TaskInput,
    clearance: TaskClearance,
    desk: HumanDesk,
    *,
    workflow_id: str,
    record: Callable[[JournalEntry], None],
    stamp: Callable[[], Stamp],
    done: Callable[[], int],
) -> str | None:
    """Resolve the task's agent, tools and gate; why it cannot run, or ``None``. ``done``:
    how many steps have completed (the gate's facts)."""
    names: list[str] = []
    loop_agents: list[str] = []
    for step in task.steps:
        action = step.action
        if isinstance(action, LoopStep):
            loop_agents.append(action.input.config.agent_id)
            wanted = list(action.input.config.tools)
        else:
            wanted = [action.tool]
        if step.compensation is not None:
            wanted.append(step.compensation.tool)
        names += [n for n in wanted if n not in names]
    request = TaskSetupRequest(
        agent_id=task.agent_id,
        tools=names,
        loop_agents=loop_agents,
        principal=principal_setup(task.principal),
    )
    try:
        setup = await where_the_tools_are(
            RESOLVE_TASK,
            request,
            TaskSetup,
            timeout=SETUP_TIMEOUT,
            retry_policy=SHORT_RETRY,
            summary=f"resolve the task's setup · {len(names)} tool(s)",
        )
    except FailureError as error:
        why = failure_message(error).rstrip(".")
        return f"the task cannot run on this worker: {why}. Nothing was run."
    clearance.gate = gate = Gate(
        policy=setup.policy,
        agent_id=task.agent_id,
        workflow_id=workflow_id,
        record=record,
        stamp=stamp,
        facts=lambda: (done(), Usage()),
        subject="task",
        stopping=clearance.stopping,
    )
    clearance.tools = [t.name for t in setup.tools]
    clearance.principal = setup.principal
    clearance.handed_on = handed_on(task.principal, setup.principal)
    clearance.priority = fair_share(setup.principal, setup.fairness_weight)
    desk.enroll(setup.approvers, setup.agent.approvals_needed if setup.agent else {})
    desk.check_edit = gate.decide_call
    if setup.approvals_by_policy:
        desk.authority = functools.partial(gate.decide_one, advertised=[])
    if setup.judge is not None:
        shown = task_of(task)
        desk.judge = JudgeAsker(
            setup.judge,
            workflow_id=workflow_id,
            agent=task.agent_id,
            task=lambda: shown,
            principal=lambda: clearance.principal,
            charge=lambda _usage, _calls: None,  # a task keeps no token books: the ledger does
        )
    know(tools=set(clearance.tools), agents={task.agent_id, *loop_agents}, runs_as=setup.agent)
    return None

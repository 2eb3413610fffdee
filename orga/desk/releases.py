"""After a pause ends: tell the loops and tasks it held, so that their calls go on now.

A call held by a pause (``orga pause``) waits for the ``pause_lifted`` signal, with an hour's
fallback (``orga.workflows.shared.pause_wait``). ``release_held`` sends it, once the pause is
gone from the store, to the workflows the pause may hold: the loop (or task) itself for a
pause of its id; for a tool's or an agent's, every running loop and task whose status says
``paused`` (an agent's: of that agent). A workflow told this that is not held by the ended
pause only asks again; one the search misses (its status not yet visible, or another wait
listed first) goes on at its fallback.
"""

from __future__ import annotations

from temporalio.client import Client
from temporalio.service import RPCError

from orga.contracts import search_attributes as sa
from orga.contracts.messages import LOOP_WORKFLOW, PAUSE_LIFTED_SIGNAL, TASK_WORKFLOW
from orga.runtime.pauses import PAUSE_NAME

__all__ = ["release_held"]


async def release_held(client: Client, target: str) -> int:
    """Signal ``pause_lifted`` to the running loops and tasks the ended pause of ``target``
    (``tool:NAME``, ``agent:NAME``, ``loop:ID``) may hold; how many were told."""
    kind, _, name = target.partition(":")
    if kind == "loop":
        held = [name]
    else:
        query = (
            f'WorkflowType IN ("{LOOP_WORKFLOW}", "{TASK_WORKFLOW}") '
            'AND ExecutionStatus = "Running" '
            f'AND {sa.STATUS.name} = "paused"'
        )
        if kind == "agent" and PAUSE_NAME.fullmatch(name):  # plain: no quote inside
            query += f' AND {sa.AGENT_ID.name} = "{name}"'
        held = [e.id async for e in client.list_workflows(query)]
    told = 0
    for workflow_id in held:
        try:
            await client.get_workflow_handle(workflow_id).signal(PAUSE_LIFTED_SIGNAL)
        except RPCError:  # it ended meanwhile (or never ran): nothing holds there
            continue
        told += 1
    return told

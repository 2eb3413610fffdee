"""Temporal activities: the worker's side of every call the workflows make.

Modules (each defines an activity class; what the activities use lives in ``orga.providers``,
``orga.gates``, ``orga.tools``, ``orga.knowledge`` and ``orga.runtime``):

* ``setup`` — ``resolve_loop``, ``resolve_task``: a loop's or task's setup, as the worker has it
* ``inference`` — ``call_model``: one model call
* ``policy`` — ``evaluate_policy``: the gate
* ``tools`` — ``run_tool``: one tool call
* ``knowledge`` — ``search_knowledge``, ``write_knowledge``
* ``critic`` — ``critique``: a critic model's review
* ``answers`` — ``check_answer``: a typed loop's answer against its ``output_schema``
* ``forks`` — ``fetch_fork_point``: a fork's starting state, read from its source
* ``deployments`` — ``current_build``: which build a worker deployment routes to now
* ``continued`` — ``continued_from``: what the run a loop continues was, as the server says
* ``summary`` — ``summarise_context``: a loop's running summary
* ``judges`` — ``consult_judge``: a judge's opinion on a held call, signed when it decides
* ``remote_agents`` — ``delegate_remote``: a task for an agent at an A2A endpoint
* ``remote_answers`` — what a remote agent's ended task answered, read as data
* ``elsewhere`` — a local activity that needs tools its worker lacks, which another live
  worker of the queue registers, says so (the workflow asks that one)
* ``principals`` — who a loop runs for (resolved at setup), and each model call's charge to
  that principal's spend ledger
"""

from orga.activities.inference import InferenceActivities
from orga.activities.policy import PolicyActivities
from orga.activities.tools import ToolActivities

__all__ = ["InferenceActivities", "PolicyActivities", "ToolActivities"]

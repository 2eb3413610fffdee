"""What a remote A2A agent's ended task answered, read as data (``orga.activities.
remote_agents``): its artifacts' text (cut to ``ANSWER_CHARS``), its data parts as the value,
and the cost it reports (``A2A_USAGE_KEY``), taken only where it is a plausible count; a task
that did not complete is ``RemoteAgentFailed`` with what it said.
"""

from __future__ import annotations

import math
from typing import Any, Final, cast

from a2a.helpers import get_artifact_text, get_data_parts, get_message_text
from a2a.types import Task, TaskState
from google.protobuf.json_format import MessageToDict
from pydantic import ValidationError

from orga.contracts.delegation import A2A_USAGE_KEY, RemoteAnswer, RemoteSettled
from orga.contracts.errors import RemoteAgentFailed
from orga.contracts.inference import Usage
from orga.core.text import cut

__all__ = ["ANSWER_CHARS", "ENDED", "answer_of", "said_by"]

ANSWER_CHARS: Final = 100_000
"""Characters of a remote answer the parent's model reads (the rest is cut, and it says so)."""
ENDED: Final = {
    TaskState.TASK_STATE_FAILED: "failed",
    TaskState.TASK_STATE_REJECTED: "rejected the task",
    TaskState.TASK_STATE_CANCELED: "cancelled the task",
    TaskState.TASK_STATE_AUTH_REQUIRED: "asks for an authentication orga cannot give",
}
"""The states a task ends in without an answer, and how the model reads each."""
_MOST_TOKENS: Final = 10**12
_MOST_USD: Final = 10**6


def said_by(task: Task) -> str:
    """What the task's status message says."""
    return get_message_text(task.status.message) if task.status.HasField("message") else ""


def answer_of(task: Task, settled: RemoteSettled | None) -> RemoteAnswer:
    """The call's answer from an ended ``task``; ``RemoteAgentFailed`` if it did not complete."""
    said = said_by(task)
    if task.status.state != TaskState.TASK_STATE_COMPLETED:
        why = ENDED.get(task.status.state, "ended")
        raise RemoteAgentFailed(
            f"the remote agent {why}: {cut(said, 2_000, 'message') or 'it said nothing'}"
        )
    texts = [get_artifact_text(a) for a in task.artifacts] or [said]
    values = [v for a in task.artifacts for v in get_data_parts(a.parts)]
    usage, calls = _reported(task)
    return RemoteAnswer(
        task_id=task.id,
        output=cut("\n".join(t for t in texts if t), ANSWER_CHARS, "remote answer"),
        value=values[0] if len(values) == 1 else (values or None),
        usage=usage or Usage(),
        model_calls=calls,
        reported=usage is not None,
        settled=settled,
    )


def _reported(task: Task) -> tuple[Usage | None, int]:
    """What the remote said its task spent (``A2A_USAGE_KEY`` of an artifact's metadata), read as
    data: values that are not plausible counts are not taken (nothing is charged)."""
    for artifact in task.artifacts:
        fields = MessageToDict(artifact.metadata).get(A2A_USAGE_KEY)
        if not isinstance(fields, dict):
            continue
        said = cast(dict[str, Any], fields)
        calls = said.pop("model_calls", 0)
        try:
            usage = Usage.model_validate(said)
        except ValidationError:
            return None, 0
        usage = usage.model_copy(  # a total below its parts is not taken either
            update={
                "total_tokens": max(usage.total_tokens, usage.input_tokens + usage.output_tokens)
            }
        )
        plausible = (
            isinstance(calls, int | float)
            and 0 <= calls < _MOST_TOKENS
            and usage.total_tokens < _MOST_TOKENS
            and math.isfinite(usage.cost_usd)
            and 0 <= usage.cost_usd < _MOST_USD
        )
        return (usage, int(calls)) if plausible else (None, 0)
    return None, 0

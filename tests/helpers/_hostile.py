"""What an attacker writes where orga reads (issue 50, 67): text that would steer a terminal,
and a workflow history written by a process that answered the workflow task itself."""

from __future__ import annotations

import re

from temporalio.api.command.v1 import Command, CompleteWorkflowExecutionCommandAttributes
from temporalio.api.enums.v1 import CommandType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import (
    PollWorkflowTaskQueueRequest,
    RespondWorkflowTaskCompletedRequest,
)
from temporalio.testing import WorkflowEnvironment

from tests.harness import Harness

UNSAFE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]"
)
ESCAPES = "\x1b]8;;https://evil.example/\x07click\x1b]8;;\x07\x1b[2J\x1b[1A\x07\r\u202e"
"""A hyperlink, a cleared screen, a cursor moved up, a bell, a carriage return, a bidi override."""


async def crafted(
    env: WorkflowEnvironment, harness: Harness, markers: list[Command], workflow_id: str
) -> None:
    """A closed ``ReasoningLoop`` on the test's task queue whose history holds ``markers``,
    written by a process that takes the workflow task itself."""
    client = env.client
    await client.start_workflow("ReasoningLoop", id=workflow_id, task_queue=harness.task_queue)
    service = client.workflow_service
    task = await service.poll_workflow_task_queue(
        PollWorkflowTaskQueueRequest(
            namespace=client.namespace,
            task_queue=TaskQueue(name=harness.task_queue),
            identity="attacker",
        )
    )
    done = Command(
        command_type=CommandType.COMMAND_TYPE_COMPLETE_WORKFLOW_EXECUTION,
        complete_workflow_execution_command_attributes=CompleteWorkflowExecutionCommandAttributes(),
    )
    await service.respond_workflow_task_completed(
        RespondWorkflowTaskCompletedRequest(
            namespace=client.namespace,
            task_token=task.task_token,
            identity="attacker",
            commands=[*markers, done],
        )
    )


def assert_shown_safely(text: str, longest: int = 1_000) -> None:
    assert "Traceback" not in text and "unexpected error" not in text, text[:2_000]
    assert not UNSAFE.search(text), sorted({f"U+{ord(c):04X}" for c in UNSAFE.findall(text)})
    assert max((len(line) for line in text.splitlines()), default=0) <= longest

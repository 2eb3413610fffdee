"""A loop started with the plain ``temporal`` CLI: JSON in, JSON out."""

from __future__ import annotations

import json
import uuid
from typing import Any

from temporalio.testing import WorkflowEnvironment

from orga.scripted.server import Turn
from tests.harness import Harness
from tests.helpers import temporal


async def test_start_with_the_temporal_cli_json_in_json_out(
    env: WorkflowEnvironment, harness: Harness
) -> None:
    model = harness.new_model([Turn(tool_calls=[("add", {"a": 2, "b": 3})]), Turn(text="5")])
    loop_input = {
        "messages": [{"role": "user", "content": "What is 2+3?"}],
        "config": {"provider": "openai", "model": model, "tools": ["add"], "timeout": "PT1M"},
    }
    workflow_id = f"cli-{uuid.uuid4().hex[:8]}"
    async with harness.worker():
        code, out, err = await temporal(
            env,
            "workflow",
            "execute",
            "--task-queue",
            harness.task_queue,
            "--type",
            "ReasoningLoop",
            "--workflow-id",
            workflow_id,
            "--input",
            json.dumps(loop_input),
            "--output",
            "json",
        )
        assert code == 0, err
        result: dict[str, Any] = json.loads(out)["result"]
        code, out, err = await temporal(
            env, "workflow", "query", "--workflow-id", workflow_id, "--type", "state", "-o", "json"
        )
        assert code == 0, err
        state = json.loads(out)["queryResult"][0]
        harness.handles.append(harness.client.get_workflow_handle(workflow_id))
    assert result["output"] == "5"
    assert result["iterations"] == 2
    assert result["usage"]["total_tokens"] == 30
    assert result["termination_reason"] == "end_turn"
    assert state["status"] == "completed" and state["tool_call_count"] == 1

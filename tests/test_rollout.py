"""Rolling out new code: with Worker Deployment versioning, a loop started on version A finishes
on A while new loops go to B (the dev server, as a cluster would do it)."""

from __future__ import annotations

import uuid
from typing import Any

from temporalio.api.workflowservice.v1 import (
    DescribeWorkerDeploymentRequest,
    SetWorkerDeploymentCurrentVersionRequest,
)
from temporalio.client import Client
from temporalio.service import RPCError

from orga.contracts.approvals import ApprovalDecision
from orga.scripted.server import Turn
from tests.harness import Harness, scripted_settings
from tests.helpers import eventually, pending
from tests.sample_tools import transfer


async def make_current(client: Client, deployment: str, build_id: str) -> None:
    """``temporal worker deployment set-current-version``, once the version's workers polled."""

    async def made_current() -> bool:
        try:
            await client.workflow_service.set_worker_deployment_current_version(
                SetWorkerDeploymentCurrentVersionRequest(
                    namespace=client.namespace, deployment_name=deployment, build_id=build_id
                )
            )
        except RPCError:  # the version is not known until one of its workers has polled
            return False
        return True

    await eventually(made_current, f"version {build_id} of {deployment} current")


async def version_of(client: Client, workflow_id: str) -> str:
    """The build id a workflow's tasks ran on (Temporal records it with the execution)."""

    async def build_id() -> str:
        description = await client.get_workflow_handle(workflow_id).describe()
        info: Any = description.raw_description.workflow_execution_info.versioning_info
        return str(info.deployment_version.build_id)

    return await eventually(build_id, f"{workflow_id} has a version")


async def test_a_loop_started_on_a_finishes_on_a_while_new_loops_go_to_b(
    harness: Harness,
) -> None:
    deployment = f"orga-{uuid.uuid4().hex[:8]}"
    old = harness.new_model(
        [Turn(tool_calls=[("transfer", {"amount": 1, "to": "al"})]), Turn(text="done on a")]
    )
    new = harness.new_model([Turn(text="done on b")])
    settings_a = scripted_settings(harness.model, deployment_name=deployment, build_id="a")
    settings_b = scripted_settings(harness.model, deployment_name=deployment, build_id="b")
    async with harness.worker(settings=settings_a, tools=[transfer]):
        await make_current(harness.client, deployment, "a")
        first = await harness.start("pay al", model=old, tools=["transfer"])
        [waiting] = (await pending(first)).pending_approvals  # it waits on version A
        assert await version_of(harness.client, first.id) == "a"
        async with harness.worker(settings=settings_b, tools=[transfer]):
            await make_current(harness.client, deployment, "b")
            second = await harness.start("hello", model=new)
            assert (await second.result()).output == "done on b"
            assert await version_of(harness.client, second.id) == "b"
            await first.execute_update(
                "approve", ApprovalDecision(call_id=waiting.call_id, approved=True, approver="ops")
            )
            assert (await first.result()).output == "done on a"  # finished where it started
            assert await version_of(harness.client, first.id) == "a"
    described = await harness.client.workflow_service.describe_worker_deployment(
        DescribeWorkerDeploymentRequest(
            namespace=harness.client.namespace, deployment_name=deployment
        )
    )
    assert (
        described.worker_deployment_info.routing_config.current_deployment_version.build_id == "b"
    )

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

import orga
from orga.contracts.approvals import ApprovalDecision
from orga.contracts.config import LoopConfig
from orga.contracts.threads import ThreadConfig
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


async def test_a_waiting_thread_moves_to_the_new_version_at_its_next_message(
    harness: Harness,
) -> None:
    """A thread that waits for its next message while its deployment's current version moves
    from A to B answers that message on B: it continues as new onto the target version
    (Temporal's upgrade on continue-as-new, no patch) though the worker on A kept it cached
    (the server's own flag never reaches a sticky task). A thread with
    ``upgrade_on_continue=False`` answers on A."""
    deployment = f"orga-{uuid.uuid4().hex[:8]}"
    moving_model = harness.new_model([Turn(text="1 on a"), Turn(text="2 on b")])
    pinned_model = harness.new_model([Turn(text="1 on a"), Turn(text="2 on a")])
    settings_a = scripted_settings(harness.model, deployment_name=deployment, build_id="a")
    settings_b = scripted_settings(harness.model, deployment_name=deployment, build_id="b")
    threads: list[orga.ThreadHandle] = []
    async with harness.worker(settings=settings_a):
        await make_current(harness.client, deployment, "a")
        for model, upgrade in ((moving_model, True), (pinned_model, False)):
            config = LoopConfig(model=model, thread=ThreadConfig(), upgrade_on_continue=upgrade)
            chat = await orga.start_thread(
                harness.client, config, "first", task_queue=harness.task_queue
            )
            harness.handles.append(chat.handle)
            threads.append(chat)
        firsts = [(await chat.turn(1)).output for chat in threads]
        assert [await version_of(harness.client, chat.id) for chat in threads] == ["a", "a"]
        async with harness.worker(settings=settings_b):
            await make_current(harness.client, deployment, "b")
            seconds = [(await chat.send("second")).output for chat in threads]
            versions = [await version_of(harness.client, chat.id) for chat in threads]
            runs = [await _runs(harness.client, chat.id) for chat in threads]
            for chat in threads:
                await chat.close()
    assert firsts == ["1 on a", "1 on a"]
    assert seconds == ["2 on b", "2 on a"]
    assert versions == ["b", "a"]
    assert runs == [2, 1]  # the moving thread continued as new once; the pinned one never
    last = harness.model.requests_for(moving_model)[-1]
    assert last.user_texts() == ["first", "second"]  # its conversation came along


async def _runs(client: Client, workflow_id: str) -> int:
    """How many runs the workflow id has had."""
    return len([w async for w in client.list_workflows(f"WorkflowId = '{workflow_id}'")])


async def test_a_client_cannot_steer_a_thread_onto_a_build_it_chooses(harness: Harness) -> None:
    """Issue 64, not tried before: the ways a client reaches a thread's build. A fork of a
    thread on A, made once B is current, starts on B — no input of a fork names a build (the
    source's runs on A are not the fork's); a message moves a waiting thread to B; a carry
    whose ``moved_from`` names a build is a carry, taken only from the loop's own run
    (``tests/test_start_inputs.py``). What stays a client's choice: ``upgrade_on_continue=False``
    on its own thread (it answers on its build while that build is served), and Temporal's
    own versioning override, which namespace authorization governs."""
    deployment = f"orga-{uuid.uuid4().hex[:8]}"
    model = harness.new_model([Turn(text="1 on a"), Turn(text="2 on b")])
    forked_model = harness.new_model([Turn(text="fork on b")])
    settings_a = scripted_settings(harness.model, deployment_name=deployment, build_id="a")
    settings_b = scripted_settings(harness.model, deployment_name=deployment, build_id="b")
    async with harness.worker(settings=settings_a):
        await make_current(harness.client, deployment, "a")
        config = LoopConfig(model=model, thread=ThreadConfig())
        chat = await orga.start_thread(
            harness.client, config, "first", task_queue=harness.task_queue
        )
        harness.handles.append(chat.handle)
        assert (await chat.turn(1)).output == "1 on a"
        async with harness.worker(settings=settings_b):
            await make_current(harness.client, deployment, "b")
            forked = await orga.loop(harness.client, chat.id).fork(
                1, say="again", model=forked_model
            )
            harness.handles.append(forked.handle)
            fork = orga.thread(harness.client, forked.id)
            fork_answer = (await fork.turn(1)).output
            fork_version = await version_of(harness.client, fork.id)
            second = (await chat.send("second")).output
            versions = await version_of(harness.client, chat.id)
            await fork.close()
            await chat.close()
    assert fork_answer == "fork on b" and fork_version == "b"
    assert second == "2 on b" and versions == "b"

"""orga in a plain Temporal worker: ``OrgaPlugin`` on the client, a ``Worker`` as Temporal
users write it, and the typed client helpers — a governed loop with a tool and an approval."""

from __future__ import annotations

import logging
import uuid
from importlib.metadata import version

import pytest
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import DataConverter
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

import orga
from orga.contracts.approvals import PendingApproval
from orga.contracts.errors import InvalidConfig
from orga.plugin import OrgaPlugin
from orga.runtime.converter import OrgaPayloadConverter
from orga.runtime.settings import Settings
from orga.scripted.server import ScriptedModelServer, Turn
from tests.harness import TEST_STORE, replay, scripted_settings
from tests.helpers import eventually


async def test_a_plain_worker_with_the_plugin_runs_a_governed_loop(
    env: WorkflowEnvironment, model_server: ScriptedModelServer
) -> None:
    refunds: list[tuple[int, str]] = []

    @orga.tool(requires_approval=True)
    def refund(amount: int, email: str, ctx: orga.ToolContext) -> str:
        """Refund an amount to a customer.

        Args:
            amount: cents.
            email: the customer's address.
        """
        refunds.append((amount, email))
        return f"refunded {amount} to {email} ({ctx.idempotency_key})"

    model = f"plugin-{uuid.uuid4().hex[:8]}"
    model_server.script(
        model,
        [
            Turn(tool_calls=[("refund", {"amount": 4200, "email": "ann@example.com"})]),
            Turn(text="Refunded 42.00 to ann."),
        ],
    )
    plugin = orga.OrgaPlugin(
        tools=[refund], settings=scripted_settings(model_server), store=TEST_STORE, tracing=False
    )
    client = await Client.connect(
        env.client.service_client.config.target_host,
        namespace=env.client.namespace,
        plugins=[plugin],
    )
    queue = f"plugin-{uuid.uuid4().hex[:8]}"
    async with Worker(client, task_queue=queue):  # the client's plugin brings orga along
        loop = await orga.start_loop(
            client,
            "Refund 4200 cents to ann@example.com",
            orga.LoopConfig(model=model, tools=["refund"]),
            task_queue=queue,
        )

        async def asked() -> list[PendingApproval]:
            # The loop lists the call before it waits for it.
            return (await loop.state()).pending_approvals

        waiting = await eventually(asked, "the refund waits for approval")
        assert refunds == []  # nothing ran before the approval
        decided = await loop.approve(waiting[0].call_id, approver="alice", reason="receipt ok")
        result = await loop.result()
        journal = await loop.journal()
    assert decided.approved and decided.approver == "alice"
    assert result.output == "Refunded 42.00 to ann."
    assert refunds == [(4200, "ann@example.com")]
    kinds = [e.kind for e in journal.entries]
    assert "ApprovalDecided" in kinds and "PolicyEvaluated" in kinds
    assert await replay(loop.handle, client) == 1


@pytest.mark.parametrize("converter", ["default", "pydantic"])
async def test_a_worker_whose_client_lacks_orga_s_converter_is_refused(
    env: WorkflowEnvironment, model_server: ScriptedModelServer, converter: str
) -> None:
    """Temporal's default converter cannot read orga's types; Temporal's pydantic one lacks
    orga's store for large payloads."""
    plain = await Client.connect(
        env.client.service_client.config.target_host,
        namespace=env.client.namespace,
        data_converter=pydantic_data_converter if converter == "pydantic" else DataConverter(),
    )
    plugin = orga.OrgaPlugin(settings=scripted_settings(model_server), tracing=False)
    with pytest.raises(InvalidConfig, match=r"Client\.connect\(plugins=\[\.\.\.\]\)"):
        Worker(plain, task_queue="never", plugins=[plugin])


def test_payload_converters_share_one_json_converter() -> None:
    """Temporal makes a payload converter per workflow run: orga's share one pydantic JSON
    converter (and its cache of type adapters) instead of building one each."""
    first, second = OrgaPayloadConverter(), OrgaPayloadConverter()
    assert first.converters[b"json/plain"] is second.converters[b"json/plain"]
    given = orga.LoopInput(
        messages=[orga.Message(role="user", content="hi")], config=orga.LoopConfig(model="m")
    )
    [payload] = first.to_payloads([given])
    assert second.from_payloads([payload], [orga.LoopInput]) == [given]


def test_a_worker_without_a_model_says_so_once_at_start(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="orga"):
        OrgaPlugin(settings=Settings.from_env({}), tracing=False)
        without = [r.getMessage() for r in caplog.records]
        caplog.clear()
        OrgaPlugin(settings=Settings.from_env({"OPENAI_API_KEY": "sk-test"}), tracing=False)
        OrgaPlugin(
            settings=Settings.from_env({"OPENAI_BASE_URL": "http://127.0.0.1:11434/v1"}),
            tracing=False,
        )
        keyed = [r.getMessage() for r in caplog.records]
    assert len([m for m in without if m.startswith("this worker has no model")]) == 1
    assert "ORGA_PROVIDER=scripted" in without[0]
    assert not any("has no model" in m for m in keyed)


@pytest.mark.parametrize(
    ("changes", "marked"),
    [({}, f"orga-{version('orga')}"), ({"build_id": "3f2c1ab"}, "3f2c1ab")],
    ids=["default", "ORGA_BUILD_ID"],
)
async def test_an_unversioned_worker_is_marked_with_orga_s_version_not_a_hash_of_its_code(
    env: WorkflowEnvironment,
    model_server: ScriptedModelServer,
    changes: dict[str, str],
    marked: str,
) -> None:
    """Temporal's own default build id hashes the code of every module the process has loaded,
    at each worker's start (~0.2 s here; seconds where no bytecode is cached): an unversioned
    orga worker is marked ``orga-<version>``, or ``ORGA_BUILD_ID`` when it is set."""
    settings = scripted_settings(model_server, **changes)
    plugin = orga.OrgaPlugin(settings=settings, store=TEST_STORE, tracing=False)
    client = await Client.connect(
        env.client.service_client.config.target_host,
        namespace=env.client.namespace,
        plugins=[plugin],
    )
    async with Worker(client, task_queue=f"build-{uuid.uuid4().hex[:8]}") as worker:
        assert worker.config(active_config=True).get("build_id") == marked

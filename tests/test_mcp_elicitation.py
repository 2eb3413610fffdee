"""``orga mcp --decisions`` when the MCP client application answers the form itself (issue 50).

Elicitation puts a form before the person only if the client application chooses to: an
application (or the assistant inside it) can answer it on its own, with whatever content it
likes. Each test is that application's steps against a real loop on the dev server: an answer
is recorded as what it is — the application's claim, under the name ``orga mcp`` was started
with, never signed with the person's key — and anything it carries is checked, not adopted.
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError
from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from orga.cli.mcp import build_server
from orga.contracts.journal import ApprovalDecided, Journal
from orga.contracts.state import LoopState
from orga.desk.approvals import approve
from orga.runtime.approver_keys import generate_key, public_key_of
from orga.runtime.settings import Settings
from orga.scripted.server import Turn
from orga.tools.mcp.hub import render_result
from tests.harness import TEST_STORE, Harness, scripted_settings
from tests.helpers import ORGA, on, pending
from tests.sample_tools import transfer

UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
ESCAPES = "\x1b]8;;https://evil.example/\x07click\x1b]8;;\x07\x1b[2J\x1b[1A\x07\r"
"""A hyperlink, a cleared screen, a cursor moved up, a bell, a carriage return."""


def paying(harness: Harness, amount: int = 950_000) -> str:
    pay = Turn(tool_calls=[("transfer", {"amount": amount, "to": "mallory"})])
    return harness.new_model([pay, Turn(text="paid")])


async def still_waits(handle: WorkflowHandle[Any, Any], call_id: str) -> None:
    state = await handle.query("state", result_type=LoopState)
    assert [a.call_id for a in state.pending_approvals] == [call_id]


def application(answers: list[Any], asked: list[str]) -> Any:
    """An MCP client application that answers orga's form itself with each of ``answers`` in
    turn (an ``ElicitResult``'s content, or the whole result), and keeps what it was asked."""

    async def answer(context: Any, params: Any) -> types.ElicitResult:
        asked.append(params.message)
        given = answers.pop(0)
        if isinstance(given, types.ElicitResult):
            return given
        return types.ElicitResult(action="accept", content=given)

    return answer


async def test_an_answer_to_the_form_is_never_signed_with_the_person_s_key(
    env: WorkflowEnvironment, harness: Harness, tmp_path: Path
) -> None:
    """The attack: approvers are enrolled, and ``orga mcp --decisions`` runs where alice's key
    is (her ``ORGA_APPROVER_KEY``). Her MCP client application answers the form itself, with
    nobody looking; orga mcp signed that answer with her key, and the loop recorded it as
    *verified*: alice's proven decision. Now orga mcp refuses before asking, saying how she
    decides herself; her own signed decision is recorded as before."""
    key_file = tmp_path / "alice.pem"
    alice = generate_key(key_file)
    approvers = tmp_path / "approvers.toml"
    approvers.write_text(f'[approvers.alice]\nkey = "{public_key_of(alice)}"\n')
    settings = scripted_settings(harness.model, approvers_file=approvers)
    variables = {
        **on(env, harness),
        "ORGA_STORE_URL": TEST_STORE.url,
        "ORGA_APPROVER": "alice",
        "ORGA_APPROVER_KEY": str(key_file),
    }
    server = StdioServerParameters(command=ORGA, args=["mcp", "--decisions"], env=variables)
    asked: list[str] = []
    app = application([{"confirm": True, "reason": "checked"}], asked)
    async with harness.worker(settings=settings, tools=[transfer]):
        handle = await harness.start("pay", model=paying(harness), tools=["transfer"])
        [waiting] = (await pending(handle)).pending_approvals
        assert waiting.signatures_required
        async with Client(server, elicitation_callback=app) as client:
            refused = await client.call_tool(
                "approve", {"workflow_id": handle.id, "call_id": waiting.call_id}
            )
        said = render_result(refused)
        assert refused.is_error, said
        assert "approvers are enrolled" in said and "never signs" in said
        assert f"orga approve {handle.id} {waiting.call_id}" in said and "orga desk" in said
        assert asked == []  # nobody was asked a question whose answer could not count
        await still_waits(handle, waiting.call_id)
        # alice decides herself: her key signs what she decided, and that is verified.
        record = await approve(
            harness.client, handle.id, waiting.call_id, approved=True, reason="mine",
            approver="alice", key=alice,
        )  # fmt: skip
        assert record.verified and record.source == "update"
        assert (await handle.result()).output == "paid"


async def test_without_enrolled_approvers_the_answer_is_the_application_s_claim(
    env: WorkflowEnvironment, harness: Harness, tmp_path: Path
) -> None:
    """No approvers enrolled, an approver's key in orga mcp's environment: the answer is
    recorded unverified, unsigned, as the MCP client application's answer to the form."""
    key_file = tmp_path / "ops.pem"
    generate_key(key_file)
    variables = {
        **on(env, harness),
        "ORGA_STORE_URL": TEST_STORE.url,
        "ORGA_APPROVER": "ops",
        "ORGA_APPROVER_KEY": str(key_file),
    }
    server = StdioServerParameters(command=ORGA, args=["mcp", "--decisions"], env=variables)
    asked: list[str] = []
    app = application([{"confirm": True, "reason": "looks fine"}], asked)
    async with harness.worker(tools=[transfer]):
        handle = await harness.start("pay", model=paying(harness, 12), tools=["transfer"])
        [waiting] = (await pending(handle)).pending_approvals
        async with Client(server, elicitation_callback=app) as client:
            decided = await client.call_tool(
                "approve", {"workflow_id": handle.id, "call_id": waiting.call_id}
            )
        assert not decided.is_error, render_result(decided)
        record = decided.structured_content
        assert record is not None
        assert (record["approver"], record["source"], record["verified"]) == (
            "ops",
            "mcp-elicitation",
            False,
        )
        assert "the MCP client app's answer" in record["said"] and "unverified" in record["said"]
        assert (await handle.result()).output == "paid"
        journal = await handle.query("journal", result_type=Journal)
    [entry] = [e for e in journal.entries if isinstance(e, ApprovalDecided)]
    [proof] = entry.decisions
    assert (proof.verified, proof.signature, proof.via) == (False, None, "mcp-elicitation")
    assert len(asked) == 1


HOSTILE_ANSWERS: list[tuple[Any, str]] = [
    ({"confirm": "yes", "reason": "r"}, "confirm"),  # a string read as yes
    ({"confirm": 1}, "confirm"),
    ({}, "confirm"),
    ({"confirm": True, "approver": "cfo@example.com"}, "approver"),  # another name
    ({"confirm": True, "arguments": '{"amount": 1}'}, "arguments"),  # edited arguments
    ({"confirm": True, "approved": False, "call_id": "other"}, "approved"),
    ({"confirm": True, "reason": "x" * 2_001}, "reason"),
    ({"confirm": True, "reason": f"ok {ESCAPES}"}, "control characters"),
    ({"confirm": True, "reason": 5}, "reason"),
    (types.ElicitResult(action="accept", content=None), "without an answer"),
    (types.ElicitResult(action="decline"), "decline"),
    ({"confirm": False, "reason": "no"}, "did not confirm"),
]
"""What an application may answer, and what the refusal names: wrong types, fields the form
does not ask for (another approver, edited arguments, another call), a reason too long or
holding terminal escapes, no answer, a refusal."""


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_the_form_s_answer_is_checked_never_adopted(
    env: WorkflowEnvironment, harness: Harness, mode: str
) -> None:
    config = Settings(
        temporal_address=env.client.service_client.config.target_host,
        task_queue=harness.task_queue,
        store_url=TEST_STORE.url,
    )
    server = build_server(config, "ops", decisions=True)
    answers: list[Any] = [answer for answer, _ in HOSTILE_ANSWERS]
    asked: list[str] = []
    app = application(answers, asked)
    async with harness.worker(tools=[transfer]):
        handle = await harness.start(
            "pay", model=paying(harness, 40), tools=["transfer"],
            workflow_id=f"loop-{ESCAPES}-{uuid.uuid4().hex[:8]}",
        )  # fmt: skip
        [waiting] = (await pending(handle)).pending_approvals
        arguments = {"workflow_id": handle.id, "call_id": waiting.call_id}
        async with Client(server, elicitation_callback=app, mode=mode) as client:
            for answer, named in HOSTILE_ANSWERS:
                refused = await client.call_tool("approve", arguments)
                said = render_result(refused)
                assert refused.is_error, (answer, said)
                assert named in said and "nothing was recorded" in said, (answer, said)
                assert len(said) < 1_000 and not UNSAFE.search(said), said
                await still_waits(handle, waiting.call_id)
            # An answer the application was never asked for: the state it echoes is sealed.
            with pytest.raises(MCPError, match="requestState"):
                await client.call_tool(
                    "approve",
                    arguments,
                    input_responses={
                        "decision": types.ElicitResult(action="accept", content={"confirm": True})
                    },
                    request_state=f"approve {handle.id} {waiting.call_id}",
                )
            await still_waits(handle, waiting.call_id)
            answers.append({"confirm": True, "reason": "line one\r\nline two"})
            decided = await client.call_tool("approve", arguments)
        assert not decided.is_error, render_result(decided)
        assert decided.structured_content is not None
        assert decided.structured_content["approver"] == "ops"
        assert decided.structured_content["reason"] == "line one\nline two"
        assert (await handle.result()).output == "paid"
    assert len(asked) == len(HOSTILE_ANSWERS) + 1
    assert not any(UNSAFE.search(message) for message in asked), asked[0]

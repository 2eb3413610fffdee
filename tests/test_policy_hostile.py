"""``orga policy what-if``, ``record`` and ``test`` over crafted histories and cases (issue 50).

A history is data: any process that can poll a task queue of the namespace answers a workflow
task of a ``ReasoningLoop`` as it likes, so its markers say anything. The attacker here is that
process, speaking Temporal's API itself: it starts a workflow, takes its first workflow task and
completes it with ``evaluate_policy`` markers crafted to crash the reader (facts nested 100 000
levels deep, a result that is not JSON or not a ``PolicyResult``, a reference to another entry
of orga's store, an action no gate is asked), to flood the output, or to steer the operator's
terminal. A cases file is data too (a pull request can change one). Each reader sets aside
what it cannot read, says so in bounded lines, and prints no control character.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from temporalio.api.command.v1 import (
    Command,
    RecordMarkerCommandAttributes,
)
from temporalio.api.common.v1 import Payload, Payloads
from temporalio.api.enums.v1 import CommandType
from temporalio.testing import WorkflowEnvironment

from orga.cli.policy_history import SHOWN_UNREADABLE
from orga.gates.whatif import CASE_LINE_LIMIT
from tests.harness import TEST_STORE, Harness
from tests.helpers import (
    ESCAPES,
    POLICY_EXAMPLES,
    UNSAFE,
    assert_shown_safely,
    crafted,
    eventually,
    on,
    orga,
)

FACTS = json.dumps({"activity_type": "evaluate_policy"}).encode()
REFERENCE = b"temporal.api.sdk.v1.ExternalStorageReference"


def asked(**changes: Any) -> dict[str, Any]:
    """A record of what a Cedar gate was asked about ``add`` (recorded as denied: under the
    example policies it is allowed, so it flips)."""
    action = {"kind": "call_tool", "tool": "add", "call_id": "c1", "arguments": '{"a": 1}'}
    return {"engine": "cedar", "action": action, "agent_id": "agent", "decision": "deny"} | changes


def result(*records: dict[str, Any]) -> bytes:
    decisions = [{"decision": "allow", "asked": record} for record in records]
    return json.dumps({"engine": "cedar", "decisions": decisions}).encode()


def marker(
    result: bytes, *, facts: bytes = FACTS, metadata: dict[str, bytes] | None = None
) -> Command:
    payload = Payload(metadata=metadata or {"encoding": b"json/plain"}, data=result)
    details = {
        "data": Payloads(payloads=[Payload(metadata={"encoding": b"json/plain"}, data=facts)]),
        "result": Payloads(payloads=[payload]),
    }
    attributes = RecordMarkerCommandAttributes(marker_name="core_local_activity", details=details)
    return Command(
        command_type=CommandType.COMMAND_TYPE_RECORD_MARKER,
        record_marker_command_attributes=attributes,
    )


async def what_if(env: WorkflowEnvironment, harness: Harness, *more: str) -> tuple[int, str, str]:
    """``orga policy what-if`` of the example policies over the test's task queue, once
    visibility lists its workflow."""
    variables = {**on(env, harness), "ORGA_STORE_URL": TEST_STORE.url}
    command = ["what-if", str(POLICY_EXAMPLES), "--since", "1h", "--task-queue", harness.task_queue]

    async def listed() -> tuple[int, str, str] | None:
        code, out, err = await orga("policy", *command, "--json", env=variables)
        return (code, out, err) if json.loads(out)["summary"]["workflows"] else None

    await eventually(listed, "visibility lists the crafted workflow")
    return await orga("policy", *command, *more, env=variables)


async def test_a_crafted_history_is_set_aside_never_a_crash(
    env: WorkflowEnvironment, harness: Harness
) -> None:
    """One crafted record used to stop the whole what-if (and ``record``) with ``unexpected
    error: RecursionError`` or a pydantic dump: one workflow anybody can write kept every
    operator from testing a policy. Now each is set aside with its event and why; the rest is
    read, and the answer says it is incomplete (exit 1)."""
    # Facts nested too deep to say what they are facts of: no policy decision's, passed over.
    ignored = marker(result(asked()), facts=b"[" * 100_000 + b"]" * 100_000)
    hostile = [
        marker(b"\xff\xfe not json"),
        marker(json.dumps({"decisions": [{"decision": 7}]}).encode()),  # wrong types
        marker(b'{"engine": "cedar", "decisions": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"),
        marker(result(asked(action={"kind": "launch_missiles"}))),
        marker(result(asked(action={"kind": "call_tool", "tool": "add", "arguments": "[1"}))),
        marker(result(asked(ref="blob:sha256:" + "0" * 64))),  # kept nowhere
        marker(  # a reference to another entry of the store: read as if it were a payload
            json.dumps(
                {"driverName": "orga-store", "claimData": {"key": "worker-tools-of:q:x"}}
            ).encode(),
            metadata={"encoding": b"json/protobuf", "messageType": REFERENCE},
        ),
    ]
    junk = [marker(b"junk")] * 20  # more than are listed one by one
    genuine = marker(result(asked()))
    workflow_id = f"loop-crafted-{uuid.uuid4().hex[:8]}"
    await crafted(env, harness, [ignored, *hostile, *junk, genuine], workflow_id)
    unreadable = len(hostile) + len(junk)

    code, out, err = await what_if(env, harness)
    assert code == 1, err
    assert_shown_safely(out + err)
    set_aside = [line for line in err.splitlines() if "set aside a recorded request" in line]
    assert len(set_aside) == SHOWN_UNREADABLE, err
    assert err.endswith(
        f"… and {unreadable - SHOWN_UNREADABLE} more set aside (--json lists all)\n"
    )
    assert all(workflow_id in line and "event " in line for line in set_aside)
    assert "recursion limit exceeded" in err  # the result nested too deep, said in one line
    assert "run with the workers' ORGA_STORE_URL" in err and "holds no action" in err
    assert f"deny→allow  {workflow_id}  c1  add" in out  # the genuine record is still read
    assert out.rstrip().endswith(
        f"1 flip(s) in 1 recorded request(s) of 1 workflow(s), and {unreadable} that could "
        "not be read (set aside, listed on stderr): the what-if is incomplete: deny→allow 1"
    )
    code, out, err = await what_if(env, harness, "--json")
    found = json.loads(out)
    assert code == 1 and err == ""
    assert (found["summary"]["requests"], found["summary"]["unreadable"]) == (1, unreadable)
    assert {u["workflow_id"] for u in found["unreadable"]} == {workflow_id}
    assert len(found["unreadable"]) == unreadable

    variables = {**on(env, harness), "ORGA_STORE_URL": TEST_STORE.url}
    code, out, err = await orga(
        "policy", "record", "--since", "1h", "--task-queue", harness.task_queue, env=variables
    )
    assert code == 1
    assert_shown_safely(err)
    [case] = [json.loads(line) for line in out.splitlines()]  # only the genuine one
    assert case["action"]["tool"] == "add" and case["expect"] == "deny"


async def test_escapes_and_floods_in_a_history_reach_no_terminal(
    env: WorkflowEnvironment, harness: Harness, tmp_path: Path
) -> None:
    """Escapes in the workflow id, the tool's name, the call id and the reason; a reason of a
    million characters. A person sees stand-ins in bounded lines; ``--json`` and the cases
    file carry every character."""
    record = asked(
        action={"kind": "call_tool", "tool": f"add{ESCAPES}", "call_id": ESCAPES},
        decision="allow",
        reason=ESCAPES * 3,
    )
    flood = asked(reason="R" * 1_000_000)
    workflow_id = f"loop-{ESCAPES}-{uuid.uuid4().hex[:8]}"
    await crafted(env, harness, [marker(result(record)), marker(result(flood))], workflow_id)

    code, out, err = await what_if(env, harness)
    assert code == 1, err
    assert_shown_safely(out + err)
    assert "␛]8;;https://evil.example/␇click" in out  # shown, not obeyed
    assert "more characters; --json shows all" in out
    code, out, _ = await what_if(env, harness, "--json")
    flips = {f["tool"]: f for f in json.loads(out)["flips"]}
    assert set(flips) == {f"add{ESCAPES}", "add"}
    assert flips["add"]["before"] == "deny: " + "R" * 1_000_000
    assert flips[f"add{ESCAPES}"]["workflow_id"] == workflow_id

    variables = {**on(env, harness), "ORGA_STORE_URL": TEST_STORE.url}
    cases = tmp_path / "cases.jsonl"
    code, out, err = await orga(
        "policy", "record", "--since", "1h", "--task-queue", harness.task_queue,
        "--out", str(cases), env=variables,
    )  # fmt: skip
    assert code == 0, err
    assert {json.loads(line)["action"]["call_id"] for line in cases.read_text().splitlines()} == {
        ESCAPES,
        "c1",
    }
    code, out, err = await orga(
        "policy", "record", "--since", "1h", "--task-queue", harness.task_queue, env=variables
    )
    assert code == 0 and not UNSAFE.search(out)  # escaped as JSON, the same value
    code, out, err = await orga("policy", "test", str(cases), "--policy-dir", str(POLICY_EXAMPLES))
    assert code == 1, err
    assert_shown_safely(out + err)
    assert out.count("FAIL  ") == 2


async def test_a_hostile_cases_file_is_one_line_and_exit_2(tmp_path: Path) -> None:
    """Each used to end in ``unexpected error: ToolInputError`` (exit 1, as if a case had
    failed), in a dump of the validation error, or in reading the whole file at once: now one
    bounded line naming the line, exit 2."""
    ok = {
        "action": {"kind": "call_tool", "tool": "add", "arguments": '{"a": 1}'},
        "expect": "allow",
    }
    deep = '{"a": ' * 5_000 + "1" + "}" * 5_000
    lines = {
        "deep JSON": '{"action": ' + "[" * 100_000 + "]" * 100_000 + ', "expect": "deny"}',
        "wrong types": json.dumps({"action": {"kind": "call_tool", "tool": 5}, "expect": "deny"}),
        "arguments not JSON": json.dumps(ok | {"action": ok["action"] | {"arguments": "x"}}),
        "arguments too deep": json.dumps(ok | {"action": ok["action"] | {"arguments": deep}}),
        "arguments too long": json.dumps(
            ok | {"action": ok["action"] | {"arguments": json.dumps({"a": "x" * 2_000_000})}}
        ),
        "a field named by the attacker": json.dumps(ok | {f"k{ESCAPES}" + "k" * 1_000_000: 1}),
        "a line past the limit": json.dumps(ok | {"name": "n" * (CASE_LINE_LIMIT + 1)}),
    }
    cases = tmp_path / "cases.jsonl"
    for what, line in lines.items():
        cases.write_text(json.dumps(ok) + "\n" + line + "\n", encoding="utf-8")
        code, out, err = await orga(
            "policy", "test", str(cases), "--policy-dir", str(POLICY_EXAMPLES)
        )
        assert (code, out) == (2, ""), (what, code, err[:500])
        assert err.startswith("orga: cases.jsonl:2: not a policy case ("), (what, err[:500])
        assert err.count("\n") == 1, what
        assert_shown_safely(err, longest=1_000)
    cases.write_bytes(b'{"action": {"kind": "respond"}, "expect": "allow", "name": "\xff"}\n')
    code, out, err = await orga("policy", "test", str(cases), "--policy-dir", str(POLICY_EXAMPLES))
    assert code == 2 and "cannot read the cases file" in err and err.count("\n") == 1

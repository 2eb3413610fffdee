"""Policies tested before they ship (issue 37): every Cedar decision records what the engine
was asked; ``orga policy what-if`` asks a candidate set the same over real histories of the dev
server and lists exactly what flips; ``orga policy record`` / ``test`` turn that into cases.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from orga.contracts.audit import AuditChain
from orga.contracts.errors import InvalidConfig
from orga.contracts.journal import Journal, PolicyEvaluated
from orga.contracts.verdicts import AskedPolicy
from orga.gates.cedar import CedarGate
from orga.gates.whatif import PolicyCase, ask_again, flip
from orga.scripted.server import Turn
from tests.harness import API_KEYS, TEST_STORE, Harness, scripted_settings
from tests.helpers import POLICY_EXAMPLES, eventually, on, orga

CANDIDATE_CHANGES = {
    # no longer forbidden: the secret file's read flips deny→allow
    '@id("no-secrets")\n@reason("files whose name mentions a secret are never read")\n'
    'forbid (principal, action == Action::"call_tool", resource == Tool::"file_read")\n'
    'when { context.arguments has path && context.arguments.path like "*secret*" };': "",
    # sums need a person now: every add flips to "approval needed"
    '@id("arithmetic")\n': '@id("arithmetic")\n@approval("required")\n',
    # docs are read 5000 characters at a time: the rewrite changes
    '{\\"max_chars\\": 20000}': '{\\"max_chars\\": 5000}',
}


def _policies(at: Path, changes: dict[str, str] | None = None) -> Path:
    shutil.copytree(POLICY_EXAMPLES, at)
    tools = at / "tools.cedar"
    text = tools.read_text()
    for old, new in (changes or {}).items():
        assert old in text, old
        text = text.replace(old, new)
    tools.write_text(text)
    return at


def _cli_env(env: WorkflowEnvironment, harness: Harness) -> dict[str, str]:
    return {**on(env, harness), "ORGA_STORE_URL": TEST_STORE.url}


async def test_what_if_lists_exactly_the_calls_a_changed_policy_flips(
    env: WorkflowEnvironment, harness: Harness, tmp_path: Path
) -> None:
    in_force = _policies(tmp_path / "policies")
    candidate = _policies(tmp_path / "candidate", CANDIDATE_CHANGES)
    long_path = "docs/" + "x" * 20_000 + ".md"  # recorded by reference: over ASKED_LIMIT
    loops: list[tuple[str, list[Turn]]] = [
        ("read the guide, add", [
            Turn(tool_calls=[("file_read", {"path": "docs/guide.md"}), ("add", {"a": 1, "b": 2})]),
            Turn(text="3"),
        ]),
        ("a sum", [Turn(tool_calls=[("add", {"a": 2, "b": 2})]), Turn(text="4")]),
        ("the secret", [
            Turn(tool_calls=[("file_read", {"path": "docs/secret.md"})]), Turn(text="denied"),
        ]),
        ("a long path", [Turn(tool_calls=[("file_read", {"path": long_path})]), Turn(text="ok")]),
    ]  # fmt: skip
    settings = scripted_settings(harness.model, policy_dir=in_force)
    handles = []
    async with harness.worker(settings=settings):
        for task, turns in loops:
            model = harness.new_model(turns)
            handle = await harness.start(
                task, model=model, tools=["file_read", "add"], policy="cedar"
            )
            await handle.result()
            handles.append(handle)
        journal = await handles[0].query("journal", result_type=Journal)
        audit = await handles[0].query("audit", result_type=AuditChain)
        long_journal = await handles[3].query("journal", result_type=Journal)
    # What the engine was asked is in the journal and on the audit chain, secrets never.
    [first] = [e for e in journal.entries if isinstance(e, PolicyEvaluated)][:1]
    read = first.decisions[0].asked
    assert read is not None and read.engine == "cedar" and read.decision == "modify"
    assert read.request["principal"] == {"type": "Agent", "id": "agent"}
    assert read.request["resource"] == {"type": "Tool", "id": "file_read"}
    assert read.request["context"]["arguments"] == {"path": "docs/guide.md"}
    assert json.loads(read.action["arguments"]) == {"path": "docs/guide.md"}
    assert read.arguments is not None and json.loads(read.arguments)["max_chars"] == 20000
    recorded = json.dumps([e.record for e in audit.entries])
    assert '"asked"' in recorded and "docs/guide.md" in recorded
    assert not any(key in journal.model_dump_json() for key in API_KEYS.values())
    [long] = [
        d.asked
        for e in long_journal.entries
        if isinstance(e, PolicyEvaluated)
        for d in e.decisions
        if d.tool == "file_read"
    ]
    assert long is not None and long.ref is not None and long.action == {}

    cli = _cli_env(env, harness)

    async def what_if(policies: Path) -> tuple[int, dict[str, Any], str]:
        async def listed() -> tuple[int, dict[str, Any], str] | None:
            code, out, err = await orga(
                "policy", "what-if", str(policies), "--since", "1h",
                "--task-queue", harness.task_queue, "--json", env=cli,
            )  # fmt: skip
            assert code in (0, 1), err
            found = json.loads(out)
            # visibility lists a closed workflow a moment after it closed
            return (code, found, err) if found["summary"]["workflows"] >= len(loops) else None

        return await eventually(listed, "what-if over every loop of the test")

    code, same, _ = await what_if(in_force)
    assert code == 0 and same["flips"] == []
    assert same["summary"]["requests"] == 9  # 5 calls (one by reference) and 4 answers
    code, changed, _ = await what_if(candidate)
    assert code == 1
    flips = {(f["workflow_id"], f["tool"], f["flip"]) for f in changed["flips"]}
    ids = [h.id for h in handles]
    assert flips == {
        (ids[0], "file_read", "modification changed"),
        (ids[0], "add", "approval needed"),
        (ids[1], "add", "approval needed"),
        (ids[2], "file_read", "deny→allow"),
        (ids[3], "file_read", "modification changed"),  # read back from the store
    }
    assert changed["summary"]["flips"] == {
        "deny→allow": 1,
        "approval needed": 2,
        "modification changed": 2,
    }
    [secret] = [f for f in changed["flips"] if f["flip"] == "deny→allow"]
    assert secret["before"].startswith("deny: files whose name mentions a secret")
    assert secret["after"].startswith("modify")
    code, out, _ = await orga(
        "policy", "what-if", str(candidate), "--since", "1h", "--task-queue", harness.task_queue,
        env=cli,
    )  # fmt: skip
    assert code == 1
    assert f"deny→allow  {ids[2]}  " in out
    assert out.rstrip().endswith(
        "5 flip(s) in 9 recorded request(s) of 4 workflow(s): deny→allow 1, approval needed 2, "
        "modification changed 2"
    )

    # A what-if that looks right becomes a regression test.
    cases = tmp_path / "cases.jsonl"
    code, out, err = await orga(
        "policy", "record", "--since", "1h", "--task-queue", harness.task_queue,
        "--out", str(cases), env=cli,
    )  # fmt: skip
    assert (code, out.strip()) == (0, f"wrote 9 case(s) to {cases}"), err
    code, out, err = await orga("policy", "test", str(cases), "--policy-dir", str(in_force))
    assert (code, out.strip()) == (0, f"9 of 9 case(s) pass under {in_force}"), err
    code, out, _ = await orga("policy", "test", str(cases), "--policy-dir", str(candidate))
    failing = [line for line in out.splitlines() if line.startswith("FAIL  ")]
    assert code == 1 and len(failing) == 5
    assert out.strip().endswith(f"4 of 9 case(s) pass under {candidate}")


async def test_an_invalid_candidate_or_case_file_is_exit_2(
    env: WorkflowEnvironment, harness: Harness, tmp_path: Path
) -> None:
    broken = _policies(tmp_path / "broken")
    (broken / "tools.cedar").write_text("permit (principal, action, resource) when { nonsense };")
    cli = _cli_env(env, harness)
    code, _, err = await orga("policy", "what-if", str(broken), "--since", "1h", env=cli)
    assert code == 2 and "the candidate policies are invalid" in err
    cases = tmp_path / "cases.jsonl"
    cases.write_text('# a comment\n{"action": {"kind": "call_tool"}, "expect": "maybe"}\n')
    code, _, err = await orga("policy", "test", str(cases), "--policy-dir", str(POLICY_EXAMPLES))
    assert code == 2 and "cases.jsonl:2: not a policy case (expect:" in err
    cases.write_text('{"action": {"kind": "launch_missiles"}, "expect": "deny"}\n')
    code, _, err = await orga("policy", "test", str(cases), "--policy-dir", str(POLICY_EXAMPLES))
    assert code == 2 and "cases.jsonl:1: not a policy case (action: holds no action" in err
    code, _, err = await orga("policy", "what-if", str(POLICY_EXAMPLES), "--since", "soon")
    assert code == 2 and "invalid --since 'soon'" in err


async def test_a_case_asks_as_the_gate_does_and_names_each_flip() -> None:
    gate = CedarGate(POLICY_EXAMPLES)
    web = PolicyCase(
        action={"kind": "call_tool", "tool": "web_fetch", "arguments": '{"url": "https://x"}'},
        expect="require_approval",
    )
    assert (await ask_again(gate, web.asked())).decision == "require_approval"
    # The default checks' approval joins an engine's allow, as the gate joins them.
    add = PolicyCase(
        action={"kind": "call_tool", "tool": "add", "arguments": '{"a": 1, "b": 1}'},
        default="require_approval",
        expect="require_approval",
    )
    assert (await ask_again(gate, add.asked())).decision == "require_approval"
    # Late in a loop's budget the ceiling forbids every call.
    late = add.model_copy(update={"default": "allow", "tokens_used": 60_000, "expect": "deny"})
    assert (await ask_again(gate, late.asked())).reason.startswith("this agent has used its token")
    allowed = await ask_again(gate, add.model_copy(update={"default": "allow"}).asked())
    assert flip("deny", None, allowed) == "deny→allow"
    assert flip("allow", None, allowed) is None
    assert flip("modify", '{"a": 1}', allowed) == "modification changed"
    assert flip("require_approval", None, allowed) == "approval no longer needed"
    record = AskedPolicy(engine="cedar", action={}, decision="allow")
    with pytest.raises(InvalidConfig, match="holds no action"):  # said, not guessed
        await ask_again(gate, record)

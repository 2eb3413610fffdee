"""The Cedar gate, evaluated by cedarpy (no stand-in), over examples/policies and broken sets."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import cedarpy
import pytest

from orga.activities.policy import PolicyActivities
from orga.contracts.errors import InvalidConfig
from orga.contracts.inference import Usage
from orga.contracts.policy import AncestorGate, PolicyAction, PolicyRequest
from orga.gates.cedar import SCHEMA_FILE, CedarGate
from orga.gates.whatif import ask_again, flip
from orga.tools.sdk import ToolRegistry, tool
from tests.helpers import POLICY_EXAMPLES
from tests.sample_tools import explode


def request(
    *actions: PolicyAction, agent: str = "agent", iteration: int = 3, tokens: int = 10
) -> PolicyRequest:
    return PolicyRequest(
        mode="cedar",
        agent_id=agent,
        workflow_id="w",
        iteration=iteration,
        usage=Usage(total_tokens=tokens),
        advertised=["file_read", "web_fetch", "add", "explode"],
        actions=list(actions),
    )


def call(tool: str, **arguments: object) -> PolicyAction:
    return PolicyAction(
        kind="call_tool", call_id=f"c-{tool}", tool=tool, arguments=json.dumps(arguments)
    )


@pytest.fixture(scope="module")
def gate() -> CedarGate:
    return CedarGate(POLICY_EXAMPLES)


def test_permit_forbid_approval_and_context_conditions(gate: CedarGate) -> None:
    actions = [
        call("file_read", path="docs/guide.md"),
        call("file_read", path="docs/secret-plans.md"),
        call("file_read", path="src/main.py"),
        call("web_fetch", url="https://example.org"),
        call("add", a=1, b=2),
        call("explode", reason="x"),
    ]
    decisions = gate.decide(actions, request(*actions))
    assert [d.decision for d in decisions] == [
        "modify",
        "deny",
        "deny",
        "require_approval",
        "allow",
        "deny",
    ]
    assert decisions[0].policy_ids == ["read-docs"]
    assert json.loads(decisions[0].arguments or "") == {"path": "docs/guide.md", "max_chars": 20000}
    # forbid overrides permit, and its @reason is the feedback the model reads
    assert decisions[1].policy_ids == ["no-secrets"]
    assert decisions[1].reason.startswith("files whose name mentions a secret are never read")
    assert decisions[2].reason == "no policy permits this action"
    assert decisions[3].policy_ids == ["fetch-needs-approval"]
    assert decisions[5].policy_ids == []


def test_loop_facts_in_context(gate: CedarGate) -> None:
    action = call("add", a=1, b=2)
    [decision] = gate.decide([action], request(action, tokens=60_000))
    assert decision.decision == "deny" and decision.policy_ids == ["token-ceiling"]
    respond = PolicyAction(kind="respond")
    [early] = gate.decide([respond], request(respond, agent="careful", iteration=1))
    [late] = gate.decide([respond], request(respond, agent="careful", iteration=2))
    [other] = gate.decide([respond], request(respond, agent="bold", iteration=1))
    assert early.decision == "deny" and "at least one reasoning step" in early.reason
    assert late.decision == "allow" and other.decision == "allow"


def test_type_errors_fail_closed_where_no_schema_would_allow(
    gate: CedarGate, tmp_path: Path
) -> None:
    """A forbid whose condition hits a type error: without the schema cedarpy skips it and
    allows; orga always passes the schema, so the request is denied."""
    policies = (
        'permit(principal, action == Action::"call_tool", resource);\n'
        'forbid(principal, action == Action::"call_tool", resource)\n'
        "when { context.arguments has max_chars && context.arguments.max_chars > 100 };"
    )
    shutil.copy(POLICY_EXAMPLES / SCHEMA_FILE, tmp_path / SCHEMA_FILE)
    (tmp_path / "p.cedar").write_text(policies)
    strict = CedarGate(tmp_path)
    action = call("file_read", path="x", max_chars="5000")  # a string where the schema says Long
    cedar_request = {
        "principal": 'Agent::"agent"',
        "action": 'Action::"call_tool"',
        "resource": 'Tool::"file_read"',
        "context": {
            "arguments": {"path": "x", "max_chars": "5000"},
            "iteration": 1,
            "tokens_used": 0,
        },
    }
    assert cedarpy.is_authorized(cedar_request, policies, []).decision == cedarpy.Decision.Allow
    [decision] = strict.decide([action], request(action))
    assert decision.decision == "deny"
    assert "fail closed" in decision.reason


def test_undeclared_arguments_are_left_out_of_the_context(gate: CedarGate) -> None:
    action = call("file_read", path="docs/a.md", encoding="utf-8")
    [decision] = gate.decide([action], request(action))
    assert decision.decision == "modify"
    assert json.loads(decision.arguments or "")["encoding"] == "utf-8"  # kept for the tool


def test_modify_arguments_must_be_a_json_object(tmp_path: Path) -> None:
    shutil.copy(POLICY_EXAMPLES / SCHEMA_FILE, tmp_path / SCHEMA_FILE)
    (tmp_path / "p.cedar").write_text(
        '@modify_arguments("[1]")\npermit(principal, action == Action::"call_tool", resource);'
    )
    with pytest.raises(InvalidConfig, match="must be a JSON object"):
        CedarGate(tmp_path)


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({"bad.cedar": "permit(principal, action, resource"}, "'bad.cedar' does not parse"),
        (
            {"typo.cedar": 'permit(principal, action == Action::"cal_tool", resource);'},
            "typo.cedar",
        ),
        (
            {
                "types.cedar": "permit(principal, action, resource) "
                "when { context.arguments.path > 3 };"
            },
            "types.cedar",
        ),
    ],
)
def test_invalid_policy_sets_refuse_to_load(
    tmp_path: Path, files: dict[str, str], message: str
) -> None:
    shutil.copy(POLICY_EXAMPLES / SCHEMA_FILE, tmp_path / SCHEMA_FILE)
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    with pytest.raises(InvalidConfig, match=message):
        CedarGate(tmp_path)


def test_a_schema_is_required(tmp_path: Path) -> None:
    (tmp_path / "p.cedar").write_text("permit(principal, action, resource);")
    with pytest.raises(InvalidConfig, match=r"no schema\.cedarschema\.json"):
        CedarGate(tmp_path)


def test_policy_hash_changes_with_the_policies(tmp_path: Path) -> None:
    shutil.copytree(POLICY_EXAMPLES, tmp_path / "p")
    first = CedarGate(tmp_path / "p").policy_hash
    (tmp_path / "p" / "extra.cedar").write_text(
        'permit(principal, action == Action::"respond", resource);'
    )
    assert CedarGate(tmp_path / "p").policy_hash != first


async def test_default_checks_run_before_cedar(gate: CedarGate) -> None:
    activities = PolicyActivities(registry=ToolRegistry([explode]), cedar=gate)
    bad = PolicyAction(kind="call_tool", call_id="1", tool="explode", arguments='{"reason": 5}')
    unknown = PolicyAction(kind="call_tool", call_id="2", tool="rm", arguments="{}")
    result = await activities.evaluate_policy(
        request(bad, unknown).model_copy(update={"advertised": ["explode"]})
    )
    assert result.engine == "cedar" and result.policy_hash == gate.policy_hash
    assert [d.policy_ids for d in result.decisions] == [
        ["default.arguments"],
        ["default.advertised"],
    ]


async def test_cedar_mode_without_policies_denies_everything() -> None:
    activities = PolicyActivities(registry=ToolRegistry([explode]))
    result = await activities.evaluate_policy(request(PolicyAction(kind="respond")))
    assert result.decisions[0].decision == "deny"
    assert "ORGA_POLICY_DIR" in result.decisions[0].reason


async def test_a_delegated_loop_passes_every_gate_up_its_tree(gate: CedarGate) -> None:
    """A child under the ``default`` gate whose parent ran under Cedar: the parent's policies
    judge each call too, as the parent's agent; a deny wins, then an approval, then a rewrite.
    An ancestor engine this worker lacks denies (fail closed)."""

    @tool
    def file_read(path: str, max_chars: int = 1_000) -> str:
        """Read a file."""
        return path[:max_chars]

    @tool
    def web_fetch(url: str) -> str:
        """Fetch a page."""
        return url

    @tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    registry = ToolRegistry([file_read, web_fetch, add])
    activities = PolicyActivities(registry=registry, cedar=gate)
    child = request(
        call("file_read", path="docs/secret-plans.md"),
        call("web_fetch", url="https://example.com/"),
        call("file_read", path="docs/guide.md", max_chars=25_000),
        call("add", a=1, b=2),
    ).model_copy(
        update={"mode": "default", "ancestors": [AncestorGate(agent_id="lead", policy="cedar")]}
    )
    result = await activities.evaluate_policy(child)
    secret, fetch, guide, arithmetic = result.decisions
    assert secret.decision == "deny" and secret.policy_ids == ["no-secrets"]
    assert "by the cedar gate of 'lead', up the delegation tree" in secret.reason
    assert fetch.decision == "require_approval" and "fetch-needs-approval" in fetch.policy_ids
    assert guide.decision == "modify" and '"max_chars": 20000' in (guide.arguments or "")
    assert arithmetic.decision == "allow"
    assert arithmetic.policy_ids == ["default.allow", "arithmetic"]
    assert result.engine == "default" and result.policy_hash == gate.policy_hash
    # What the lead's gate was asked is recorded with each decision, and asked again (what-if)
    # the same policies decide the same, joined as the tree joins them.
    for decision in result.decisions:
        [above] = decision.asked_above
        assert above.engine == "cedar" and above.inherits and above.agent_id == "lead"
        assert above.request["principal"] == {"type": "Agent", "id": "lead"}
        again = await ask_again(gate, above)
        assert flip(above.decision, above.arguments, again) is None, (above, again)
        assert again.decision == decision.decision
    alone = await activities.evaluate_policy(child.model_copy(update={"ancestors": []}))
    assert [d.decision for d in alone.decisions] == ["allow", "allow", "allow", "allow"]
    unknown = child.model_copy(update={"ancestors": [AncestorGate(agent_id="x", policy="opa")]})
    denied = await activities.evaluate_policy(unknown)
    assert {d.decision for d in denied.decisions} == {"deny"}
    assert "ORGA_OPA_URL" in denied.decisions[0].reason

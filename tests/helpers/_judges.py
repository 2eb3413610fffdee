"""Judges in the tests (issue 67): agents files that seat them, the loops they judge, and alice,
who decides what they leave to a person."""

from __future__ import annotations

import json
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from temporalio.client import WorkflowHandle

from orga.contracts.approvals import PendingApproval
from orga.contracts.journal import Journal
from orga.desk.approvals import approve
from orga.runtime.approver_keys import generate_key, public_key_of
from orga.scripted.server import Turn
from tests.harness import Harness
from tests.helpers._waiting import eventually, pending

ALICE = Ed25519PrivateKey.generate()
"""Alice's key, enrolled in group ``finance`` by the agents files below."""

JUDGES_DECIDE_SMALL = """
@id("judges-decide-small-transfers")
@reason("judges decide transfers of up to 5000; people decide the rest")
forbid (principal in Group::"judges", action in [Action::"approve", Action::"deny"], resource)
when { context.arguments has amount && context.arguments.amount > 5000 };
"""
"""Judges may decide transfers of up to 5 000 (with ``PEOPLE_DECIDE``)."""

JUDGES = {
    "refunds": "small_refunds",
    "fails": "fails",
    "prose": "prose",
    "wrong": "wrong_json",
    "unsure": "unsure",
    "held": "held",
    "strict": "strict_refunds",
    "cautious": "cautious_refunds",
}


def agents_with_judges(tmp_path: Path, **options: str) -> Path:
    """An agent per judge (named as it), each judge with its own key enrolled in group
    ``judges``, and alice (finance) to decide what they leave to a person. ``options``: more
    lines for a judge's table (``refunds='shadow = true'``)."""
    lines: list[str] = []
    for judge, function in JUDGES.items():
        key = generate_key(tmp_path / f"{judge}.pem")
        lines += [
            f"[agents.{judge}]",
            'tools = ["transfer"]',
            f'judge = "{judge}"',
            f"[judges.{judge}]",
            f'code = "tests.sample_judges:{function}"',
            f'key_file = "{judge}.pem"',
            options.get(judge, ""),
            f"[approvers.{judge}]",
            f'key = "{public_key_of(key)}"',
            'groups = ["judges"]',
        ]
    lines += ["[approvers.alice]", f'key = "{public_key_of(ALICE)}"', 'groups = ["finance"]']
    path = tmp_path / "agents.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def pay(harness: Harness, amount: int) -> str:
    return harness.new_model(
        [Turn(tool_calls=[("transfer", {"amount": amount, "to": "eve"})]), Turn(text="sent")]
    )


async def judged(handle: WorkflowHandle[object, object]) -> PendingApproval:
    """The waiting call once the judge's opinion is shown with it."""

    async def probe() -> PendingApproval | None:
        waiting = (await pending(handle)).pending_approvals
        return waiting[0] if waiting and waiting[0].judge is not None else None

    return await eventually(probe, f"the judge's opinion on {handle.id}")


async def by_alice(
    harness: Harness, handle: WorkflowHandle[object, object], approved: bool
) -> None:
    [waiting] = (await pending(handle)).pending_approvals
    await approve(
        harness.client, handle.id, waiting.call_id, approved=approved, reason=None,
        approver="alice", key=ALICE,
    )  # fmt: skip


async def journal_of(handle: WorkflowHandle[object, object]) -> Journal:
    return await handle.query("journal", result_type=Journal)


CRITERIA = "Approve transfers under 10000 cents to known payees. Escalate anything else."


def agents_with_a_model_judge(tmp_path: Path, judge_model: str, *more: str) -> Path:
    """Agent ``payer`` (transfers), judged by ``mj``: a model judge answering as agent
    ``judge-agent`` on ``judge_model``; alice decides what it leaves to a person."""
    key = generate_key(tmp_path / "mj.pem")
    lines = [
        "[agents.payer]",
        'tools = ["transfer"]',
        'judge = "mj"',
        "[agents.judge-agent]",
        'provider = "openai"',
        f'model = "{judge_model}"',
        "[judges.mj]",
        'agent = "judge-agent"',
        f"criteria = {json.dumps(CRITERIA)}",
        'key_file = "mj.pem"',
        *more,
        "[approvers.mj]",
        f'key = "{public_key_of(key)}"',
        'groups = ["judges"]',
        "[approvers.alice]",
        f'key = "{public_key_of(ALICE)}"',
        'groups = ["finance"]',
    ]
    path = tmp_path / "agents.toml"
    path.write_text("\n".join(lines) + "\n")
    return path

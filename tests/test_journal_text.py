"""How a journal entry reads in ``orga journal`` (text): what a reviewer needs is on the line."""

from __future__ import annotations

from datetime import UTC, datetime

from orga.cli.journal_text import render_entry
from orga.contracts.journal import ApprovalDecided


def test_an_approval_with_edits_shows_the_arguments_before_and_after() -> None:
    """Issue 65: only ``--json`` showed an approval's edit, the part of the decision a reviewer
    most needs; the text line now says what the call waited with and what it runs with."""
    decided = ApprovalDecided(
        seq=7,
        at=datetime(2026, 12, 6, tzinfo=UTC),
        agent_id="agent",
        iteration=1,
        call_id="i1_call_1_0",
        tool="transfer",
        approved=True,
        approver="ops",
        source="update",
        arguments='{"amount": 900, "to": "bo"}',
        edited_arguments='{"amount": 300, "to": "bo"}',
    )
    line = render_entry(decided)
    assert 'edited {"amount": 900, "to": "bo"} → {"amount": 300, "to": "bo"}' in line, line
    plain = decided.model_copy(update={"arguments": None, "edited_arguments": None})
    assert "edited" not in render_entry(plain)

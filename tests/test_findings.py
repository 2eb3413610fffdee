"""Open findings, each written down as a test that fails (``xfail(strict=True)``): when one
is fixed, its test passes, the strict marker fails the suite, and whoever fixed it removes the
marker — the finding is then a test like any other."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory

from orga.plugin import replayer
from tests.harness import TEST_STORE

FINDINGS = Path(__file__).resolve().parent / "findings"


@pytest.mark.xfail(strict=True, reason="open: a resolution signalled into its escalation's task")
async def test_an_escalation_resolved_by_a_signal_in_the_task_that_raised_it_replays() -> None:
    """A loop's call whose attempt was lost raised an escalation in the workflow task that a
    restarted worker took over; a query, answered from that worker's memory, listed the
    escalation before the task completed, and the person's ``resolve_escalation`` signal was
    recorded before the task's start (``test_every_instant.py``, one CI run in a few). The
    worker ran the escalation, then the signal: it resolved it (two upserts: waiting, then
    running). Replay hands the workflow both in one activation, the signal first (Python's
    SDK applies signals before activity results): "not pending", ignored, and the history no
    longer replays (``No command scheduled for event … UpsertWorkflowSearchAttributes``), nor
    answers queries. Keeping such a signal for the escalation that the same task raises was
    tried: it resolved it, but the upserts then came in another order than the worker's."""
    path = FINDINGS / "escalation_signal_before_its_task.json"
    history = WorkflowHistory.from_json("finding", path.read_text())
    result = await replayer(TEST_STORE).replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None, result.replay_failure

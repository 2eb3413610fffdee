"""Every committed history replays with today's workflows and data converter."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory

from orga.plugin import replayer
from tests.harness import TEST_STORE
from tests.scenarios import SCENARIOS

HISTORIES = Path(__file__).resolve().parent / "histories"
FILES = sorted(HISTORIES.glob("*.json"))


def test_every_scenario_has_a_history() -> None:
    recorded = {path.name.split(".")[0] for path in FILES}
    assert recorded == set(SCENARIOS)
    assert len([p for p in FILES if p.name.startswith("continue_as_new.")]) >= 2


def load(path: Path) -> WorkflowHistory:
    text = path.read_text()
    started = json.loads(text)["events"][0]["workflowExecutionStartedEventAttributes"]
    workflow_id = started.get("workflowId") or f"history-{path.name.split('.')[0]}"
    return WorkflowHistory.from_json(workflow_id, text)


@pytest.mark.parametrize("strict", [False, True], ids=["shared-helpers", "strict"])
@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
async def test_replays(path: Path, strict: bool) -> None:
    """As a worker runs it (helpers shared across runs) and in the strict sandbox (helpers
    re-imported and checked by the sandbox)."""
    history = load(path)
    replaying = replayer(TEST_STORE, strict=strict)
    result = await replaying.replay_workflow(history, raise_on_replay_failure=True)
    assert result.replay_failure is None


FOUND = sorted((HISTORIES / "found").glob("*.json"))


@pytest.mark.parametrize("path", FOUND, ids=[p.stem for p in FOUND])
async def test_histories_found_in_runs_replay(path: Path) -> None:
    """Histories kept from runs where one failed to replay (``found/``; the harness saves any
    to ``$TMP/orga-failed-replays/``), each fixed since. ``escalation_signal_before_its_task``:
    a ``resolve_escalation`` signal recorded before the workflow task that raised its escalation
    (``test_answer_in_flight.py``)."""
    assert FOUND
    result = await replayer(TEST_STORE, strict=True).replay_workflow(
        load(path), raise_on_replay_failure=True
    )
    assert result.replay_failure is None

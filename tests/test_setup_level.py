"""A loop set up at ``SETUP_LEVEL`` takes the ``call-receipts`` change without a patch marker,
and every older history replays as it was recorded (``orga.workflows.shared.patches.taken``).

Temporal's SDK writes a marker and a ``TemporalChangeVersion`` upsert — two events and a
visibility write — in every run that asks ``workflow.patched``; a loop's setup already records
which changes its worker has, so a new loop asks for none on its common path."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from temporalio.client import WorkflowHistory

from orga.cli.capture import Capture
from orga.contracts.setup import SETUP_LEVEL
from orga.plugin import replayer
from orga.workflows.shared.patches import CALL_RECEIPTS, LEVELS
from tests.harness import TEST_STORE

HISTORIES = Path(__file__).resolve().parent / "histories"


def _events(name: str) -> list[dict[str, Any]]:
    return json.loads((HISTORIES / f"{name}.1.json").read_text())["events"]


def _patches(events: list[dict[str, Any]]) -> list[str]:
    """The patch ids the run's markers record."""
    found: list[str] = []
    for event in events:
        marker = event.get("markerRecordedEventAttributes")
        if marker is not None and marker["markerName"] == "core_patch":
            for payload in marker["details"]["patch-data"]["payloads"]:
                found.append(json.loads(_decoded(payload["data"]))["id"])
    return found


def _decoded(data: str) -> str:
    return base64.b64decode(data).decode()


async def _audited_kinds(name: str) -> list[str]:
    """The kinds on the audit chain a replay of the history rebuilds."""
    events = _events(name)
    started = events[0]["workflowExecutionStartedEventAttributes"]
    history = WorkflowHistory.from_json(
        started.get("workflowId") or f"history-{name}", (HISTORIES / f"{name}.1.json").read_text()
    )
    instances: list[Any] = []
    result = await replayer(TEST_STORE, interceptors=[Capture(instances)]).replay_workflow(
        history, raise_on_replay_failure=True
    )
    assert result.replay_failure is None
    return [entry.kind for entry in instances[-1].audit().entries]


def test_receipts_are_within_this_releases_level() -> None:
    assert LEVELS[CALL_RECEIPTS] <= SETUP_LEVEL


async def test_a_loop_set_up_at_the_level_keeps_receipts_without_a_marker() -> None:
    events = _events("receipts_by_setup_level")
    assert CALL_RECEIPTS not in _patches(events)
    upserts = [e for e in events if "upsertWorkflowSearchAttributesEventAttributes" in e]
    assert all("TemporalChangeVersion" not in json.dumps(e) for e in upserts)
    assert "CallReceipt" in await _audited_kinds("receipts_by_setup_level")


async def test_a_loop_set_up_before_levels_replays_as_recorded() -> None:
    """Set up without a level: one recorded after receipts (its marker says so) keeps them, one
    recorded before them replays without any."""
    assert CALL_RECEIPTS in _patches(_events("unknown_outcome"))
    assert "CallReceipt" in await _audited_kinds("unknown_outcome")
    assert CALL_RECEIPTS not in _patches(_events("tools"))
    assert "CallReceipt" not in await _audited_kinds("tools")

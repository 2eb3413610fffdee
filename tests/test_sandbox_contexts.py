"""orga's sandboxed instance answers Temporal's per-payload questions directly
(``orga.worker.sandbox._Instance``): for every payload of every activation Temporal asks which
serialisation context and which external-store context apply, and the stock instance answers
by running a line of code inside the sandbox. These tests hold orga's answers to the stock
ones on real loops: tool calls, a payload large enough for the store, a delegated child."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from temporalio.worker.workflow_sandbox import _runner as stock  # pyright: ignore[reportPrivateUsage]

import orga.worker.sandbox as sandbox
from orga.contracts.state import LoopResult
from orga.runtime.converter import THRESHOLD
from orga.scripted.server import Turn
from tests.harness import Harness, scripted_settings
from tests.helpers import agents_file

asked: list[str] = []
"""Each question and whether orga's answer matched the stock one."""
direct: list[bool] = []
"""For each question: whether orga answered it from the workflow instance (not the sandbox)."""


class _Checked(sandbox._Instance):  # pyright: ignore[reportPrivateUsage]
    def get_serialization_context(self, command_info: Any) -> Any:
        direct.append(self._inner() is not None)
        ours = super().get_serialization_context(command_info)
        theirs = stock._Instance.get_serialization_context(self, command_info)  # pyright: ignore[reportPrivateUsage]
        asked.append(f"serialization {'same' if ours == theirs else f'{ours} != {theirs}'}")
        return theirs

    def get_external_store_context(self, command_info: Any) -> Any:
        direct.append(self._inner() is not None)
        ours = super().get_external_store_context(command_info)
        theirs = stock._Instance.get_external_store_context(self, command_info)  # pyright: ignore[reportPrivateUsage]
        asked.append(f"store {'same' if ours == theirs else f'{ours} != {theirs}'}")
        return theirs


async def test_orga_answers_each_payloads_contexts_as_the_sandbox_would(
    harness: Harness, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(sandbox, "_Instance", _Checked)
    asked.clear()
    direct.clear()
    long = "4" * (THRESHOLD + 1000)  # an answer large enough for the store
    models = {
        "lead": harness.new_model(
            [
                Turn(tool_calls=[("add", {"a": 2, "b": 3})]),
                Turn(tool_calls=[("delegate", {"agent": "research", "task": "Find it."})]),
                Turn(text=long),
            ]
        ),
        "research": harness.new_model([Turn(text="the figure is 42")]),
        "writer": harness.new_model([Turn(text="unused")]),
    }
    settings = scripted_settings(harness.model, agents_file=agents_file(tmp_path, models))
    async with harness.worker(settings=settings):
        handle = await harness.start("Add, then ask research.", agent_id="lead")
        result: LoopResult = await handle.result()
    assert result.output == long and result.tool_call_count == 2
    assert len(asked) > 20 and {a.split()[0] for a in asked} == {"serialization", "store"}
    assert [a for a in asked if not a.endswith("same")] == []
    assert all(direct) and len(direct) == len(asked)  # every one answered the direct way

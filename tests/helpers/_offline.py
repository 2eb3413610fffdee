"""The offline worker as a user runs it: ``uv run worker.py --scripted`` on a fresh task queue
and data directory, and what its loops called."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from temporalio.testing import WorkflowEnvironment

from tests.harness import replay
from tests.helpers._commands import start_worker
from tests.helpers._waiting import conversation


def offline_env(env: WorkflowEnvironment, tmp_path: Path, **more: str) -> dict[str, str]:
    """A fresh task queue and data directory (store, blobs) for the offline worker and CLI."""
    return {
        "TEMPORAL_ADDRESS": env.client.service_client.config.target_host,
        "ORGA_TASK_QUEUE": f"offline-{uuid.uuid4().hex[:8]}",
        "ORGA_DATA_DIR": str(tmp_path / "data"),
        "OPENROUTER_API_KEY": "",
        "OPENAI_API_KEY": "",
        "ANTHROPIC_API_KEY": "",
        **more,
    }


@asynccontextmanager
async def offline_worker(env: dict[str, str], *args: str) -> AsyncIterator[None]:
    """``uv run worker.py --scripted`` as a user runs it; stopped with Ctrl-C."""
    process, banner = await start_worker({**os.environ, **env}, *args)
    assert "serving the offline scripted model" in banner
    try:
        yield
    finally:
        process.send_signal(signal.SIGINT)
        await asyncio.wait_for(process.communicate(), 60)
        assert process.returncode == 0


async def calls_of(env: WorkflowEnvironment, workflow_id: str) -> list[tuple[str, Any]]:
    """The tool calls a loop made, ``(name, arguments)``; its history replays."""
    handle = env.client.get_workflow_handle(workflow_id)
    messages = await conversation(handle)
    await replay(handle, env.client)
    return [(c.name, json.loads(c.arguments)) for m in messages for c in m.tool_calls]

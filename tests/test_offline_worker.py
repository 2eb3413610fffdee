"""``worker.py --scripted``: the README's main section followed without an API key."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from temporalio.testing import WorkflowEnvironment

from orga.runtime.offline import LABEL, OFFLINE_MODEL, offline_model
from orga.runtime.scripted_model import RecordedRequest
from tests.test_cli import orga

ROOT = Path(__file__).resolve().parent.parent


@asynccontextmanager
async def offline_worker(env: dict[str, str], *args: str) -> AsyncIterator[None]:
    """``uv run worker.py --scripted`` as a user runs it; stopped with Ctrl-C."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(ROOT / "worker.py"),
        *args,
        cwd=ROOT,
        env={**os.environ, **env},
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stderr is not None
    banner = ""
    while "orga worker on" not in banner:  # wait for the worker to say it is up
        line = await asyncio.wait_for(process.stderr.readline(), 60)
        assert line, f"the worker exited: {banner}"
        banner += line.decode()
    assert "serving the offline scripted model" in banner
    try:
        yield
    finally:
        process.send_signal(signal.SIGINT)
        await asyncio.wait_for(process.communicate(), 60)
        assert process.returncode == 0


async def test_run_a_loop_with_the_offline_worker(env: WorkflowEnvironment) -> None:
    queue = f"offline-{uuid.uuid4().hex[:8]}"
    settings = {
        "TEMPORAL_ADDRESS": env.client.service_client.config.target_host,
        "ORGA_TASK_QUEUE": queue,
        "OPENROUTER_API_KEY": "",
        "OPENAI_API_KEY": "",
        "ANTHROPIC_API_KEY": "",
    }
    async with offline_worker(settings, "--scripted"):
        code, out, err = await orga("run", "What is 2+3?", "--tool", "add", env=settings)
        assert code == 0, err
        assert out.startswith(f"{LABEL} 2 + 3 = 5 (by the add tool).")
        assert f"scripted {OFFLINE_MODEL}" in out
        code, out, err = await orga(
            "run", "Say hello", "--provider", "scripted", "--json", env=settings
        )
        assert code == 0, err
        result = json.loads(out)
        assert (result["provider"], result["model"]) == ("scripted", OFFLINE_MODEL)
        assert result["output"].startswith(LABEL)
    # The same through the environment variable instead of the flag.
    async with offline_worker({**settings, "ORGA_PROVIDER": "scripted"}):
        code, out, err = await orga("run", "What is 40+2?", "--tool", "add", env=settings)
        assert code == 0, err
        assert "40 + 2 = 42" in out


def _request(tools: list[dict[str, Any]], messages: list[dict[str, Any]]) -> RecordedRequest:
    return RecordedRequest(
        wire="openai",
        path="/v1/chat/completions",
        headers={},
        body={"model": OFFLINE_MODEL, "tools": tools, "messages": messages},
    )


def test_the_offline_model_fills_arguments_from_the_task() -> None:
    tools = [
        {
            "type": "function",
            "function": {
                "name": "file_read",
                "parameters": {
                    "type": "object",
                    "properties": {"path": {"type": "string"}, "max_chars": {"type": "integer"}},
                    "required": ["path"],
                },
            },
        }
    ]
    task = [{"role": "user", "content": "Summarise docs/guide.md in 300 words"}]
    turn = offline_model(_request(tools, task))
    assert turn.tool_calls == [("file_read", {"path": "docs/guide.md", "max_chars": 300})]
    answered = offline_model(
        _request(
            tools,
            [
                *task,
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {"id": "c1", "type": "function", "function": {"name": "file_read"}}
                    ],
                },
                {"role": "tool", "tool_call_id": "c1", "content": "A guide to orga."},
            ],
        )
    )
    assert answered.text == f"{LABEL} What the tools returned:\n- file_read: A guide to orga."

"""Commands run as a user runs them: ``orga``, ``temporal`` and ``worker.py`` as subprocesses."""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from temporalio.testing import WorkflowEnvironment

from orga.runtime.devserver import temporal_binary
from tests.harness import Harness
from tests.helpers._waiting import eventually

ROOT = Path(__file__).resolve().parent.parent.parent
"""The repository's root."""

ORGA = str(Path(sys.executable).parent / "orga")
"""The ``orga`` executable of this environment."""


async def orga(
    *args: str, env: dict[str, str] | None = None, timeout: float = 90
) -> tuple[int, str, str]:
    """``orga <args>`` with ``env`` over this process's environment: exit code, stdout, stderr."""
    process = await asyncio.create_subprocess_exec(
        ORGA,
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, **(env or {})},
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout)
    return process.returncode or 0, out.decode(), err.decode()


@asynccontextmanager
async def serving(*args: str, env: dict[str, str], announce: str) -> AsyncIterator[str]:
    """``orga <args>`` (a server) running; yields the address it prints after ``announce``."""
    process = await asyncio.create_subprocess_exec(
        ORGA,
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, **env},
    )
    assert process.stdout is not None
    line = (await asyncio.wait_for(process.stdout.readline(), 30)).decode()
    match = re.search(re.escape(announce) + r" (http://\S+)", line)
    assert match, line
    try:
        yield match.group(1)
    finally:
        process.terminate()
        await asyncio.wait_for(process.communicate(), 30)


def on(env: WorkflowEnvironment, harness: Harness) -> dict[str, str]:
    """The environment that points ``orga`` at this test's server and task queue."""
    return {
        "TEMPORAL_ADDRESS": env.client.service_client.config.target_host,
        "ORGA_TASK_QUEUE": harness.task_queue,
    }


async def inbox(env: WorkflowEnvironment, harness: Harness, expect: int) -> list[dict[str, Any]]:
    """``orga pending --json`` once it lists ``expect`` items of this test's workflows."""
    ours = {h.id for h in harness.handles}

    async def probe() -> list[dict[str, Any]] | None:
        code, out, err = await orga("pending", "--json", env=on(env, harness))
        assert code == 0, err
        items = [i for i in json.loads(out) if i["workflow_id"] in ours]
        return items if len(items) >= expect else None

    return await eventually(probe, f"{expect} inbox items")


async def temporal(env: WorkflowEnvironment, *args: str) -> tuple[int, str, str]:
    """The plain ``temporal`` CLI against the test server: exit code, stdout, stderr."""
    process = await asyncio.create_subprocess_exec(
        str(temporal_binary()),
        *args,
        "--address",
        env.client.service_client.config.target_host,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout=60)
    return process.returncode or 0, out.decode(), err.decode()


async def start_worker(env: dict[str, str], *args: str) -> tuple[asyncio.subprocess.Process, str]:
    """``uv run worker.py <args>`` with exactly ``env``, once it says it is up: the process (its
    stderr still open: keep reading it) and what it logged until then."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(ROOT / "worker.py"),
        *args,
        cwd=ROOT,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stderr is not None
    banner = ""
    while "orga worker on" not in banner:  # wait for the worker to say it is up
        line = await asyncio.wait_for(process.stderr.readline(), 60)
        assert line, f"the worker exited ({await process.wait()}): {banner}"
        banner += line.decode()
    return process, banner


@asynccontextmanager
async def worker_process(env: dict[str, str]) -> AsyncIterator[asyncio.subprocess.Process]:
    """``python worker.py`` in its own process (``env`` over this one's), ready when it says so;
    killed afterwards if it still runs."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "worker.py",
        cwd=ROOT,
        env={**os.environ, **env},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    assert process.stdout is not None
    lines: list[str] = []
    while True:
        line = (await asyncio.wait_for(process.stdout.readline(), 30)).decode()
        lines.append(line)
        if "orga worker on" in line:
            break
        if not line:
            raise AssertionError("the worker exited:\n" + "".join(lines))
    drain = asyncio.create_task(process.stdout.read())
    try:
        yield process
    finally:
        if process.returncode is None:
            process.kill()
        await process.wait()
        drain.cancel()

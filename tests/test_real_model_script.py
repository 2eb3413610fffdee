"""``examples/real_model.py``, the script a user points at their own OpenAI-compatible server,
run here against an OpenAI-compatible server on 127.0.0.1 (the offline scripted model, over
HTTP, standing in for llama.cpp's): its thread calls a tool in each of two turns, its typed
loop calls its tool and its answer validates, and it says so."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from orga.scripted.offline import OFFLINE_MODEL, offline_model
from orga.scripted.server import ScriptedModelServer
from tests.harness import TEST_STORE

ROOT = Path(__file__).resolve().parent.parent


async def test_the_real_model_script_reports_each_step(env: WorkflowEnvironment) -> None:
    with ScriptedModelServer() as server:
        server.fallback(offline_model)
        variables = {
            **os.environ,
            "TEMPORAL_ADDRESS": env.client.service_client.config.target_host,
            "ORGA_STORE_URL": TEST_STORE.url,
            "OPENAI_BASE_URL": server.openai_base_url,
            "OPENAI_MODEL": OFFLINE_MODEL,
        }
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "examples.real_model", cwd=ROOT, env=variables,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await asyncio.wait_for(process.communicate(), timeout=90)
    text = out.decode()
    assert process.returncode == 0, text + err.decode()
    assert "ok   turn 1 called add" in text and "ok   turn 2 called add" in text
    assert "ok   the typed loop called add" in text and "ok   the typed answer validated" in text
    assert '"sum":42' in text.replace(" ", "")

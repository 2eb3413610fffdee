"""``worker.py --scripted``: the README's main section followed without an API key."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from typing import Any

from temporalio.testing import WorkflowEnvironment

from orga.contracts.config import LoopConfig, LoopInput
from orga.contracts.conversation import Message
from orga.contracts.journal import Journal, KnowledgeRecalled, KnowledgeStored
from orga.contracts.knowledge import KnowledgeConfig
from orga.contracts.state import LoopResult, LoopState
from orga.scripted.offline import LABEL, OFFLINE_MODEL, offline_model
from orga.scripted.server import RecordedRequest
from tests.harness import replay
from tests.helpers import TIME, calls_of, offline_env, offline_worker, orga

ROOT = Path(__file__).resolve().parent.parent


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
    task = [{"role": "user", "content": "Read the first 300 characters of docs/guide.md"}]
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


# ---- the README's examples, with what the tools returned in the answers -----------------


async def test_readme_file_and_time_examples_answer_with_what_the_tools_returned(
    env: WorkflowEnvironment, tmp_path: Path
) -> None:
    files = tmp_path / "files"
    files.mkdir()
    (files / "README.md").write_text("# Tea house handbook\n\nHow we brew, and for whom.\n")
    servers = tmp_path / "mcp.toml"
    servers.write_text(TIME)
    settings = offline_env(env, tmp_path, ORGA_FILE_ROOT=str(files), ORGA_MCP_SERVERS=str(servers))
    async with offline_worker(settings, "--scripted"):
        read_id, time_id = f"read-{uuid.uuid4().hex[:8]}", f"time-{uuid.uuid4().hex[:8]}"
        code, out, err = await orga(
            "run", "Summarise README.md", "--tool", "file_read", "--id", read_id, env=settings
        )
        assert code == 0, err
        assert out.startswith(f"{LABEL} What the tools returned:\n- file_read: # Tea house")
        assert "How we brew, and for whom." in out
        assert await calls_of(env, read_id) == [("file_read", {"path": "README.md"})]

        code, out, err = await orga(
            "run",
            "What time is it in UTC?",
            "--tool",
            "time__get_current_time",
            "--id",
            time_id,
            env=settings,
        )
        assert code == 0, err
        assert out.startswith(f"{LABEL} What the tools returned:\n- time__get_current_time:")
        assert "timezone: UTC" in out
        assert re.search(r"datetime: \d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\+00:00", out), out
        assert await calls_of(env, time_id) == [("time__get_current_time", {"timezone": "UTC"})]


async def test_knowledge_is_recalled_and_stored_only_when_asked(
    env: WorkflowEnvironment, tmp_path: Path
) -> None:
    settings = offline_env(env, tmp_path)
    code, _, err = await orga("knowledge", "add", "-a", "support", "ann prefers tea", env=settings)
    assert code == 0, err

    async def ask(agent: str, prompt: str) -> tuple[LoopResult, Journal]:
        workflow_id = f"knowledge-{uuid.uuid4().hex[:8]}"
        handle = await env.client.start_workflow(
            "ReasoningLoop",
            LoopInput(
                messages=[Message(role="user", content=prompt)],
                config=LoopConfig(agent_id=agent, knowledge=KnowledgeConfig()),
            ),
            id=workflow_id,
            task_queue=settings["ORGA_TASK_QUEUE"],
            result_type=LoopResult,
        )
        result = await handle.result()
        journal = await handle.query("journal", result_type=Journal)
        await replay(handle, env.client)
        return result, journal

    async def facts(agent: str) -> list[str]:
        code, out, err = await orga("knowledge", "list", "-a", agent, "--json", env=settings)
        assert code == 0, err
        return [item["content"] for item in json.loads(out)]

    async with offline_worker(settings, "--scripted"):
        # A question: the fact is recalled and reported; nothing is written.
        result, journal = await ask("support", "What does ann prefer to drink?")
        assert result.output.startswith(f"{LABEL} What the tools returned:\n- recall_knowledge:")
        assert "ann prefers tea" in result.output
        [recalled] = [e for e in journal.entries if isinstance(e, KnowledgeRecalled)]
        assert (recalled.query, recalled.found) == ("ann prefer drink", 1)
        assert not [e for e in journal.entries if isinstance(e, KnowledgeStored)]
        assert await facts("support") == ["ann prefers tea"]

        # Asked to remember: exactly one fact, as subject, predicate and object.
        result, journal = await ask("notes", "Remember that ann prefers tea")
        assert result.output.startswith(f"{LABEL} What the tools returned:\n- store_knowledge:")
        assert "ann prefers tea" in result.output
        stored = [e for e in journal.entries if isinstance(e, KnowledgeStored)]
        assert len(stored) == 1 and stored[0].created
        assert not [e for e in journal.entries if isinstance(e, KnowledgeRecalled)]
        assert await facts("notes") == ["ann prefers tea"]
        assert await facts("support") == ["ann prefers tea"]  # the other agent's is untouched


async def test_readme_many_agents_example_shows_a_child_using_its_tool(
    env: WorkflowEnvironment, tmp_path: Path
) -> None:
    """The README's many-agents commands as written, with the shipped examples/agents.toml."""
    settings = offline_env(env, tmp_path, ORGA_AGENTS=str(ROOT / "examples" / "agents.toml"))
    async with offline_worker(settings, "--scripted"):
        code, out, err = await orga(
            "run", "Ask research to add 2 and 3", "--agent", "lead", "--json", env=settings
        )
        assert code == 0, err
        result = json.loads(out)
        assert (
            "- delegate: [offline scripted model] 2 + 3 = 5 (by the add tool)" in (result["output"])
        )
        parent = env.client.get_workflow_handle(result["workflow_id"])
        state = await parent.query("state", result_type=LoopState)
        [delegation] = state.delegations
        assert (delegation.agent, delegation.status) == ("research", "completed")
        assert state.model_calls == state.iteration + 2  # the child called add, then answered
        child_calls = await calls_of(env, delegation.workflow_id)
        await replay(parent, env.client)
    assert child_calls == [("add", {"a": 2, "b": 3})]  # the child used its own tool

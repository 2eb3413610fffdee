"""The ``orga`` command, run as a user runs it: a subprocess against a real server."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import stat
import uuid
from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from orga.runtime.connect import connect, ensure_search_attributes
from orga.runtime.settings import Settings
from orga.scripted.server import Turn
from orga.server.devserver import address_answers, frontend_healthy
from tests.harness import Harness, scripted_settings
from tests.helpers import ORGA, eventually, on, orga

EXAMPLE_TASK = Path(__file__).resolve().parent.parent / "examples" / "tasks" / "order.json"


async def test_run_state_journal_list(env: WorkflowEnvironment, harness: Harness) -> None:
    model = harness.new_model([Turn(tool_calls=[("add", {"a": 2, "b": 3})]), Turn(text="It is 5.")])
    agent = f"cli-{uuid.uuid4().hex[:6]}"
    async with harness.worker(settings=scripted_settings(harness.model)):
        code, out, err = await orga(
            "run",
            "What is 2+3?",
            "--tool",
            "add",
            "--provider",
            "openai",
            "--model",
            model,
            "--agent-id",
            agent,
            env=on(env, harness),
        )
        assert code == 0, err
        assert out.startswith("It is 5.")
        assert "end_turn after 2 iteration(s), 1 tool call(s), 30 tokens" in out
        workflow_id = err.split("started ")[1].split()[0]
        assert f"/namespaces/default/workflows/{workflow_id}" in err
        harness.handles.append(harness.client.get_workflow_handle(workflow_id))

        code, out, err = await orga("state", workflow_id, env=on(env, harness))
        assert code == 0, err
        assert "status        completed (phase: completed)" in out
        assert "add" in out and "ok" in out

        code, out, err = await orga("state", workflow_id, "--json", env=on(env, harness))
        assert json.loads(out)["tool_call_count"] == 1

        code, out, err = await orga("journal", workflow_id, env=on(env, harness))
        assert code == 0, err
        lines = out.splitlines()
        assert "Started" in lines[0] and "Terminated" in lines[-1]
        assert any("PolicyEvaluated" in line and "allow add" in line for line in lines)

        code, out, err = await orga("journal", workflow_id, "--json", env=on(env, harness))
        assert [json.loads(line)["kind"] for line in out.splitlines()][-1] == "Terminated"

        async def listed() -> list[dict[str, object]] | None:  # visibility is eventually consistent
            code, out, err = await orga("list", "--agent", agent, "--json", env=on(env, harness))
            assert code == 0, err
            rows: list[dict[str, object]] = json.loads(out)
            return rows if rows and rows[0]["status"] == "completed" else None

        rows = await eventually(listed, f"{agent}'s loop listed as completed")
        assert rows[0]["workflow_id"] == workflow_id
        assert rows[0]["iteration"] == 2 and rows[0]["tokens"] == 30


async def test_no_wait_then_follow(env: WorkflowEnvironment, harness: Harness) -> None:
    model = harness.new_model([Turn(text="slow answer", delay=1.0)])
    async with harness.worker(settings=scripted_settings(harness.model)):
        code, out, err = await orga(
            "run", "hi", "--model", model, "--no-wait", "--json", env=on(env, harness)
        )
        assert code == 0, err
        workflow_id = json.loads(out)["workflow_id"]
        harness.handles.append(harness.client.get_workflow_handle(workflow_id))
        code, out, err = await orga("journal", workflow_id, "--follow", env=on(env, harness))
        assert code == 0, err
        assert out.splitlines()[-1].split()[4] == "Terminated"


async def test_clear_errors(env: WorkflowEnvironment, harness: Harness) -> None:
    code, _, err = await orga("run", "x", "--max-iterations", "0", env=on(env, harness))
    assert code == 2
    assert "invalid loop input: max_iterations: Input should be greater than or equal to 1" in err
    assert "Traceback" not in err

    code, _, err = await orga("state", "no-such-loop", env=on(env, harness))
    assert code == 1 and "there is no workflow 'no-such-loop'" in err

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        free = s.getsockname()[1]
    code, _, err = await orga("list", env={"TEMPORAL_ADDRESS": f"127.0.0.1:{free}"}, timeout=60)
    assert code == 1 and "cannot reach Temporal" in err and "orga server" in err
    assert "(connection refused)" in err and "tonic" not in err  # words, not the client's dump
    assert len(err.strip().splitlines()) == 1


async def test_a_server_is_ready_when_its_frontend_answers_not_when_its_port_opens(
    env: WorkflowEnvironment,
) -> None:
    """A dev server accepts connections before its frontend is healthy, and a client that
    connects in between fails ("Frontend is not healthy yet": ``orga demo`` once did): the
    embedded server counts as started only when its frontend says it serves (the gRPC health
    check, which the server does not log as an error, as it logs an early first call: `orga
    server` once printed that ERROR line before its banner)."""
    with socket.socket() as listening:  # a port that accepts and never answers
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        address = f"127.0.0.1:{listening.getsockname()[1]}"
        assert address_answers(address)
        assert not await frontend_healthy(address, timeout=1)
    assert await frontend_healthy(env.client.service_client.config.target_host)


async def test_ctrl_c_while_the_server_starts_leaves_no_server(tmp_path: Path) -> None:
    """Found when a test interrupted `orga server` before its banner: the dev server it had
    spawned (in a session of its own, so Ctrl-C does not reach it) was left running."""
    from orga.server.devserver import DevServer

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dev = DevServer(tmp_path / "data", port=port, headless=True)
    starting = asyncio.create_task(dev.start())
    spawned = await eventually(lambda: dev._process, "the dev server spawned")
    starting.cancel()  # what Ctrl-C does to `orga server`'s main task
    with contextlib.suppress(asyncio.CancelledError):
        await starting
    assert spawned.returncode is not None
    assert not address_answers(f"127.0.0.1:{port}")


async def test_a_second_server_on_a_taken_ui_port_says_which_option_to_change(
    tmp_path: Path,
) -> None:
    """Found by a newcomer: a second `orga server` on another port died on the Web UI's port
    with a raw error and a 600-character command that did not name --ui-port."""
    with socket.socket() as taken, socket.socket() as free:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        free.bind(("127.0.0.1", 0))
        ui_port, port = taken.getsockname()[1], free.getsockname()[1]
        free.close()
        code, _, err = await orga(
            "server", "--ui-port", str(ui_port), "--data-dir", str(tmp_path / "data"),
            env={"TEMPORAL_ADDRESS": f"127.0.0.1:{port}"},
        )  # fmt: skip
    assert code == 1
    [line] = err.strip().splitlines()
    assert f"port {ui_port} is taken" in line and "--ui-port" in line and len(line) < 200
    assert not address_answers(f"127.0.0.1:{port}")  # nothing was started


async def test_demo_offline_end_to_end(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {
        "TEMPORAL_ADDRESS": f"127.0.0.1:{port}",
        "ORGA_DATA_DIR": str(tmp_path / "data"),
        "OPENROUTER_API_KEY": "",
        "OPENAI_API_KEY": "",
        "ANTHROPIC_API_KEY": "",
    }
    code, out, err = await orga("demo", env=env, timeout=120)
    assert code == 0, out + err
    assert "offline scripted model" in out
    assert "answer:      [offline scripted model] 17 + 25 = 42" in out
    assert (
        f"web ui:      http://localhost:{port + 1000}/namespaces/default/workflows/orga-demo-"
        in out
    )
    assert (tmp_path / "data" / "temporal.db").is_file()
    assert not address_answers(f"127.0.0.1:{port}")
    # Every history lives in that file: only its owner may read it.
    assert stat.S_IMODE((tmp_path / "data").stat().st_mode) == 0o700
    for path in (tmp_path / "data").iterdir():
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path.name  # nothing left running


async def test_task_start_and_state_with_the_worked_example(
    env: WorkflowEnvironment, harness: Harness
) -> None:
    from orga.tools._loading import load_tool_modules

    example = EXAMPLE_TASK
    async with harness.worker(tools=load_tool_modules(["examples.shop"])):
        code, out, err = await orga(
            "task",
            "start",
            str(example),
            "--id",
            f"order-{harness.task_queue}",
            env=on(env, harness),
        )
        harness.handles.append(harness.client.get_workflow_handle(f"order-{harness.task_queue}"))
        assert code == 1
        assert "the task did not complete: the task stopped: step 'notify' failed" in err
        lines = out.splitlines()
        assert lines[0] == "task aborted · compensated"
        assert lines[1].split()[:2] == ["reserve", "compensated"]
        assert lines[2].split()[:2] == ["charge", "compensated"]
        assert lines[3].split()[:2] == ["notify", "failed"]
        code, out, err = await orga(
            "task", "state", f"order-{harness.task_queue}", "--json", env=on(env, harness)
        )
        assert code == 0, err
        state = json.loads(out)
        assert state["status"] == "aborted"
        assert state["completion_order"] == ["reserve", "charge"]
        assert state["outcome"] == "compensated" and state["uncompensated"] == []

    bad = Path(harness.task_queue + ".json")
    code, out, err = await orga("task", "start", str(bad), env=on(env, harness))
    assert code == 2 and "cannot read" in err


async def test_server_runs_on_sqlite_and_stops_cleanly_on_ctrl_c(tmp_path: Path) -> None:
    import signal

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    process = await asyncio.create_subprocess_exec(
        ORGA,
        "server",
        "--headless",
        "--data-dir",
        str(tmp_path / "data"),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env={**os.environ, "TEMPORAL_ADDRESS": f"127.0.0.1:{port}"},
    )
    assert process.stdout is not None
    try:
        # The dev server's own log lines (`time=… level=…`: "Frontend is not healthy yet"
        # while it starts) may come first; the banner follows them.
        banner = (await asyncio.wait_for(process.stdout.readline(), 30)).decode()
        while banner.startswith("time="):
            banner = (await asyncio.wait_for(process.stdout.readline(), 30)).decode()
        assert banner.startswith(f"Temporal dev server on 127.0.0.1:{port} (SQLite: ")
        assert address_answers(f"127.0.0.1:{port}")
        client = await connect(Settings(temporal_address=f"127.0.0.1:{port}"))
        assert await ensure_search_attributes(client) == []  # registered at start-up
    finally:
        # Ctrl-C also when an assertion failed: the server stops its dev server, none is left.
        process.send_signal(signal.SIGINT)
    out, _ = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode == 0, out.decode()
    assert out.decode().rstrip().endswith("stopped")
    assert (tmp_path / "data" / "temporal.db").is_file()
    assert not address_answers(f"127.0.0.1:{port}")


async def test_api_token_appended_to_the_tokens_file_leaves_the_token_out_of_it(
    tmp_path: Path,
) -> None:
    """Issue 65: ``orga api-token ann > tokens.toml`` wrote the raw token into the file as a
    comment, where the guide says the file keeps only its SHA-256. The token goes to the
    terminal (stderr), the file's lines to stdout, and the endpoint takes the file."""
    import hashlib
    import tomllib

    from orga.web.callers import Callers

    code, out, err = await orga("api-token", "ann")
    assert code == 0, err
    [token] = [word for word in err.split() if len(word) > 30]
    assert token not in out
    entry = tomllib.loads(out)
    assert entry == {"users": {"ann": {"token_sha256": hashlib.sha256(token.encode()).hexdigest()}}}
    tokens = tmp_path / "tokens.toml"
    tokens.write_text(out)
    callers = Callers.from_file(tokens)
    assert callers.who({"authorization": f"Bearer {token}"}) == "ann"

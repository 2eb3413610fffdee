"""Conversations as a new user meets them (issue 51): what a newcomer who followed the README,
getting started and the conversations guide found, each as the user's own steps with the
``orga`` command on a real dev server.

The README itself is walked as a newcomer's shell runs it by ``tests/test_readme.py`` (no
``TEMPORAL_ADDRESS``, in a fresh clone): that walk runs the README's ``credit_worker.py`` at
orga's default address.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.testing import WorkflowEnvironment

from orga.contracts.state import LoopState
from orga.plugin import OrgaPlugin
from orga.runtime.connect import connect_config
from orga.runtime.presence import ended_here, presence
from orga.runtime.settings import Settings
from orga.scripted.server import Turn
from orga.tools.sdk import tool
from tests.harness import Harness, scripted_settings
from tests.helpers import (
    ORGA,
    ROOT,
    ForkedProcess,
    children,
    eventually,
    on,
    orga,
    parent_of,
    pending,
    start_worker,
    terminal,
)

credited: list[int] = []


@tool(requires_approval=True)
def credit(amount: int) -> str:
    """Credit an amount to the customer.

    Args:
        amount: cents.
    """
    credited.append(amount)
    return f"credited {amount} cents"


async def _thread(env: WorkflowEnvironment, harness: Harness, model: str) -> str:
    """``orga run "…" --thread --json``, as the README starts a thread: its workflow id."""
    code, out, err = await orga(
        "run", "What is 2+3?", "--thread", "--model", model, "--json", env=on(env, harness)
    )
    assert code == 0, err
    first = json.loads(out)
    assert first["output"] == "5" and first["turn"] == 1
    harness.handles.append(harness.client.get_workflow_handle(first["workflow_id"]))
    return str(first["workflow_id"])


# ---- 1: orga chat joins any thread -------------------------------------------------------------


async def test_orga_chat_joins_a_thread_orga_run_started_and_shows_its_answers(
    env: WorkflowEnvironment, harness: Harness
) -> None:
    """The README's sequence: `orga run --thread`, `orga say`, then `orga chat ID`. The thread
    has no stream, so the chat shows each answer when it arrives (it crashed on the stream's
    offset query, after delivering the message); `/help` lists the slash commands."""
    model = harness.new_model([Turn(text="5"), Turn(text="8"), Turn(text="16")])
    cli = on(env, harness)
    async with harness.worker():
        thread_id = await _thread(env, harness, model)
        code, out, err = await orga("say", thread_id, "And 4+4?", "--json", env=cli)
        said = json.loads(out)
        with terminal([ORGA, "chat", thread_id], cli) as term:
            await term.shows("you>")
            term.type("/help")
            await term.shows("/close: end the thread")
            term.type("/nonsense")
            await term.shows("no command '/nonsense'")
            term.type("And 8+8?")
            screen = await term.shows("orga> 16")
            term.press("C-d")
            screen = await term.shows("[exited 0]")
        state = await harness.client.get_workflow_handle(thread_id).query(
            "state", result_type=LoopState
        )
    assert code == 0, err
    assert (said["workflow_id"], said["output"], said["turn"]) == (thread_id, "8", 2)
    assert f"thread {thread_id}, turn 2: 8" in screen
    assert "/help: list these commands" in screen
    assert "Traceback" not in screen and "unexpected error" not in screen, screen
    assert f"thread {thread_id} waits for your next message" in screen
    assert state.status == "awaiting_message" and state.thread is not None
    assert state.thread.turn == 3  # the chat's message was a turn, answered; nothing lost
    assert harness.model.requests_for(model)[-1].user_texts() == [
        "What is 2+3?",
        "And 4+4?",
        "And 8+8?",
    ]


# ---- 2: the README's program reaches Temporal where orga does ----------------------------------


def test_a_program_with_the_plugin_connects_where_every_orga_command_does() -> None:
    """`Client.connect(**plugin.connect_config(), plugins=[plugin])`, as the README's
    credit_worker.py connects: with no variable set it is orga's default, localhost:7233 (the
    README's `ClientConfig.load_client_connect_config()` gave no address at all, and the
    program failed with `TypeError: Client.connect() missing … 'target_host'`)."""
    bare = Settings.from_env({})
    assert connect_config(bare) == {
        "target_host": "localhost:7233",
        "namespace": "default",
        "tls": False,
    }
    named = Settings.from_env(
        {"TEMPORAL_ADDRESS": "temporal:7233", "TEMPORAL_NAMESPACE": "shop", "TEMPORAL_API_KEY": "k"}
    )
    assert connect_config(named) == {
        "target_host": "temporal:7233",
        "namespace": "shop",
        "tls": True,
        "api_key": "k",
    }
    plugin = OrgaPlugin(settings=bare.model_copy(update={"default_provider": "scripted"}))
    assert plugin.connect_config().get("target_host") == "localhost:7233"


# ---- 4: a fork the workflow refuses is not reported as started well ----------------------------


async def test_a_thread_forked_after_its_answer_is_reported_as_the_workflow_took_it(
    env: WorkflowEnvironment, harness: Harness
) -> None:
    """`orga fork ID --at N` without `--say`, N the thread's answer: the guide says a thread's
    fork may say nothing, and the client accepted it while the workflow failed the fork, and
    the command printed success. Now the fork waits for its next message, the command says so,
    and the next message is answered by the fork."""
    model = harness.new_model([Turn(text="5")])
    other = harness.new_model([Turn(text="8")])
    cli = on(env, harness)
    async with harness.worker():
        thread_id = await _thread(env, harness, model)
        code, _, err = await orga("fork", thread_id, "--at", "1", "--model", other, env=cli)
        found = re.search(r"as (thread-[0-9a-f]{12})", err)
        assert found, err
        fork = harness.client.get_workflow_handle(found.group(1))
        harness.handles.append(fork)
        assert code == 0, err
        state = await fork.query("state", result_type=LoopState)
        assert state.status == "awaiting_message", state
        assert f"thread {fork.id} waits for your next message" in err
        code, out, err = await orga("say", fork.id, "And 4+4?", env=cli)
        assert code == 0 and out.strip() == "8", err
        await orga("close", fork.id, env=cli)
        other = harness.new_model([Turn(text="8")])
        code, out, err = await orga(
            "fork", thread_id, "--at", "1", "--say", "And 4+4?", "--model", other, "--json", env=cli
        )
        assert code == 0, err
        answered = json.loads(out)
        harness.handles.append(harness.client.get_workflow_handle(answered["workflow_id"]))
        assert answered["workflow_id"] != thread_id and answered["output"] == "8"
        for each in (thread_id, answered["workflow_id"]):
            await orga("close", each, env=cli)


# ---- 5: a finished loop, and no worker ---------------------------------------------------------


async def test_a_finished_loop_is_read_without_a_worker_and_queries_say_at_once_none_answers(
    env: WorkflowEnvironment, harness: Harness
) -> None:
    """Where the README leaves a user: the loop answered, the worker stopped. `orga state`
    shows what Temporal recorded, its answer included (it crashed: "'dict' object has no
    attribute 'output'"); `orga journal` and `orga audit`, whose records live in the
    workflow's state, say at once that no worker answers (they sat silent for 31 and 14 s)."""
    model = harness.new_model([Turn(text="it is 5")])
    cli = on(env, harness)
    async with harness.worker():
        code, out, err = await orga("run", "What is 2+3?", "--model", model, "--json", env=cli)
        assert code == 0, err
        loop_id = json.loads(out)["workflow_id"]
        harness.handles.append(harness.client.get_workflow_handle(loop_id))

    async def stopped() -> bool:  # its heartbeat said so: every command sees it gone
        return not await presence(harness.client, harness.task_queue)

    await eventually(stopped, "the worker seen as stopped")
    code, shown, err = await orga("state", loop_id, env=cli, timeout=20)
    assert code == 0, err
    assert re.search(r"^status\s+completed$", shown, re.MULTILINE), shown
    assert re.search(r"^output\s+it is 5$", shown, re.MULTILINE), shown
    assert "no worker" in shown and "showing what Temporal records" in shown
    code, out, err = await orga("state", loop_id, "--json", env=cli, timeout=20)
    assert code == 0, err
    assert json.loads(out)["output"] == "it is 5"
    for verb in ("journal", "audit"):
        code, out, err = await orga(verb, loop_id, env=cli, timeout=8)  # not after a timeout
        assert code == 1 and out == "", (verb, out, err)
        assert f"no worker is polling task queue '{harness.task_queue}'" in err, (verb, err)
        assert "start one there" in err


# ---- 9: a worker started in place of one just stopped ------------------------------------------


async def _up(
    env: WorkflowEnvironment, harness: Harness, modules: str
) -> tuple[ForkedProcess, asyncio.Task[str]]:
    """`ORGA_TOOL_MODULES=<modules> uv run worker.py` on the test's task queue, once it polls
    the queue's activities (after it compared its tools with the others'): the process, and its
    whole log once it ends."""
    process, banner = await start_worker(
        {**os.environ, **on(env, harness), "ORGA_TOOL_MODULES": modules}
    )
    assert process.stderr is not None
    stream = process.stderr

    async def log() -> str:
        return banner + (await stream.read()).decode()

    reading = asyncio.create_task(log())
    me = f"{process.pid}@{socket.gethostname()}"

    async def polls() -> bool:
        listed = await harness.client.workflow_service.describe_task_queue(
            DescribeTaskQueueRequest(
                namespace=harness.client.namespace,
                task_queue=TaskQueue(name=harness.task_queue),
                task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,
            )
        )
        return any(poller.identity == me for poller in listed.pollers)

    try:
        # The server lists a poll of one of the queue's partitions once it reaches the root.
        await eventually(polls, f"the worker {me} polling", timeout=60)
    except BaseException:
        process.kill()  # nothing of a failed start outlives the test
        await process.wait()
        reading.cancel()
        raise
    return process, reading


async def test_a_worker_started_in_place_of_one_just_stopped_does_not_warn_about_it(
    env: WorkflowEnvironment, harness: Harness
) -> None:
    """The README: "Stop the worker (Ctrl-C) … start one with your module instead". The new
    worker said another worker of the queue registers other tools — the one just stopped,
    whose poll the server lists for minutes: it told a newcomer to fix what they had done
    right. A worker stopped with Ctrl-C said so in its heartbeat; one killed is a process of
    this machine that has ended; neither is warned about. One that still runs is."""
    first, _ = await _up(env, harness, "examples.shop")
    first.send_signal(signal.SIGINT)  # Ctrl-C, as the README says
    assert await first.wait() == 0
    second, second_log = await _up(env, harness, "tests.sample_tools")
    beside, beside_log = await _up(env, harness, "examples.shop")  # it runs beside the second
    for process in (second, beside):
        process.kill()  # as a crash would
        await process.wait()
    third, third_log = await _up(env, harness, "examples.payments")
    third.send_signal(signal.SIGINT)
    assert await third.wait() == 0
    assert ended_here(f"{second.pid}@{socket.gethostname()}")
    assert not ended_here(f"{os.getpid()}@{socket.gethostname()}")
    assert not ended_here(f"{second.pid}@another-host")
    warned = "registers other tools"
    assert warned not in await second_log, await second_log
    assert warned in await beside_log  # the second one runs: that is worth saying
    assert warned not in await third_log, await third_log


# ---- 10: the smaller findings ------------------------------------------------------------------


async def test_the_command_says_its_version_and_takes_a_temperature(
    env: WorkflowEnvironment, harness: Harness
) -> None:
    code, out, err = await orga("--version")
    assert (code, out, err) == (0, f"orga {version('orga')}\n", "")
    model = harness.new_model([Turn(text="fine")])
    cli = on(env, harness)
    code, _, err = await orga("run", "q", "--model", model, "--temperature", "3", env=cli)
    assert code == 2 and "--temperature" in err  # refused before anything starts
    async with harness.worker():
        code, out, err = await orga(
            "run", "q", "--model", model, "--temperature", "0.25", "--json", env=cli
        )
        assert code == 0, err
        harness.handles.append(harness.client.get_workflow_handle(json.loads(out)["workflow_id"]))
    [request] = harness.model.requests_for(model)
    assert request.body["temperature"] == 0.25


async def test_a_refused_decision_and_a_cancelled_loop_read_as_a_person_would_say_them(
    env: WorkflowEnvironment, harness: Harness, tmp_path: Path
) -> None:
    """The README's refused claim (`--approver cfo@example.com` where approvers are enrolled)
    said `not recorded: ValueError: …`; a cancelled loop's state said `cancelled (phase:
    failed)`."""
    data = tmp_path / "data"
    cli = {**on(env, harness), "ORGA_DATA_DIR": str(data)}
    code, _, err = await orga("approver", "keygen", "--name", "pat", env=cli)
    assert code == 0, err
    model = harness.new_model([Turn(tool_calls=[("credit", {"amount": 700})]), Turn(text="ok")])
    settings = scripted_settings(harness.model, data_dir=data)
    async with harness.worker(settings=settings, tools=[credit]):
        handle = await harness.start("credit 700", model=model, tools=["credit"])
        [call] = (await pending(handle)).pending_approvals
        code, _, refused = await orga(
            "approve", handle.id, call.call_id, "--approver", "cfo@example.com", env=cli
        )
        assert code == 1
        code, _, err = await orga("cancel", handle.id, "--reason", "wrong customer", env=cli)
        assert code == 0, err
        code, shown, err = await orga("state", handle.id, env=cli)
    assert code == 0, err
    assert "ValueError" not in refused
    assert refused.startswith("orga: not recorded: 'cfo@example.com' is not an enrolled approver")
    assert re.search(r"^status\s+cancelled$", shown, re.MULTILINE), shown
    assert "(phase: failed)" not in shown
    assert credited == []


async def test_every_verb_leaves_the_process_without_the_interpreter_s_finalisation(
    env: WorkflowEnvironment,
) -> None:
    """temporalio's threads can crash the interpreter while it finalises (`Fatal Python error:
    PyGILState_Release … finalizing`, after a verb that succeeded): every way out of `orga` —
    a verb, its help, the version, a usage error, `orga worker` — flushes and leaves with
    `os._exit`, so no exit handler of the interpreter runs (this one prints `finalised`)."""
    program = (
        "import atexit, sys\n"
        "atexit.register(lambda: print('finalised', flush=True))\n"
        "from orga.cli import main\n"
        "main(sys.argv[1:])\n"
    )
    address = {"TEMPORAL_ADDRESS": env.client.service_client.config.target_host}
    for args, code in (
        (["--version"], 0),
        (["--help"], 0),
        (["no-such-verb"], 2),
        (["worker", "--help"], 0),
        (["state", "no-such-loop"], 1),
        (["list", "--limit", "1"], 0),
    ):
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            program,
            *args,
            cwd=ROOT,
            env={**os.environ, **address},
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(process.communicate(), 60)
        assert process.returncode == code, (args, out, err)
        assert b"finalised" not in out and b"Fatal Python error" not in err, (args, out, err)


# ---- 8: the suite reads nothing of the machine --------------------------------------------------


def test_the_suite_keeps_its_data_keys_and_store_out_of_the_checkout() -> None:
    """After the README, the checkout holds the reader's `.orga/` (an approver's key, the
    approvers it enrolled, a store): a worker or command a test starts must not read it (two
    tests failed: their unsigned approvals were refused)."""
    settings = Settings.from_env()
    assert not settings.data_dir.resolve().is_relative_to(ROOT), settings.data_dir
    assert not settings.approvers_path().resolve().is_relative_to(ROOT)
    key = settings.approver_key_path()
    assert key is None or not key.resolve().is_relative_to(ROOT)
    assert str(ROOT) not in settings.store().url
    leaked = [k for k in os.environ if k.startswith("TEMPORAL_") or k == "ORGA_APPROVER_KEY"]
    assert leaked == [], leaked


def test_a_process_named_with_a_space_does_not_hide_a_test_s_children() -> None:
    """tmux names its server `tmux: server`: reading /proc/PID/stat by splitting it on spaces
    took the name's second word for the process's state and failed test_mcp."""
    named = (
        "import ctypes, sys\n"
        "ctypes.CDLL(None).prctl(15, b'tmux: server', 0, 0, 0)\n"  # PR_SET_NAME
        "print('named', flush=True)\n"
        "sys.stdin.read()\n"
    )
    with subprocess.Popen(
        [sys.executable, "-c", named], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    ) as process:
        assert process.stdin is not None and process.stdout is not None
        try:
            assert process.stdout.readline() == b"named\n"
            assert Path(f"/proc/{process.pid}/comm").read_text() == "tmux: server\n"
            assert parent_of(process.pid) == os.getpid()
            assert process.pid in children(os.getpid(), b"sys.stdin.read()")
        finally:
            process.stdin.close()

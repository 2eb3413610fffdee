"""orga as a new user installs it: the wheel, into a fresh venv, beside a project of their own.

The project is laid out as Temporal's samples are — ``activities.py``, ``workflows.py`` and
``tools.py`` beside its script — and runs a governed loop through ``OrgaPlugin`` next to its own
workflow and activity, and a loop on the offline model the plugin serves with
``ORGA_PROVIDER=scripted``. Before 1.0.0 the wheel installed top-level ``workflows`` and
``activities`` packages, and the same project crashed on ``orga.OrgaPlugin`` with
``No module named 'activities.critic'; 'activities' is not a package``.

Offline: the wheel is built with the build backend from uv's cache, and the venv reads orga's
dependencies from the development venv (a ``.pth`` line after its own site-packages), so what
it imports of orga is the wheel's alone.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import sysconfig
import textwrap
import zipfile
from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from orga.scripted.server import ScriptedModelServer, Turn

ROOT = Path(__file__).resolve().parent.parent

ACTIVITIES = """
from temporalio import activity


@activity.defn
async def greet(name: str) -> str:
    return f"hello {name}"
"""

WORKFLOWS = """
from datetime import timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities import greet


@workflow.defn
class Greeting:
    @workflow.run
    async def run(self, name: str) -> str:
        return await workflow.execute_activity(
            greet, name, start_to_close_timeout=timedelta(seconds=10)
        )
"""

TOOLS = '''
import orga


@orga.tool
def refund_order(order: str, cents: int) -> str:
    """Refund an order.

    Args:
        order: the order id.
        cents: the amount.
    """
    return f"refunded {cents} cents on {order}"
'''

MAIN = """
import asyncio
import asyncio
import logging
import os
import sys
import uuid

from temporalio.client import Client
from temporalio.worker import Worker

import orga
from activities import greet
from tools import refund_order
from workflows import Greeting


async def main() -> None:
    logging.basicConfig(level=logging.INFO)
    client = await Client.connect(
        os.environ["TEMPORAL_ADDRESS"], plugins=[orga.OrgaPlugin(tools=[refund_order])]
    )
    queue = f"user-{uuid.uuid4().hex[:8]}"
    async with Worker(client, task_queue=queue, workflows=[Greeting], activities=[greet]):
        greeting = await client.execute_workflow(
            Greeting.run, "ann", id=f"greet-{uuid.uuid4().hex[:8]}", task_queue=queue
        )
        loop = await orga.start_loop(
            client,
            "Refund 500 cents on order A-1",
            orga.LoopConfig(
                tools=["refund_order"], provider="openai", model="wheel", max_iterations=4
            ),
            task_queue=queue,
        )
        result = await loop.result()
        state = await loop.state()
        offline = await orga.start_loop(
            client, "What is 2 + 3?", orga.LoopConfig(tools=["add"]), task_queue=queue
        )
        answer = (await offline.result()).output
    print(greeting)
    print(result.output)
    print("offline:", answer)
    print("orga from", orga.__file__)
    print("called", [(c.tool, c.status) for c in state.tool_calls])
    sys.stdout.flush()
    os._exit(0)  # temporalio may crash the interpreter at exit (sdk-python#300)


asyncio.run(main())
"""


def _built_wheel(out: Path) -> Path:
    subprocess.run(
        ["uv", "build", "--wheel", "--offline", "-q", "-o", str(out)],
        cwd=ROOT,
        check=True,
        capture_output=True,
        timeout=120,
    )
    [wheel] = out.glob("orga-*.whl")
    return wheel


def test_the_wheel_installs_orga_and_nothing_else_at_the_top_level(tmp_path: Path) -> None:
    wheel = _built_wheel(tmp_path / "dist")
    with zipfile.ZipFile(wheel) as archive:
        tops = {name.split("/")[0] for name in archive.namelist()}
    dist_info = "-".join(wheel.name.split("-")[:2]) + ".dist-info"
    assert tops == {"orga", dist_info}
    assert "orga/desk/page.html" in archive.namelist()


async def test_a_project_with_its_own_activities_and_workflows_runs_a_governed_loop(
    tmp_path: Path, env: WorkflowEnvironment, model_server: ScriptedModelServer
) -> None:
    model_server.script(
        "wheel",
        [
            Turn(tool_calls=[("refund_order", {"order": "A-1", "cents": 500})]),
            Turn(text="refunded"),
        ],
    )
    site, run = await asyncio.to_thread(
        _run_project,
        tmp_path,
        env.client.service_client.config.target_host,
        model_server.openai_base_url,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.splitlines()
    assert lines[0] == "hello ann"
    assert lines[1] == "refunded"
    # ORGA_PROVIDER=scripted: the plugin serves the offline model, and says so once.
    assert lines[2] == "offline: [offline scripted model] 2 + 3 = 5 (by the add tool).", lines
    assert run.stderr.count("serving the offline scripted model") == 1, run.stderr
    assert lines[3] == f"orga from {Path(site) / 'orga' / '__init__.py'}"
    assert lines[4] == "called [('refund_order', 'ok')]"  # through the default gate


def _run_project(
    tmp_path: Path, address: str, base_url: str
) -> tuple[str, subprocess.CompletedProcess[str]]:
    """The wheel in a fresh venv, the user's project beside it, its script run."""
    wheel = _built_wheel(tmp_path / "dist")
    venv = tmp_path / "venv"
    subprocess.run(
        ["uv", "venv", "-q", "--offline", "--python", sys.executable, str(venv)],
        check=True,
        timeout=60,
    )
    python = venv / "bin" / "python"
    subprocess.run(
        ["uv", "pip", "install", "-q", "--offline", "--no-deps", "--python", str(python), wheel],
        check=True,
        timeout=60,
    )
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    # orga's dependencies from the development venv, after the fresh venv's own packages.
    Path(site, "zz_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")

    project = tmp_path / "project"
    project.mkdir()
    for name, text in {
        "activities.py": ACTIVITIES,
        "workflows.py": WORKFLOWS,
        "tools.py": TOOLS,
        "main.py": MAIN,
    }.items():
        (project / name).write_text(textwrap.dedent(text))
    environment = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "TEMPORAL_ADDRESS": address,
        "ORGA_PROVIDER": "scripted",
        "OPENAI_BASE_URL": base_url,
        "ORGA_STORE_URL": f"sqlite:///{tmp_path / 'store.db'}",
        "ORGA_DATA_DIR": str(tmp_path / "data"),
    }
    run = subprocess.run(
        [str(python), "main.py"],
        cwd=project,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return site, run

"""Session fixtures: one real Temporal dev server and one scripted model server per test
process (``uv run pytest`` runs the suite in parallel processes, pytest-xdist's ``-n``).

Every integration test gets a worker on a task queue of its own and, when it finishes, each
workflow it started is replayed from its history with ``Replayer``. A test marked ``alone`` (a
load test) runs while no other test of the run does, in any process.

Nothing of the machine's reaches a test (issue 51: the suite went red after following the
README): the run starts without the variables that point orga elsewhere (``ORGA_*``,
``TEMPORAL_*``, ``OTEL_*``, the providers' keys and URLs) and with a data directory of its own
(``ORGA_DATA_DIR``), so no worker or command a test starts reads the checkout's ``.orga/`` (an
approver's key and the approvers ``orga approver keygen`` enrolled there) or writes its store.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment

from orga.contracts import search_attributes as sa
from orga.runtime.converter import data_converter
from orga.scripted.server import ScriptedModelServer
from orga.server.devserver import TUNING_ARGS, temporal_binary, time_skipping_binary
from tests.harness import TEST_STORE, Harness, replay_all

LOCKS = "ORGA_TEST_LOCKS"
"""The folder of the run's locks (made by the main process, inherited by its workers)."""
MACHINE: tuple[str, ...] = (
    "ORGA_",
    "TEMPORAL_",
    "OTEL_",
    "OPENROUTER_",
    "OPENAI_",
    "ANTHROPIC_",
)
"""Prefixes of the variables that point orga at servers, stores, keys and models: a test sets
what it uses, the machine's never reach it (``ORGA_TEST_*`` are the suite's own)."""
_made = pytest.StashKey[str]()
_data = pytest.StashKey[str]()
_machine = pytest.StashKey[dict[str, str]]()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "alone: runs while no other test runs, in any process (a load test)"
    )
    config.addinivalue_line(
        "markers",
        "real_model: needs a real model on 127.0.0.1 (../shared/real-model/serve.sh); run only "
        "when asked for (uv run pytest -m real_model), never in the default suite",
    )
    if not hasattr(config, "workerinput") and LOCKS not in os.environ:
        os.environ[LOCKS] = config.stash[_made] = tempfile.mkdtemp(prefix="orga-test-locks-")
        _isolate(config)


def _isolate(config: pytest.Config) -> None:
    """The run's environment without the machine's orga variables, with a data directory of
    its own (the main process's, inherited by its workers and every process a test starts)."""
    machine = {
        name: value
        for name, value in os.environ.items()
        if name.startswith(MACHINE) and not name.startswith("ORGA_TEST_")
    }
    for name in machine:
        del os.environ[name]
    config.stash[_machine] = machine
    os.environ["ORGA_DATA_DIR"] = config.stash[_data] = tempfile.mkdtemp(prefix="orga-test-data-")


@pytest.hookimpl(optionalhook=True)  # an xdist hook: `-p no:xdist` runs without it
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: one process more than the cores this run may use. Some tests wait (a killed
    worker's heartbeat timeout, a schedule's next fire) while using no CPU: with one process per
    core a core then idles (measured on 2 cores: 280 s with 2 processes, 245 s with 3). Four per
    core took the suite from ~430 s to ~280 s, but in six CI runs the load it made failed four
    tests by their timing (docs/guides/testing.md): two fixed, two not yet — so not yet."""
    return len(os.sched_getaffinity(0)) + 1


def pytest_unconfigure(config: pytest.Config) -> None:
    if _made in config.stash:
        shutil.rmtree(config.stash[_made], ignore_errors=True)
        del os.environ[LOCKS]
    if _data in config.stash:
        shutil.rmtree(config.stash[_data], ignore_errors=True)
        os.environ.pop("ORGA_DATA_DIR", None)
        os.environ.update(config.stash[_machine])


@pytest.hookimpl(hookwrapper=True, tryfirst=True)  # around pytest-timeout's clock: see below
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    """Between the processes of one parallel run: a test marked ``alone`` holds the run's lock
    exclusively, every other test holds it shared. The turnstile (taken briefly by every test,
    held by an ``alone`` test while it waits for the lock) lets no new test start meanwhile, so
    the load test does not wait for ever. The lock is taken before the test's timeout starts:
    a test that waited for a load test to end has not used its time."""
    if "PYTEST_XDIST_WORKER" not in os.environ:  # one process: one test at a time anyway
        yield
        return
    alone = item.get_closest_marker("alone") is not None
    folder = Path(os.environ[LOCKS])
    with (folder / "turnstile").open("a") as turnstile, (folder / "lock").open("a") as lock:
        fcntl.flock(turnstile, fcntl.LOCK_EX)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        finally:
            fcntl.flock(turnstile, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@pytest.fixture(scope="session")
async def env() -> AsyncIterator[WorkflowEnvironment]:
    environment = await WorkflowEnvironment.start_local(
        dev_server_existing_path=str(temporal_binary()),
        data_converter=data_converter(lambda: TEST_STORE),
        search_attributes=list(sa.ALL),
        dev_server_extra_args=list(TUNING_ARGS),
    )
    yield environment
    await environment.shutdown()


@pytest.fixture(scope="session")
def model_server() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer() as server:
        yield server


@pytest.fixture
async def harness(
    env: WorkflowEnvironment, model_server: ScriptedModelServer
) -> AsyncIterator[Harness]:
    """A fresh task queue; every workflow started through it is replayed afterwards."""
    h = Harness(client=env.client, model=model_server)
    yield h
    ended = []
    for handle in h.handles:
        description = await handle.describe()
        if description.status is not None and description.status.name != "RUNNING":
            ended.append(handle)
    await replay_all(ended, h.client)
    await _end_what_still_runs(h)


async def _end_what_still_runs(h: Harness) -> None:
    """Terminate what the test left running on its task queues (a loop left waiting for a
    person, a thread for its next message): the inbox of a later test of this process (the
    desk, ``orga pending``) lists every waiting workflow of the server, and waits up to
    ``INBOX_QUERY_TIMEOUT`` on each one that no worker answers any more."""
    query = f"ExecutionStatus='Running' AND TaskQueue STARTS_WITH '{h.task_queue}'"
    async for found in h.client.list_workflows(query):
        with contextlib.suppress(RPCError):  # ended meanwhile
            await h.client.get_workflow_handle(found.id, run_id=found.run_id).terminate(
                "the test ended"
            )


@pytest.fixture(scope="session")
async def skipping_env() -> AsyncIterator[WorkflowEnvironment]:
    """The time-skipping test server: a one-hour wait passes in well under a second."""
    environment = await WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=str(time_skipping_binary()),
        data_converter=data_converter(lambda: TEST_STORE),
    )
    yield environment
    await environment.shutdown()


@pytest.fixture
async def skipping(
    skipping_env: WorkflowEnvironment, model_server: ScriptedModelServer
) -> AsyncIterator[Harness]:
    """A harness on the time-skipping server; its workflows are replayed afterwards too."""
    h = Harness(
        client=skipping_env.client,
        model=model_server,
        memo={sa.NO_SEARCH_ATTRIBUTES_MEMO: False},  # the test server cannot register them
    )
    yield h
    await replay_all(h.handles, h.client)


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A real PostgreSQL server on 127.0.0.1 for the session (the store of a cluster)."""
    from tests.postgres import postgres_server

    with postgres_server() as url:
        yield url


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``real_model`` run only when ``-m`` names them: the default suite needs
    no model but the scripted one. Then the order the processes take tests in (every process
    collects the same order; ``--dist loadgroup`` hands out the largest group first, then one
    test at a time in this order): the ``alone`` tests first, in one group, so the one process
    that runs them waits for no long test to end before it has the machine to itself; then the
    tests on a Temporal server, the long ones, while the quick ones fill in at the end."""
    if "real_model" not in (config.getoption("markexpr") or ""):
        chosen = [item for item in items if item.get_closest_marker("real_model") is None]
        if len(chosen) != len(items):
            config.hook.pytest_deselected(items=[i for i in items if i not in chosen])
            items[:] = chosen
    for item in items:
        if item.get_closest_marker("alone") is not None:
            item.add_marker(pytest.mark.xdist_group("alone"))

    def rank(item: pytest.Item) -> int:
        if item.get_closest_marker("alone") is not None:
            return 0
        return 1 if SERVERS.intersection(getattr(item, "fixturenames", ())) else 2

    items.sort(key=rank)  # stable: within a rank, the order they were collected in


SERVERS = frozenset({"env", "harness", "skipping", "skipping_env"})
"""The fixtures of a test that runs against a Temporal server."""

"""Session fixtures: one real Temporal dev server and one scripted model server for all tests.

Every integration test gets a worker on a task queue of its own and, when it finishes, each
workflow it started is replayed from its history with ``Replayer``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
from temporalio.testing import WorkflowEnvironment

from orga.contracts import search_attributes as sa
from orga.runtime.devserver import TUNING_ARGS, temporal_binary, time_skipping_binary
from orga.runtime.extstore import data_converter
from orga.testing.scripted_model import ScriptedModelServer
from tests.harness import TEST_STORE, Harness, replay


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
    for handle in h.handles:
        description = await handle.describe()
        if description.status is not None and description.status.name != "RUNNING":
            await replay(handle, h.client)


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
    for handle in h.handles:
        await replay(handle, h.client)


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A real PostgreSQL server on 127.0.0.1 for the session (the store of a cluster)."""
    from tests.postgres import postgres_server

    with postgres_server() as url:
        yield url

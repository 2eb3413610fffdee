"""Record the histories of ``tests/scenarios.py`` into ``tests/histories/``.

    uv run python -m tests.record_histories [SCENARIO ...]

With scenario names, records only those (the way to add a new scenario while keeping the older
recordings, which is what makes replay tests worth having); with none, records them all anew —
only for a deliberate, released break of replay compatibility. Commit the files it writes. Each
run of a workflow (continue-as-new starts a new one) is written as ``<scenario>.<n>.json``.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from orga.contracts import search_attributes as sa
from orga.runtime.converter import data_converter
from orga.scripted.server import ScriptedModelServer
from orga.server.devserver import TUNING_ARGS, temporal_binary
from tests.harness import TEST_STORE, Harness
from tests.scenarios import SCENARIOS

HISTORIES = Path(__file__).resolve().parent / "histories"


async def main(names: list[str]) -> None:
    chosen = {name: SCENARIOS[name] for name in names} if names else SCENARIOS
    HISTORIES.mkdir(exist_ok=True)
    for old in HISTORIES.glob("*.json"):
        if old.name.split(".")[0] in chosen:
            old.unlink()
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=str(temporal_binary()),
        # orga's converter, as every worker's client must use (scenarios keep their payloads
        # under its external-storage threshold: none of them lives only in this run's store).
        data_converter=data_converter(lambda: TEST_STORE),
        search_attributes=list(sa.ALL),
        dev_server_extra_args=list(TUNING_ARGS),
    )
    try:
        with ScriptedModelServer() as model:
            for name, scenario in chosen.items():
                harness = Harness(client=env.client, model=model)
                handle = await scenario(harness)
                run_id = handle.first_execution_run_id or handle.run_id
                run = 0
                while run_id is not None:
                    run += 1
                    history = await env.client.get_workflow_handle(
                        handle.id, run_id=run_id
                    ).fetch_history()
                    (HISTORIES / f"{name}.{run}.json").write_text(history.to_json())
                    last = history.events[-1]
                    attributes = last.workflow_execution_continued_as_new_event_attributes
                    run_id = attributes.new_execution_run_id or None
                print(f"{name}: {run} run(s)")
    finally:
        await env.shutdown()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
    sys.stdout.flush()
    os._exit(0)  # temporalio can crash the interpreter at exit (sdk-python#300)

"""How long the ``orga`` command takes to answer, verb by verb (issue 66).

    uv run python bench/cli_startup.py [--runs 10]

Starts the embedded dev server with an orga worker (``bench/setup.py``), runs one loop, then
times ``orga --help``, ``orga --version``, and the read verbs ``orga state ID``, ``orga
pending`` and ``orga list`` as a person runs them — a new process each, the installed ``orga``
script — and prints the median wall time of ``--runs`` runs of each against its target
(``--help`` ≤ 0.3 s, a read verb ≤ 0.6 s). Each command runs once first, with bytecode written
(``__pycache__``, as an installed package has it), and is not counted. Not a test: times vary
with the machine's load; run it on an idle machine.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.setup import bench
from orga.scripted.server import RecordedRequest, Turn

TARGETS = {"--help": 0.3, "--version": 0.3, "state": 0.6, "pending": 0.6, "list": 0.6}


def _answer(request: RecordedRequest) -> Turn:
    del request
    return Turn(text="done")


async def _timed(argv: list[str], env: dict[str, str]) -> float:
    began = time.perf_counter()
    process = await asyncio.create_subprocess_exec(
        *argv, env=env, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE
    )
    _, err = await process.communicate()
    took = time.perf_counter() - began
    if process.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({process.returncode}): {err.decode()}")
    return took


async def main(runs: int) -> None:
    orga = shutil.which("orga") or str(Path(sys.executable).with_name("orga"))
    async with bench(_answer) as b:
        loop = await b.orga("hello", "scripted-bench", [])
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env |= {
            "TEMPORAL_ADDRESS": b.client.service_client.config.target_host,
            "ORGA_TASK_QUEUE": "bench-orga",
            "ORGA_DATA_DIR": str(b.settings.data_dir),
        }
        verbs = {
            "--help": [orga, "--help"],
            "--version": [orga, "--version"],
            "state": [orga, "state", loop],
            "pending": [orga, "pending"],
            "list": [orga, "list"],
        }
        print(f"{'command':<16} {'median':>8} {'min':>8} {'target':>8}")
        for name, argv in verbs.items():
            await _timed(argv, env)  # bytecode written, not counted
            times = [await _timed(argv, env) for _ in range(runs)]
            median = statistics.median(times)
            verdict = "ok" if median <= TARGETS[name] else "over"
            print(
                f"{'orga ' + name:<16} {median:>7.3f}s {min(times):>7.3f}s "
                f"{TARGETS[name]:>7.1f}s  {verdict}"
            )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="How long the orga command takes to answer.")
    parser.add_argument("--runs", type=int, default=10)
    asyncio.run(main(parser.parse_args().runs))

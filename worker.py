"""Run an orga worker: ``uv run worker.py [--scripted]`` (the same as ``uv run orga worker``).

A thin script over ``orga.cli.worker``: the wiring is ``orga.OrgaPlugin``, which any Temporal
worker can take instead (see the README, "orga in your own worker").
"""

from __future__ import annotations

import os
import sys

from orga.cli.worker import main

if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # As every `orga` verb leaves: temporalio can crash the interpreter while it finalises
    # (sdk-python#300), after a worker that stopped cleanly.
    os._exit(code)

"""``@ag-ui/client`` from npm, run by Node, as a web app runs it (``tests/agui_client``)."""

from __future__ import annotations

import asyncio
import fcntl
import shutil
from pathlib import Path

AGUI_CLIENT = Path(__file__).resolve().parents[1] / "agui_client"
"""``@ag-ui/client`` pinned by its package-lock.json, and the scripts that drive it."""


async def ag_ui_client() -> str:
    """The ``node`` that runs the scripts of ``AGUI_CLIENT``, once its packages are installed
    (``npm ci`` the first time: one installer at a time, whichever test asks first)."""
    node, npm = shutil.which("node"), shutil.which("npm")
    assert node and npm, "Node 20 and npm run @ag-ui/client (.ci/run has them)"
    with (AGUI_CLIENT / "package.json").open() as held:
        await asyncio.to_thread(fcntl.flock, held, fcntl.LOCK_EX)
        try:
            if not (AGUI_CLIENT / "node_modules" / "@ag-ui" / "client").is_dir():
                installing = await asyncio.create_subprocess_exec(
                    npm, "ci", "--silent", "--no-audit", "--no-fund", cwd=AGUI_CLIENT
                )
                assert await asyncio.wait_for(installing.wait(), 300) == 0, "npm ci failed"
        finally:
            fcntl.flock(held, fcntl.LOCK_UN)
    return node

"""Node packages as a web app uses them: ``@ag-ui/client`` driving the AG-UI endpoint
(``tests/agui_client``), ``@a2a-js/sdk`` driving the A2A endpoint (``tests/a2a_client``), and
the example page bundled for the browser (``examples/web``)."""

from __future__ import annotations

import asyncio
import fcntl
from pathlib import Path

from tests.helpers._browser import web_tool
from tests.helpers._commands import ROOT

AGUI_CLIENT = ROOT / "tests" / "agui_client"
"""``@ag-ui/client`` pinned by its package-lock.json, and the scripts that drive it."""
A2A_CLIENT = ROOT / "tests" / "a2a_client"
"""``@a2a-js/sdk`` pinned by its package-lock.json, and the script that drives it."""
WEB_EXAMPLE = ROOT / "examples" / "web"
"""The example chat page (``public/``), its script bundled by ``npm run build``."""


async def ag_ui_client() -> str:
    """The ``node`` that runs the scripts of ``AGUI_CLIENT``, once its packages are in."""
    return await _installed(AGUI_CLIENT, "@ag-ui/client")


async def a2a_client() -> str:
    """The ``node`` that runs ``A2A_CLIENT``'s script, once its packages are in."""
    return await _installed(A2A_CLIENT, "@a2a-js/sdk")


async def web_example() -> Path:
    """``examples/web/public``, its script built (``npm ci``, then ``npm run build``)."""
    await _installed(WEB_EXAMPLE, "@ag-ui/client", build=True)
    return WEB_EXAMPLE / "public"


async def _installed(folder: Path, package: str, *, build: bool = False) -> str:
    """``node``, once ``folder``'s locked packages are installed (``npm ci`` the first time,
    when ``package`` is not there; one installer at a time, whichever test asks first) and,
    with ``build``, its bundle made."""
    install = "Node 20 and npm (`apt-get install nodejs npm`)"
    node, npm = web_tool("node", install=install), web_tool("npm", install=install)
    with (folder / "package.json").open() as held:
        await asyncio.to_thread(fcntl.flock, held, fcntl.LOCK_EX)
        try:
            if not (folder / "node_modules" / package).is_dir():
                await _npm(npm, folder, "ci", "--silent", "--no-audit", "--no-fund")
            bundle, source = folder / "public" / "app.js", folder / "src" / "app.js"
            if build and (not bundle.is_file() or bundle.stat().st_mtime < source.stat().st_mtime):
                await _npm(npm, folder, "run", "--silent", "build")
        finally:
            fcntl.flock(held, fcntl.LOCK_UN)
    return node


async def _npm(npm: str, folder: Path, *args: str) -> None:
    running = await asyncio.create_subprocess_exec(npm, *args, cwd=folder)
    assert await asyncio.wait_for(running.wait(), 300) == 0, f"npm {' '.join(args)} failed"

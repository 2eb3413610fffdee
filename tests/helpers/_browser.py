"""The web parts some tests drive — Chromium, Node and npm — or a skip that says what is missing.

The README promises Python and uv: on a machine without a browser (or Node), the tests that need
one are skipped with the reason and the command that installs it. CI installs them (``.ci/run``)
and sets ``ORGA_TEST_REQUIRE_WEB=1``, where a missing one fails instead: the browser tests must
run there.
"""

from __future__ import annotations

import os
import shutil

import pytest

__all__ = ["REQUIRE_WEB", "chromium", "web_tool"]

REQUIRE_WEB = "ORGA_TEST_REQUIRE_WEB"
"""Set (to 1) by ``.ci/run``: a missing web part fails the test rather than skipping it."""


def web_tool(*names: str, install: str) -> str:
    """The first of ``names`` on the PATH; else the test is skipped (failed under CI) with how
    to ``install`` it."""
    for name in names:
        found = shutil.which(name)
        if found:
            return found
    why = f"{' / '.join(names)} is not installed: {install} (.ci/run does it)"
    if os.environ.get(REQUIRE_WEB) == "1":
        pytest.fail(why)
    pytest.skip(why)


def chromium() -> str:
    """Debian's headless Chromium."""
    return web_tool("chromium", "chromium-browser", install="`apt-get install chromium`")

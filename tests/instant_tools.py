"""Tools for the every-instant test (``tests/test_every_instant.py``), loaded by worker processes
(``ORGA_TOOL_MODULES=tests.instant_tools``): one tool per kind — with effects (``serial``),
needing approval, ``idempotent``, with a ``reconcile``, and pure — in two forms, async and
sync (a sync tool runs in a thread). Each pays into a bank outside the worker (a file under
``$INSTANT_DIR``, locked; the pure one only records that it read), and each call's first
attempt holds at the instant its arguments name until its worker is killed or its loop
cancelled:

* ``after_mark`` — the tool has begun (its effect marked), nothing paid yet;
* ``after_effect`` — paid, the tool not yet returned;
* ``in_thread`` — the sync form: paid, inside its thread;
* ``in_blocking`` — the async form pays through a blocking HTTP call to the test's bank
  (``$INSTANT_BANK``), which records the payment and holds the answer: the worker's event loop
  is stuck in the call;
* ``in_reconcile`` — paid on the first attempt (killed after it); the second attempt holds
  inside ``reconcile``.

A hold writes ``arrived/<cell>.<attempt>`` so the test knows where every call is.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import threading
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from orga.tools.sdk import Tool, ToolContext, tool

KINDS = ("serial", "approval", "idempotent", "reconcile", "pure")
OPTIONS: dict[str, dict[str, Any]] = {
    "serial": {"serial": True},
    "approval": {"requires_approval": True},
    "idempotent": {"serial": True, "idempotent": True},
    "reconcile": {"serial": True},  # and its reconcile
    "pure": {},
}


def folder() -> Path:
    return Path(os.environ["INSTANT_DIR"])


@contextmanager
def _locked() -> Iterator[Path]:
    path = folder() / "bank.jsonl"
    with (folder() / "bank.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield path
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def entries() -> list[dict[str, Any]]:
    """Every payment (``paid``) and read (``read``) so far, by cell and idempotency key."""
    path = folder() / "bank.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line]


def record(kind: str, cell: str, key: str) -> str:
    """Pay (or, for a pure tool, read) for ``cell``; an idempotent tool's key pays once."""
    what = "read" if kind == "pure" else "paid"
    with _locked() as path:
        done = [e for e in entries() if e["key"] == key and e["what"] == "paid"]
        if kind == "idempotent" and done:
            return f"paid once already ({cell})"
        with path.open("a") as out:
            out.write(json.dumps({"what": what, "cell": cell, "key": key}) + "\n")
    return f"{what} ({cell})"


def arrive(cell: str, attempt: int) -> None:
    arrived = folder() / "arrived"
    arrived.mkdir(exist_ok=True)
    (arrived / f"{cell}.{attempt}").touch()


def holds(cell: str, attempt: int) -> bool:
    """Whether this attempt of the cell holds: each instant is held once (a person's "run it
    again" is a new activity, whose first attempt runs through)."""
    return attempt == 1 and not (folder() / "arrived" / f"{cell}.1").exists()


def released() -> bool:
    return (folder() / "released").exists()


async def _hold(cell: str, attempt: int) -> None:
    arrive(cell, attempt)
    await asyncio.Event().wait()  # until the worker dies, or the loop is cancelled


def _hold_thread(cell: str, attempt: int) -> None:
    arrive(cell, attempt)
    while not released():
        threading.Event().wait(0.05)


def _found(ctx: ToolContext) -> str | None:
    """The bank, asked by the call's key: what the call returned if it paid."""
    for entry in entries():
        if entry["key"] == ctx.idempotency_key and entry["what"] == "paid":
            return f"paid ({entry['cell']})"
    return None


async def _reconcile(ctx: ToolContext) -> str | None:
    noted = _cell_file(ctx)
    cell, _, instant = (noted.read_text() if noted.exists() else "").partition(":")
    if (
        instant == "in_reconcile"
        and ctx.attempt == 2
        and not (folder() / "arrived" / f"{cell}.2").exists()
    ):
        await _hold(cell, ctx.attempt)
    return _found(ctx)


def _cell_file(ctx: ToolContext) -> Path:
    """Where a call notes its cell and instant, by its idempotency key (for its reconcile)."""
    return folder() / "cells" / ctx.idempotency_key.replace("/", "_")


def _note_cell(ctx: ToolContext, cell: str, instant: str) -> None:
    (folder() / "cells").mkdir(exist_ok=True)
    _cell_file(ctx).write_text(f"{cell}:{instant}")


def _async(kind: str) -> Callable[..., Any]:
    async def work(cell: str, instant: str, ctx: ToolContext) -> str:
        _note_cell(ctx, cell, instant)
        first = holds(cell, ctx.attempt)
        if first and instant == "after_mark":
            await _hold(cell, ctx.attempt)
        if first and instant == "in_blocking":
            bank = os.environ["INSTANT_BANK"]
            body = json.dumps({"kind": kind, "cell": cell, "key": ctx.idempotency_key})
            # Blocking on purpose: the worker's event loop waits in it (the instant tested).
            with urllib.request.urlopen(bank, body.encode(), timeout=60) as answer:  # noqa: ASYNC210
                said = answer.read().decode()
        else:
            said = record(kind, cell, ctx.idempotency_key)
        if first and instant in ("after_effect", "in_reconcile"):
            await _hold(cell, ctx.attempt)
        return said

    return work


def _sync(kind: str) -> Callable[..., Any]:
    def work(cell: str, instant: str, ctx: ToolContext) -> str:
        _note_cell(ctx, cell, instant)
        first = holds(cell, ctx.attempt)
        said = record(kind, cell, ctx.idempotency_key)
        if first and instant == "in_thread":
            _hold_thread(cell, ctx.attempt)
        return said

    return work


def _made(kind: str, form: str) -> Tool:
    body = _async(kind) if form == "async" else _sync(kind)
    body.__doc__ = f"""Pay for a cell ({kind}, {form}).

        Args:
            cell: the test's cell.
            instant: where the first attempt holds.
        """
    options = dict(OPTIONS[kind], timeout=30)
    if kind == "reconcile":
        options["reconcile"] = _reconcile
    return tool(name=f"{kind}_{form}", **options)(body)


serial_async, serial_sync = _made("serial", "async"), _made("serial", "sync")
approval_async, approval_sync = _made("approval", "async"), _made("approval", "sync")
idempotent_async, idempotent_sync = _made("idempotent", "async"), _made("idempotent", "sync")
reconcile_async, reconcile_sync = _made("reconcile", "async"), _made("reconcile", "sync")
pure_async, pure_sync = _made("pure", "async"), _made("pure", "sync")

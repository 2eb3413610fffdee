"""Tools a worker process loads (``ORGA_TOOL_MODULES=tests.receipt_tools``) for the test that
SIGKILLs it mid-call (``tests/test_receipts_killed.py``): payments whose effects land in a file
every process can read (``RECEIPT_EFFECTS``), by idempotency key. A first attempt told to
``hold`` hangs before or after its effect, for the test to kill the worker then."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

from orga.tools.sdk import ToolContext, tool


def _file() -> Path:
    return Path(os.environ["RECEIPT_EFFECTS"])


def effects() -> list[dict[str, Any]]:
    """Every line written so far: effects (``key``, ``amount``) and holds (``held``)."""
    path = _file()
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line]


def _write(entry: dict[str, Any]) -> None:
    with _file().open("a") as out:
        out.write(json.dumps(entry) + "\n")


async def _pay(amount: int, hold: str, ctx: ToolContext) -> str:
    if ctx.attempt == 1 and hold == "before":
        _write({"held": ctx.idempotency_key, "where": "before"})
        await asyncio.Event().wait()  # the worker dies here
    _write({"key": ctx.idempotency_key, "amount": amount})
    if ctx.attempt == 1 and hold == "after":
        _write({"held": ctx.idempotency_key, "where": "after"})
        await asyncio.Event().wait()
    return f"paid {amount}"


def _found(ctx: ToolContext) -> str | None:
    paid = [e for e in effects() if e.get("key") == ctx.idempotency_key]
    return f"paid {paid[0]['amount']} (the bank has it)" if paid else None


@tool(reconcile=_found)
async def pay_reconciled(amount: int, hold: str, ctx: ToolContext) -> str:
    """Pay an amount; the bank says, by the call's key, whether a payment went through.

    Args:
        amount: cents.
        hold: where the first attempt hangs (before, after, or nowhere).
    """
    return await _pay(amount, hold, ctx)


@tool(serial=True)
async def pay_plain(amount: int, hold: str, ctx: ToolContext) -> str:
    """Pay an amount (no way to ask afterwards whether it went through).

    Args:
        amount: cents.
        hold: where the first attempt hangs (before, after, or nowhere).
    """
    return await _pay(amount, hold, ctx)

"""A compensation that commits, then hangs: for killing its worker after the effect landed.

Loaded by a ``worker.py`` process (``ORGA_TOOL_MODULES=tests.crash_tools``); every call is
appended to ``$ORGA_TEST_CALLS`` (a file), so the test can count them across processes. Only a
worker started with ``ORGA_TEST_HANG=1`` hangs.
"""

from __future__ import annotations

import os
from pathlib import Path

from examples.payments import refund_payment
from orga.tools.sdk import ToolContext, tool


@tool(serial=True, timeout=60, idempotent=True)
def refund_then_hang(ctx: ToolContext, hang: float = 30.0) -> str:
    """Refund the step's payment (``examples.payments.refund_payment``: committed once per key),
    then, on a worker started with ``ORGA_TEST_HANG=1``, hang before answering.

    Args:
        hang: seconds to wait after committing, there.
    """
    result = refund_payment.fn(ctx)
    with Path(os.environ["ORGA_TEST_CALLS"]).open("a") as calls:
        calls.write(f"{ctx.step_key} attempt {ctx.attempt}: {result}\n")
    if os.environ.get("ORGA_TEST_HANG") == "1":
        ctx.cancelled.wait(hang)
    return result

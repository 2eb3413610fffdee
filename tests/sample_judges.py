"""Judges the tests register (``[judges.<name>] code = "tests.sample_judges:…"``)."""

from __future__ import annotations

import asyncio
import json

from orga.contracts.judges import JudgeCase, JudgeVerdict

RELEASE = asyncio.Event()
"""Lets ``held`` answer (set by a test, on the worker's event loop: the worker runs in it)."""
STARTED = asyncio.Event()
"""Set when ``held`` is asked."""


def small_refunds(case: JudgeCase) -> JudgeVerdict:
    """Approves a transfer under 10 000, sure of it; escalates anything else."""
    amount = json.loads(case.arguments).get("amount", 0)
    if case.tool == "transfer" and isinstance(amount, int) and amount < 10_000:
        return JudgeVerdict(verdict="approve", confidence=0.95, reasons=f"{amount} is small")
    return JudgeVerdict(verdict="escalate", confidence=0.9, reasons=f"{amount} is not small")


def fails(case: JudgeCase) -> JudgeVerdict:
    raise RuntimeError(f"the judge's database is down ({case.call_id})")


def prose(case: JudgeCase) -> str:
    return "Looks fine to me, approve it!"


def wrong_json(case: JudgeCase) -> dict[str, object]:
    return {"verdict": "yes", "confidence": 2}


def unsure(case: JudgeCase) -> dict[str, object]:
    return {"verdict": "approve", "confidence": 0.4, "reasons": "maybe"}


async def held(case: JudgeCase) -> JudgeVerdict:
    """Approves, once a test lets it answer."""
    STARTED.set()
    await RELEASE.wait()
    return JudgeVerdict(verdict="approve", confidence=0.99, reasons="released")


def strict_refunds(case: JudgeCase) -> JudgeVerdict:
    """Approves a transfer under 100, denies the rest, sure of both."""
    amount = json.loads(case.arguments).get("amount", 0)
    if amount < 100:
        return JudgeVerdict(verdict="approve", confidence=0.9, reasons=f"{amount} is tiny")
    return JudgeVerdict(verdict="deny", confidence=0.9, reasons=f"{amount} is not tiny")


def cautious_refunds(case: JudgeCase) -> JudgeVerdict:
    """Approves a transfer under 5000; escalates the rest."""
    amount = json.loads(case.arguments).get("amount", 0)
    if amount < 5_000:
        return JudgeVerdict(verdict="approve", confidence=0.9, reasons=f"{amount} is small")
    return JudgeVerdict(verdict="escalate", confidence=0.9, reasons="a person decides")

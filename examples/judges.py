"""Judges of the shop's refunds (``examples/judges.toml``): two candidates an operator tries
with ``orga judge what-if`` on the refunds people already decided, before either decides one
(docs/guides/operators-desk.md)."""

from __future__ import annotations

import json

from orga.contracts.judges import JudgeCase, JudgeVerdict


def _cents(case: JudgeCase) -> int | None:
    """The refund's amount, if the call is an ``issue_refund`` with a whole amount."""
    if case.tool != "issue_refund":
        return None
    try:
        amount = json.loads(case.arguments).get("amount")
    except (ValueError, AttributeError):
        return None
    return amount if isinstance(amount, int) and not isinstance(amount, bool) else None


def _within(case: JudgeCase, limit: int) -> JudgeVerdict:
    cents = _cents(case)
    if cents is not None and 0 < cents <= limit:
        return JudgeVerdict(
            verdict="approve",
            confidence=0.9,
            reasons=f"a refund of {cents} cents is within {limit}",
        )
    return JudgeVerdict(verdict="escalate", confidence=0.9, reasons=f"not a refund within {limit}")


def up_to_5000(case: JudgeCase) -> JudgeVerdict:
    """Approves a refund of up to 5000 cents; leaves anything else to a person."""
    return _within(case, 5_000)


def up_to_1000(case: JudgeCase) -> JudgeVerdict:
    """Approves a refund of up to 1000 cents; leaves anything else to a person."""
    return _within(case, 1_000)

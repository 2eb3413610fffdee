"""Typed answers: checking a final answer against the loop's ``output_schema``.

A local activity (``CHECK_ANSWER``: JSON Schema validation is not workflow code), asked once per
final answer of a loop whose config names an ``output_schema``; its result is recorded in
history, so a replay does not validate again.
"""

from __future__ import annotations

from typing import Any, Final

from pydantic import ConfigDict

from orga.contracts.wire import Compact

__all__ = ["CHECK_ANSWER", "AnswerCheck", "CheckedAnswer"]

CHECK_ANSWER: Final = "check_answer"
"""Name of the local activity that checks an answer against the schema."""


class AnswerCheck(Compact):
    """The input of ``check_answer``."""

    model_config = ConfigDict(frozen=True)

    answer: str
    output_schema: dict[str, Any]


class CheckedAnswer(Compact):
    """What ``check_answer`` found."""

    model_config = ConfigDict(frozen=True)

    valid: bool
    value: Any = None
    """The answer parsed (when ``valid``)."""
    problem: str = ""
    """Why it does not match, for the model to read (when not ``valid``)."""

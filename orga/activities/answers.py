"""The answer activity: does a final answer match the loop's ``output_schema``?

The answer is JSON text (a fenced ```json block is taken as its content); it is parsed and
checked with ``orga.runtime.json_schema`` (Draft 2020-12, every regex in RE2, the work bounded
by ``MAX_STEPS``, nothing fetched). A schema orga refuses (not one, too large or deep, a regex
RE2 cannot run, a ``$ref`` outside it) is refused when the loop starts: the setup activity
asks ``schema_problem``.

The schema comes from the client and the answer from the model, so the check runs in a thread
(``asyncio.to_thread``), never on the worker's event loop: the loop's pollers, heartbeats and
other loops' activities go on while it runs. A thread cannot be interrupted, so the check is
also bounded: linear-time regexes and at most ``MAX_STEPS`` steps (about a second), after
which the answer is reported as not checkable, as a miss the model is shown (ending
``OutputInvalid`` after the loop's ``output_retries``). Parsing the answer is linear in it,
and the answer is bounded by the model call's payload.
"""

from __future__ import annotations

import asyncio
import json

from temporalio import activity

from orga.contracts.answers import CHECK_ANSWER, AnswerCheck, CheckedAnswer
from orga.core.text import cut
from orga.runtime.json_schema import JsonSchema, SchemaRefused

__all__ = ["check_answer"]

_PROBLEMS = 5
"""Validation errors shown to the model at most."""

_PROBLEM_CHARS = 500
"""Characters of one validation error shown (jsonschema quotes the offending value whole)."""


def _unfenced(answer: str) -> str:
    text = answer.strip()
    if text.startswith("```") and text.endswith("```"):
        body = text[3:-3]
        first, _, rest = body.partition("\n")
        return rest if first.strip() in ("", "json") else body
    return text


def _checked(check: AnswerCheck) -> CheckedAnswer:
    try:
        value = json.loads(_unfenced(check.answer))
    except json.JSONDecodeError as error:
        return CheckedAnswer(
            valid=False, problem=f"the answer is not JSON ({error.msg} at character {error.pos})"
        )
    except RecursionError:
        return CheckedAnswer(valid=False, problem="the answer nests too deeply to be read")
    try:
        errors = JsonSchema(check.output_schema).errors(value)
    except SchemaRefused as refused:
        return CheckedAnswer(
            valid=False, problem=f"the answer could not be checked: output_schema {refused}"
        )
    if not errors:
        return CheckedAnswer(valid=True, value=value)
    shown = [
        cut(
            f"{'/'.join(str(p) for p in e.path) or '(the answer)'}: {e.message}",
            _PROBLEM_CHARS,
            "error",
        )
        for e in errors[:_PROBLEMS]
    ]
    more = f" (and {len(errors) - _PROBLEMS} more)" if len(errors) > _PROBLEMS else ""
    return CheckedAnswer(valid=False, problem="; ".join(shown) + more)


@activity.defn(name=CHECK_ANSWER)
async def check_answer(check: AnswerCheck) -> CheckedAnswer:
    """Parse the answer as JSON and check it against the schema, off the event loop."""
    return await asyncio.to_thread(_checked, check)

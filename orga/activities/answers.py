"""The answer activity: does a final answer match the loop's ``output_schema``?

The answer is JSON text (a fenced ```json block is taken as its content); it is parsed and
validated with ``jsonschema`` (Draft 2020-12). A schema that is not one is refused when the
loop starts (``orga.core.agents`` does not judge schemas: the setup activity does).
"""

from __future__ import annotations

import json
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from temporalio import activity

from orga.contracts.answers import CHECK_ANSWER, AnswerCheck, CheckedAnswer

__all__ = ["check_answer", "schema_problem"]

_PROBLEMS = 5
"""Validation errors shown to the model at most."""


def schema_problem(schema: dict[str, Any]) -> str | None:
    """Why ``schema`` is not a JSON Schema (Draft 2020-12); ``None`` if it is."""
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as error:
        return error.message
    return None


def _unfenced(answer: str) -> str:
    text = answer.strip()
    if text.startswith("```") and text.endswith("```"):
        body = text[3:-3]
        first, _, rest = body.partition("\n")
        return rest if first.strip() in ("", "json") else body
    return text


@activity.defn(name=CHECK_ANSWER)
async def check_answer(check: AnswerCheck) -> CheckedAnswer:
    """Parse the answer as JSON and validate it against the schema."""
    try:
        value = json.loads(_unfenced(check.answer))
    except json.JSONDecodeError as error:
        return CheckedAnswer(
            valid=False, problem=f"the answer is not JSON ({error.msg} at character {error.pos})"
        )
    validator = Draft202012Validator(check.output_schema)
    # jsonschema's overloads of iter_errors mention an unannotated parameter: "partially
    # unknown" to pyright.
    found: list[Any] = list(validator.iter_errors(value))  # pyright: ignore[reportUnknownMemberType]
    errors = sorted(found, key=lambda e: [str(p) for p in e.path])
    if not errors:
        return CheckedAnswer(valid=True, value=value)
    shown = [
        f"{'/'.join(str(p) for p in error.path) or '(the answer)'}: {error.message}"
        for error in errors[:_PROBLEMS]
    ]
    more = f" (and {len(errors) - _PROBLEMS} more)" if len(errors) > _PROBLEMS else ""
    return CheckedAnswer(valid=False, problem="; ".join(shown) + more)

"""Small pieces both workflows need: input that may not validate, and search attributes.

Workflow code. A workflow takes its input as a raw payload and decodes it here, so input that
is not a JSON object, or not a valid one, fails the workflow at once with a typed
``InvalidConfig`` instead of failing its workflow task forever ("Failed decoding arguments").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar, cast

from pydantic import BaseModel, ValidationError
from temporalio import workflow
from temporalio.common import RawValue, SearchAttributeUpdate

from orga.contracts.errors import describe_validation_error
from orga.contracts.search_attributes import NO_SEARCH_ATTRIBUTES_MEMO

__all__ = ["decoded", "search_attributes_enabled", "upsert", "validated"]

M = TypeVar("M", bound=BaseModel)


def validated(model: type[M], given: M | dict[str, Any], what: str) -> tuple[M | None, str | None]:
    """``(input, None)`` when ``given`` is valid, else ``(None, why it is not)``."""
    if isinstance(given, model):
        return given, None
    try:
        return model.model_validate(given), None
    except ValidationError as error:
        problems = describe_validation_error(error, "input")
        return None, f"the {what} input is invalid: {problems}. Nothing was run."


def decoded(model: type[M], raw: RawValue, what: str) -> tuple[M | None, str | None]:
    """``(input, None)`` when the raw payload is a valid ``model``, else ``(None, why not)``."""
    try:
        value: object = workflow.payload_converter().from_payload(raw.payload)
    except Exception as error:  # any decoding failure is the caller's input, not our bug
        return None, f"the {what} input could not be decoded ({error}). Nothing was run."
    if not isinstance(value, dict):
        shown = repr(value)
        shown = shown if len(shown) <= 80 else shown[:79] + "…"
        return None, (
            f"the {what} input must be a JSON object, not {type(value).__name__} {shown}. "
            "Nothing was run."
        )
    return validated(model, cast(dict[str, Any], value), what)


def search_attributes_enabled() -> bool:
    """False when the workflow was started with the memo that turns them off (a namespace that
    cannot register them, such as Temporal's time-skipping test server)."""
    return workflow.memo_value(NO_SEARCH_ATTRIBUTES_MEMO, True) is not False


def upsert(updates: Sequence[SearchAttributeUpdate[Any]]) -> None:
    """Upsert search attributes, unless they are turned off for this workflow."""
    if search_attributes_enabled():
        # temporalio types the parameter as a bare Sequence[SearchAttributeUpdate]; pyright
        # strict reads that as partially unknown.
        workflow.upsert_search_attributes(updates)  # pyright: ignore[reportUnknownMemberType]

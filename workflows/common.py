"""Small pieces both workflows need: input that may not validate, and search attributes.

Workflow code. Input that does not validate arrives as a plain dict (the run method's union
type falls back to it), so a workflow can fail with a typed ``InvalidConfig`` instead of
failing its workflow task forever.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from temporalio import workflow
from temporalio.common import SearchAttributeUpdate

from orga.contracts.errors import describe_validation_error
from orga.contracts.search_attributes import NO_SEARCH_ATTRIBUTES_MEMO

__all__ = ["search_attributes_enabled", "upsert", "validated"]

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

"""The wire form (``orga.contracts.wire``): what orga writes for itself leaves defaults out.

A ``Compact`` payload — an activity's input or result, a workflow's input — is written without
the fields at their default, so its reader's defaults decide what it means. The defaults of
every model such a payload can hold are therefore pinned here (``tests/wire_defaults.json``):
a default changed later would silently change what old loops' payloads say. To change one on
purpose, add a new field instead (or guard the change with a patch), then record the pins
again with ``uv run python -m tests.test_wire``.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
import sys
import typing
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import pydantic_core
import pytest
from pydantic import BaseModel
from temporalio.contrib.pydantic import PydanticJSONPlainPayloadConverter
from temporalio.converter import CompositePayloadConverter

import orga.contracts as contracts_package
from orga.contracts.carry import LoopCarry
from orga.contracts.config import LoopConfig, LoopInput
from orga.contracts.conversation import Message, ToolCall, ToolResult
from orga.contracts.critic import HumanCritic
from orga.contracts.inference import ConversationSlice, InferenceRequest, Usage
from orga.contracts.journal import Journal, ReasoningComplete, Started
from orga.contracts.resilience import Escalate, RecoveryConfig, Retry
from orga.contracts.state import LoopResult
from orga.contracts.wire import Compact, Tagged
from orga.runtime.converter import OrgaPayloadConverter

PINS = Path(__file__).with_name("wire_defaults.json")


def _compact_models() -> list[type[Compact]]:
    for module in pkgutil.iter_modules(contracts_package.__path__):
        importlib.import_module(f"orga.contracts.{module.name}")
    found: list[type[Compact]] = []
    pending: list[type[Compact]] = list(Compact.__subclasses__())
    while pending:
        model = pending.pop()
        found.append(model)
        pending.extend(model.__subclasses__())
    return sorted(found, key=lambda m: f"{m.__module__}.{m.__qualname__}")


def _models_in(annotation: Any) -> Iterator[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation
        return
    for argument in typing.get_args(annotation):
        yield from _models_in(argument)


def _reachable() -> list[type[BaseModel]]:
    """Every model a ``Compact`` payload can hold, the payloads themselves included."""
    seen: dict[str, type[BaseModel]] = {}
    pending: list[type[BaseModel]] = list(_compact_models())
    while pending:
        model = pending.pop()
        name = f"{model.__module__}.{model.__qualname__}"
        if name in seen:
            continue
        seen[name] = model
        for field in model.model_fields.values():
            pending.extend(_models_in(field.annotation))
    return [seen[name] for name in sorted(seen)]


def _default(field: Any) -> Any:
    if field.is_required():
        return "<required>"
    value = field.get_default(call_default_factory=True)
    try:
        return pydantic_core.to_jsonable_python(value)
    except pydantic_core.PydanticSerializationError:
        return repr(value)


def current_defaults() -> dict[str, dict[str, Any]]:
    """Each model a compact payload can hold: each field's default (``<required>``: none)."""
    return {
        f"{model.__module__}.{model.__qualname__}": {
            name: _default(field) for name, field in model.model_fields.items()
        }
        for model in _reachable()
    }


def test_every_default_a_compact_payload_leaves_out_is_pinned() -> None:
    pinned = json.loads(PINS.read_text())
    now = current_defaults()
    changed = sorted(
        f"{model}.{name}: pinned {pinned[model][name]!r}, now {value!r}"
        for model, fields in now.items()
        if model in pinned
        for name, value in fields.items()
        if name in pinned[model] and pinned[model][name] != value
    )
    assert not changed, (
        "a default of a model orga writes without its defaults changed: an old loop's payload "
        "would now mean the new value. Add a new field instead (or guard the change with a "
        "workflow patch), then record the pins again (uv run python -m tests.test_wire):\n"
        + "\n".join(changed)
    )
    assert now == pinned, (
        "models or fields were added to or removed from what compact payloads hold: record the "
        "pins (uv run python -m tests.test_wire) and commit tests/wire_defaults.json"
    )


def test_every_union_of_models_a_compact_payload_holds_is_tagged() -> None:
    """A member of a union of models is only known by its tag: it must keep it on the wire."""
    untagged: list[str] = []
    for model in _reachable():
        for name, field in model.model_fields.items():
            members = set(_models_in(field.annotation))
            if len(members) < 2:
                continue
            for member in members:
                if not (issubclass(member, Tagged) and member.__wire_tags__):
                    untagged.append(f"{model.__qualname__}.{name}: {member.__qualname__}")
    assert untagged == []


def _payload(value: BaseModel) -> dict[str, Any]:
    payload = OrgaPayloadConverter().to_payloads([value])[0]
    data: dict[str, Any] = json.loads(payload.data)
    return data


M = TypeVar("M", bound=BaseModel)


def _back(value: M) -> M:
    converter = OrgaPayloadConverter()
    [decoded] = converter.from_payloads(converter.to_payloads([value]), [type(value)])
    return typing.cast(M, decoded)


AT = datetime(2026, 12, 3, tzinfo=UTC)


def test_a_start_input_carries_only_what_the_client_set() -> None:
    start = LoopInput(
        messages=[Message(role="user", content="hi")],
        config=LoopConfig(model="m", tools=["add"]),
    )
    assert _payload(start) == {
        "messages": [{"role": "user", "content": "hi"}],
        "config": {"model": "m", "tools": ["add"]},
    }
    assert _back(start) == start


def test_tags_stay_on_the_wire_and_every_payload_reads_back_as_it_was() -> None:
    config = LoopConfig(
        model="m",
        recovery=RecoveryConfig(default=Escalate(), tools={"pay": Retry()}),
        critic=HumanCritic(),
    )
    journal = Journal(
        entries=[
            Started(seq=1, at=AT, agent_id="a", iteration=0),
            ReasoningComplete(seq=2, at=AT, agent_id="a", iteration=1, stop_reason="end_turn"),
        ]
    )
    written = _payload(LoopInput(messages=[Message(role="user", content="hi")], config=config))[
        "config"
    ]
    assert written["recovery"] == {
        "default": {"strategy": "escalate"},
        "tools": {"pay": {"strategy": "retry"}},
    }
    assert written["critic"] == {"kind": "human"}
    start = LoopInput(
        messages=[Message(role="user", content="hi")],
        config=config,
        carry=LoopCarry(
            runs=2,
            digest="d",
            sent=1,
            usage=Usage(input_tokens=3, total_tokens=3),
            iteration=1,
            started_at=AT,
            journal=journal,
        ),
    )
    assert _back(start) == start
    request = InferenceRequest(
        provider="openai",
        model="m",
        iteration=3,
        conversation=ConversationSlice(
            workflow_id="w",
            start=1,
            length=3,
            digest="d",
            messages=[
                Message(
                    role="assistant", tool_calls=[ToolCall(id="c", name="add", arguments="{}")]
                ),
                Message(
                    role="tool", tool_results=[ToolResult(call_id="c", name="add", content="1")]
                ),
            ],
        ),
    )
    assert _back(request) == request
    # what a fork point keeps of a config (model_dump without defaults) reads back too
    assert LoopConfig.model_validate(config.model_dump(mode="json", exclude_defaults=True)) == (
        config
    )


def test_what_people_read_is_written_whole() -> None:
    result = LoopResult(
        output="done",
        iterations=1,
        model_calls=1,
        termination_reason="end_turn",
        tool_call_count=0,
        usage=Usage(input_tokens=1, output_tokens=1, total_tokens=2),
        workflow_id="w",
        messages=2,
        provider="openai",
        model="m",
    )
    written = _payload(result)
    assert written["critique"] is None and written["value"] is None
    # and the same JSON Temporal's own pydantic converter writes
    stock = PydanticJSONPlainPayloadConverter().to_payload(result)
    assert stock is not None and json.loads(stock.data) == written


@pytest.mark.parametrize(
    "values",
    [
        ["a summary", "naïve ☃ \u2028"],
        [LoopInput(messages=[Message(role="user", content="hi")], config=LoopConfig(model="m"))],
        ["mixed", None, b"raw", {"plain": [1, 2]}],
    ],
    ids=["strings", "compact", "mixed"],
)
def test_strings_and_compact_models_are_written_as_the_stock_way_writes_them(
    values: list[Any],
) -> None:
    """orga's converter sends a string (an activity's summary) or a ``Compact`` model straight
    to its JSON converter, skipping the ones that take only None, bytes and protobuf: the
    payloads are those the composite writes, and read back the same."""
    converter = OrgaPayloadConverter()
    fast = converter.to_payloads(values)
    stock = [CompositePayloadConverter.to_payloads(converter, [v])[0] for v in values]
    assert fast == stock
    assert converter.from_payloads(fast, [type(v) for v in values]) == values


if __name__ == "__main__":
    PINS.write_text(json.dumps(current_defaults(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {PINS} ({len(current_defaults())} models)")
    sys.exit(0)

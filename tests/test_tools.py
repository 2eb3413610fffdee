"""@tool, argument checking, the registry and the ordering of a turn's calls (pure)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from pydantic import BaseModel

from orga import ToolContext, tool
from orga.contracts.conversation import ToolCall
from orga.contracts.errors import InvalidConfig, ToolInputError
from orga.core.dispatch import Predecessor, predecessors
from orga.tools.sdk import ToolRegistry, parse_arguments


class Point(BaseModel):
    x: int
    y: int


@tool(name="plot", timeout=5, serial=True, requires_approval=True, resource_arg="canvas")
async def plot_point(canvas: str, point: Point, ctx: ToolContext, colour: str = "red") -> str:
    """Plot a point on a canvas.

    Longer explanation that the model also reads.

    Args:
        canvas: which canvas to draw on.
        point: where to draw,
            in pixels.
        colour: the ink.

    Returns:
        A confirmation.
    """
    return f"{canvas}:{point.x},{point.y}:{colour}:{ctx.call_id}"


def test_schema_and_options_from_hints_and_docstring() -> None:
    d = plot_point.definition
    assert d.name == "plot"
    assert (
        d.description
        == "Plot a point on a canvas.\n\nLonger explanation that the model also reads."
    )
    assert d.timeout == timedelta(seconds=5)
    assert d.serial and d.requires_approval and d.resource_arg == "canvas"
    schema = d.parameters
    assert schema["required"] == ["canvas", "point"]
    assert schema["additionalProperties"] is False
    assert set(schema["properties"]) == {"canvas", "point", "colour"}  # no ctx
    assert schema["properties"]["canvas"] == {
        "type": "string",
        "description": "which canvas to draw on.",
    }
    assert schema["properties"]["point"]["description"] == "where to draw, in pixels."
    assert schema["properties"]["colour"]["default"] == "red"
    assert "title" not in str(schema)


async def test_validate_and_invoke_with_context() -> None:
    args = plot_point.validate(
        parse_arguments("plot", '{"canvas": "c", "point": {"x": 1, "y": "2"}}')
    )
    ctx = ToolContext(call_id="k1", workflow_id="w", idempotency_key="w/k1")
    assert await plot_point.invoke(args, ctx) == "c:1,2:red:k1"


def test_plain_decorator_and_sync_function() -> None:
    @tool
    def shout(text: str) -> str:
        """Shout it."""
        return text.upper()

    assert shout.name == "shout" and shout("a") == "A"
    assert shout.definition.parameters["required"] == ["text"]


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("{", "not valid JSON"),
        ("[1]", "must be a JSON object, not list"),
        ('"x"', "must be a JSON object, not str"),
    ],
)
def test_parse_arguments_errors(raw: str, message: str) -> None:
    with pytest.raises(ToolInputError, match=message):
        parse_arguments("t", raw)


def test_empty_arguments_are_an_empty_object() -> None:
    assert parse_arguments("t", "") == {}
    assert parse_arguments("t", "  ") == {}


def test_schema_violations_name_each_field() -> None:
    with pytest.raises(ToolInputError) as caught:
        plot_point.validate({"point": {"x": "a"}, "extra": 1})
    message = caught.value.message
    for fragment in (
        "canvas: Field required",
        "point.x: Input should be a valid integer",
        "point.y: Field required",
        "extra: Extra inputs are not permitted",
    ):
        assert fragment in message


def test_bad_registrations() -> None:
    with pytest.raises(InvalidConfig, match="not allowed"):
        tool(name="has space")(lambda: None)
    with pytest.raises(InvalidConfig, match="resource_arg 'nope'"):
        tool(name="n", resource_arg="nope")(lambda x: x)

    @tool(name="same")
    def one() -> None: ...

    @tool(name="same")
    def two() -> None: ...

    with pytest.raises(InvalidConfig, match="two tools are named 'same'"):
        ToolRegistry([one, two])


def test_predecessors() -> None:
    @tool(serial=True)
    def write(path: str) -> None: ...

    @tool(resource_arg="path")
    def edit(path: str) -> None: ...

    @tool
    def read(path: str) -> None: ...

    defs = {t.name: t.definition for t in (write, edit, read)}
    calls = [
        (0, ToolCall(id="a", name="write", arguments='{"path": "x"}')),
        (1, ToolCall(id="b", name="read", arguments='{"path": "x"}')),
        (2, ToolCall(id="c", name="edit", arguments='{"path": "x"}')),
        (3, ToolCall(id="d", name="write", arguments='{"path": "y"}')),
        (4, ToolCall(id="e", name="edit", arguments='{"path": "x"}')),
        (5, ToolCall(id="f", name="edit", arguments="not json")),
    ]
    waits = predecessors(calls, defs)
    assert waits[0] == [] and waits[1] == []
    assert waits[2] == []  # write has no resource_arg, so "x" is not a resource for it
    assert waits[3] == [Predecessor(0, skip_if_failed=False)]
    assert waits[4] == [Predecessor(2, skip_if_failed=True)]
    assert waits[5] == []

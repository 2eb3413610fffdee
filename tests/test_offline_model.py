"""The offline scripted model without a server: how it fills arguments from a tool's schema and
the task, which tools it leaves alone, and what it answers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from orga.core.knowledge import search_terms
from orga.core.typed_answers import schema_text, with_schema
from orga.knowledge import Knowledge
from orga.knowledge.tools import knowledge_tools
from orga.scripted.arguments import Filling, fill_arguments
from orga.scripted.clues import fact_to_remember, time_zones
from orga.scripted.offline import LABEL, OFFLINE_MODEL, offline_model
from orga.scripted.server import RecordedRequest
from orga.tools._builtin import add, delegate
from orga.tools._file_read import file_read_tool
from orga.tools.sdk import Tool

TIMEZONE = {
    "type": "object",
    "properties": {
        "timezone": {
            "type": "string",
            "description": "IANA timezone name (e.g., 'America/New_York', 'Europe/London'). "
            "Use 'UTC' as local timezone if no timezone provided by the user.",
        }
    },
    "required": ["timezone"],
}
"""``get_current_time`` of the reference ``mcp-server-time``, as it lists it."""


def _no_store() -> Knowledge:
    raise AssertionError("the offline model's tests never open a store")


KNOWLEDGE = {t.name: t for t in knowledge_tools(_no_store)}


def schema(tool: Tool) -> dict[str, Any]:
    return tool.definition.parameters


def advertised(*tools: Tool | tuple[str, dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for item in tools:
        name, parameters = (item.name, schema(item)) if isinstance(item, Tool) else item
        out.append({"type": "function", "function": {"name": name, "parameters": parameters}})
    return out


def request(
    tools: list[dict[str, Any]], *messages: dict[str, Any], system: str | None = None
) -> RecordedRequest:
    head = [{"role": "system", "content": system}] if system else []
    return RecordedRequest(
        wire="openai",
        path="/v1/chat/completions",
        headers={},
        body={"model": OFFLINE_MODEL, "tools": tools, "messages": [*head, *messages]},
    )


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def called(name: str, arguments: dict[str, Any], n: int = 1) -> dict[str, Any]:
    call = {"name": name, "arguments": json.dumps(arguments)}
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": f"c{n}", "type": "function", "function": call}],
    }


def returned(text: str, n: int = 1) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": f"c{n}", "content": text}


# ---- the argument filler ----------------------------------------------------------------


def test_optional_arguments_are_left_out_unless_the_task_gives_them(tmp_path: Path) -> None:
    file_read = schema(file_read_tool(tmp_path, 1000))
    assert fill_arguments(file_read, "Summarise README.md") == Filling({"path": "README.md"})
    # "300 words" is no number of characters: the default applies.
    assert fill_arguments(file_read, "Summarise docs/guide.md in 300 words").arguments == {
        "path": "docs/guide.md"
    }
    # Named by its unit, it is given; a number inside the path is no number of the task.
    assert fill_arguments(file_read, "Read the first 300 characters of docs/v2/a.md") == Filling(
        {"path": "docs/v2/a.md", "max_chars": 300}
    )


def test_bounds_are_kept_never_zero_for_at_least_one() -> None:
    bounded = {
        "type": "object",
        "properties": {
            "count": {"type": "integer", "minimum": 1, "maximum": 10},
            "ratio": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
            "old_style": {"type": "integer", "minimum": 5, "exclusiveMinimum": True},
        },
        "required": ["count", "ratio", "old_style"],
    }
    # 0 does not fit count, 0 and 1 do not fit ratio (exclusive), 5 not old_style (draft 4).
    found = fill_arguments(bounded, "Use 0, then 1, then 0.5, then 5 and 6")
    assert found == Filling({"count": 1, "ratio": 0.5, "old_style": 6})
    assert fill_arguments(bounded, "Use 0 and 0").missing == (
        "the task gives no whole number from 1 to 10 for 'count'"
    )
    # recall_knowledge's limit says "(1 to 20)" in words: "0 results" is not taken.
    recall = schema(KNOWLEDGE["recall_knowledge"])
    assert fill_arguments(recall, "What does ann drink? Show 0 results").arguments == {
        "query": "ann drink show results"
    }
    assert fill_arguments(recall, "What does ann drink? Show 3 results").arguments == {
        "query": "ann drink show results",
        "limit": 3,
    }


def test_numbers_in_order_and_types_kept() -> None:
    assert fill_arguments(schema(add), "What is 2+3?") == Filling({"a": 2, "b": 3})
    assert fill_arguments(schema(add), "What is 1.5 plus -4?") == Filling({"a": 1.5, "b": -4})
    whole = {
        "type": "object",
        "properties": {"n": {"type": "integer"}},
        "required": ["n"],
    }
    assert fill_arguments(whole, "Take 2.5 or else 7") == Filling({"n": 7})
    assert fill_arguments(schema(add), "Add one to this").missing == (
        "the task gives no number for 'a'"
    )
    refund = {
        "type": "object",
        "properties": {
            "amount": {"type": "integer", "description": "the amount in cents."},
            "email": {"type": "string"},
        },
        "required": ["amount", "email"],
    }
    assert fill_arguments(refund, "Refund 4200 cents to ann@example.com: order 17") == Filling(
        {"amount": 4200, "email": "ann@example.com"}
    )


def test_enums_are_named_by_the_task_or_left_out() -> None:
    recall = schema(KNOWLEDGE["recall_knowledge"])
    found = fill_arguments(recall, "Which conventions apply in src/api/handlers?")
    assert found == Filling(
        {
            "query": "conventions apply src api handlers",
            "directory": "src/api/handlers",
            "scope": "conventions",
        }
    )
    review = {
        "type": "object",
        "properties": {
            "verdict": {"type": "string", "enum": ["approve", "revise"]},
            "feedback": {"type": "string"},
        },
        "required": ["verdict"],
    }
    assert fill_arguments(review, "Check this answer") == Filling({"verdict": "approve"})
    assert fill_arguments(review, "Please revise it") == Filling({"verdict": "revise"})
    for value in fill_arguments(review, "whatever is said").arguments.values():
        assert value in ("approve", "revise")


@pytest.mark.parametrize(
    ("task", "zone"),
    [
        ("What time is it in UTC?", "UTC"),
        ("What time is it in Tokyo?", "Asia/Tokyo"),
        ("Time in Europe/Paris, please", "Europe/Paris"),
        ("What time is it in new york?", "America/New_York"),
        ("What time is it?", "UTC"),  # the tool's own description: UTC when none is given
    ],
)
def test_a_timezone_is_a_known_zone_never_the_prompt(task: str, zone: str) -> None:
    assert fill_arguments(TIMEZONE, task) == Filling({"timezone": zone})


def test_time_zones_in_order() -> None:
    text = "From Ho Chi Minh to São Paulo, via Stanley's place and Europe/Berlin, in PST"
    assert time_zones(text) == [
        "Asia/Ho_Chi_Minh",
        "America/Sao_Paulo",
        "Europe/Berlin",
        "America/Los_Angeles",
    ]
    convert = {
        "type": "object",
        "properties": {
            "source_timezone": {"type": "string", "description": "Source IANA timezone name"},
            "time": {"type": "string", "description": "Time to convert (HH:MM)"},
            "target_timezone": {"type": "string", "description": "Target IANA timezone name"},
        },
        "required": ["source_timezone", "time", "target_timezone"],
    }
    assert fill_arguments(convert, "Convert 9:30 from Tokyo to Paris") == Filling(
        {"source_timezone": "Asia/Tokyo", "time": "09:30", "target_timezone": "Europe/Paris"}
    )


def test_a_short_identifier_is_never_the_whole_prompt() -> None:
    task = "Look up the account of the customer who wrote yesterday about a lamp"
    for name in ("timezone", "id", "name", "key", "customer_id"):
        spec = {"type": "object", "properties": {name: {"type": "string"}}, "required": [name]}
        found = fill_arguments(spec, task)
        assert found.arguments == {} and found.missing is not None and name in found.missing
    with_id = {
        "type": "object",
        "properties": {"charge_id": {"type": "string"}},
        "required": ["charge_id"],
    }
    assert fill_arguments(with_id, "Refund charge CH-12ab34 now") == Filling(
        {"charge_id": "CH-12ab34"}
    )
    # An id by its description (the shop's release tool); an untyped value is a short one too.
    release = {
        "type": "object",
        "properties": {"reservation": {"type": "string", "description": "the reservation id."}},
        "required": ["reservation"],
    }
    assert fill_arguments(release, "Release R-abc123-lamp") == Filling(
        {"reservation": "R-abc123-lamp"}
    )
    assert fill_arguments(release, "Release my reservation of a lamp").missing is not None
    untyped = {"type": "object", "properties": {"item": {}}, "required": ["item"]}
    assert fill_arguments(untyped, "Reserve a big lamp", tool="reserve") == Filling(
        {"item": "big lamp"}
    )


def test_queries_are_key_words_and_free_text_is_the_task() -> None:
    recall = schema(KNOWLEDGE["recall_knowledge"])
    assert fill_arguments(recall, "What does ann prefer to drink?") == Filling(
        {"query": "ann prefer drink"}
    )
    short = {
        "type": "object",
        "properties": {"query": {"type": "string", "maxLength": 12}},
        "required": ["query"],
    }
    assert fill_arguments(short, "What does ann prefer to drink?") == Filling(
        {"query": "ann prefer"}
    )
    assert fill_arguments(
        schema(delegate), "Ask research to add 2 and 3", given={"agent": "r"}
    ) == (Filling({"agent": "r", "task": "Ask research to add 2 and 3"}))


def test_refs_patterns_and_lists() -> None:
    spec = {
        "type": "object",
        "$defs": {"Code": {"type": "string", "pattern": "^[A-Z]{2}-"}},
        "properties": {
            "order_code": {"$ref": "#/$defs/Code"},
            "urls": {"type": "array", "items": {"type": "string"}, "minItems": 2},
        },
        "required": ["order_code", "urls"],
    }
    task = "Compare https://a.example/x and https://b.example/y for order XY-99z"
    assert fill_arguments(spec, task) == Filling(
        {"order_code": "XY-99z", "urls": ["https://a.example/x", "https://b.example/y"]}
    )
    assert fill_arguments(spec, "order xy-99z at https://a.example").missing is not None


def test_what_the_task_asks_to_remember() -> None:
    assert fact_to_remember("Remember that ann prefers tea") == ("ann", "prefers", "tea")
    assert fact_to_remember("Remember: Ann prefers green tea.") == ("Ann", "prefers", "green tea")
    assert fact_to_remember("Please note that the invoice service runs on port 8443") == (
        "the invoice service",
        "runs on",
        "port 8443",
    )
    assert fact_to_remember("Note that ann's favourite drink is tea") == (
        "ann's favourite drink",
        "is",
        "tea",
    )
    for asking in (
        "What does ann prefer to drink?",
        "Do you remember what ann drinks?",
        "Remember what ann drinks?",
        "Remember to call ann",
        "Note the numbers",
        "Store it",
    ):
        assert fact_to_remember(asking) is None, asking


PIECES = [
    "What",
    "is",
    "time",
    "in",
    "Tokyo",
    "UTC",
    "Europe/Paris",
    "0",
    "1",
    "-3",
    "2.5",
    "20",
    "300",
    "characters",
    "results",
    "limit",
    "cents",
    "README.md",
    "docs/a.md",
    "https://example.com/x",
    "ann@example.com",
    "9:30",
    "CH-12ab",
    "revise",
    "conventions",
    "src/api",
    "?",
]
SCHEMAS = [
    TIMEZONE,
    schema(add),
    schema(delegate),
    schema(KNOWLEDGE["recall_knowledge"]),
    schema(KNOWLEDGE["store_knowledge"]),
    {
        "type": "object",
        "properties": {
            "count": {"type": "integer", "minimum": 1, "maximum": 10},
            "ratio": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
            "verdict": {"type": "string", "enum": ["approve", "revise"]},
            "code": {"type": "string", "maxLength": 8, "pattern": "^[A-Z]"},
            "charge_id": {"type": "string"},
            "query": {"type": "string", "minLength": 2, "maxLength": 10},
        },
        "required": ["count", "verdict"],
    },
]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=12), st.sampled_from(SCHEMAS))
def test_whatever_the_task_arguments_fit_the_schema(
    pieces: list[str], spec: dict[str, Any]
) -> None:
    task = " ".join(pieces)
    found = fill_arguments(spec, task)
    if found.missing is not None:
        assert found.arguments == {}
        return
    jsonschema.validate(found.arguments, spec)
    key_words = " ".join(search_terms(task))
    for name, value in found.arguments.items():
        if name != "task" and len(task) > 20:
            # Only free text takes the whole task (a query takes its key words, which for a
            # task of nothing but key words are the task itself).
            assert value != task or (name == "query" and value == key_words), name
    # Never 0 where at least 1 is required, never a value outside an enum.
    assert found.arguments.get("count", 1) >= 1
    assert found.arguments.get("limit", 1) >= 1


# ---- the model's turns -----------------------------------------------------------------------


def test_knowledge_is_recalled_for_a_question_and_nothing_is_stored() -> None:
    tools = advertised(KNOWLEDGE["recall_knowledge"], KNOWLEDGE["store_knowledge"])
    task = user("What does ann prefer to drink?")
    turn = offline_model(request(tools, task))
    assert turn.tool_calls == [("recall_knowledge", {"query": "ann prefer drink"})]
    answer = offline_model(
        request(
            tools,
            task,
            called("recall_knowledge", {"query": "ann prefer drink"}),
            returned("1. ann prefers tea (fact, #3)"),
        )
    )
    assert not answer.tool_calls
    assert answer.text == (
        f"{LABEL} What the tools returned:\n- recall_knowledge: 1. ann prefers tea (fact, #3)"
    )


def test_knowledge_is_stored_once_when_the_task_asks_to_remember() -> None:
    tools = advertised(KNOWLEDGE["recall_knowledge"], KNOWLEDGE["store_knowledge"])
    task = user("Remember that ann prefers tea")
    turn = offline_model(request(tools, task))
    fact = {"subject": "ann", "predicate": "prefers", "object": "tea"}
    assert turn.tool_calls == [("store_knowledge", fact)]
    answer = offline_model(
        request(
            tools,
            task,
            called("store_knowledge", fact),
            returned("stored fact #4: ann prefers tea"),
        )
    )
    assert not answer.tool_calls
    assert "stored fact #4: ann prefers tea" in answer.text


def test_a_tool_it_cannot_fill_is_not_called_and_it_says_why(tmp_path: Path) -> None:
    tools = advertised(file_read_tool(tmp_path, 1000), ("time__get_current_time", TIMEZONE))
    turn = offline_model(request(advertised(file_read_tool(tmp_path, 1000)), user("What is 2+3?")))
    assert not turn.tool_calls
    assert turn.text == (
        f"{LABEL} I called no tool, as I could not tell what to pass:\n"
        "- file_read: the task gives no file path for 'path'.\nThe task was: What is 2+3?"
    )
    # The file tool is left alone, the clock is asked, and its JSON comes back as fields.
    task = user("What time is it in UTC?")
    assert offline_model(request(tools, task)).tool_calls == [
        ("time__get_current_time", {"timezone": "UTC"})
    ]
    time = {"timezone": "UTC", "datetime": "2026-12-01T21:42:00+00:00", "is_dst": False}
    answer = offline_model(
        request(
            tools,
            task,
            called("time__get_current_time", {"timezone": "UTC"}),
            returned(json.dumps(time, indent=2)),
        )
    )
    assert answer.text == (
        f"{LABEL} What the tools returned:\n- time__get_current_time: timezone: UTC, "
        "datetime: 2026-12-01T21:42:00+00:00, is_dst: False"
    )


def test_delegation_only_to_an_agent_the_task_names() -> None:
    system = (
        "You may hand self-contained tasks to these agents with the delegate tool:\n"
        "- research: Finds things\n- writer: Writes things\nEach works on its own."
    )
    tools = advertised(delegate)
    turn = offline_model(request(tools, user("Ask writer to add 2 and 3"), system=system))
    assert turn.tool_calls == [
        ("delegate", {"agent": "writer", "task": "Ask writer to add 2 and 3"})
    ]
    turn = offline_model(request(tools, user("What is 2+3?"), system=system))
    assert not turn.tool_calls and "names none of the agents" in turn.text
    assert "(research, writer)" in turn.text


def test_answers_give_results_by_their_first_lines_and_errors_as_errors() -> None:
    tools = advertised(
        add,
        (
            "file_read",
            {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
        ),
    )
    task = user("What is 2+3 according to notes.md?")
    lines = "\n".join(f"line {n}" for n in range(1, 9))
    answer = offline_model(
        request(
            tools,
            task,
            called("add", {"a": 2, "b": 3}, 1),
            returned("ERROR: tool 'add' was denied: not today", 1),
            called("file_read", {"path": "notes.md"}, 2),
            returned(f"\n\n# Notes\n{lines}", 2),
        )
    )
    assert answer.text == (
        f"{LABEL} What the tools returned:\n"
        "- add: ERROR: tool 'add' was denied: not today\n"
        "- file_read: # Notes\n  line 1\n  line 2\n  line 3\n  line 4\n  … (4 more lines)"
    )


def test_anthropic_wire_too() -> None:
    tools = [{"name": "add", "input_schema": schema(add)}]
    task = {"role": "user", "content": [{"type": "text", "text": "What is 40+2?"}]}
    first = RecordedRequest(
        wire="anthropic",
        path="/v1/messages",
        headers={},
        body={"model": OFFLINE_MODEL, "tools": tools, "messages": [task]},
    )
    assert offline_model(first).tool_calls == [("add", {"a": 40, "b": 2})]
    after = [
        task,
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "t1", "name": "add", "input": {"a": 40, "b": 2}}
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "42"}],
        },
    ]
    second = RecordedRequest(
        wire="anthropic",
        path="/v1/messages",
        headers={},
        body={"model": OFFLINE_MODEL, "tools": tools, "messages": after},
    )
    assert offline_model(second).text == f"{LABEL} 40 + 2 = 42 (by the add tool)."


# ---- threads, forks and steering: the turn it answers -----------------------------------------


def answered(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


FIRST_TURN = [
    user("What is 2+3?"),
    called("add", {"a": 2, "b": 3}),
    returned("5"),
]


@pytest.mark.parametrize(
    ("said", "call"),
    [
        ("And what is 4+4?", {"a": 4, "b": 4}),
        ("Now add 8 to that", {"a": 5, "b": 8}),
        ("What is the result plus 10?", {"a": 5, "b": 10}),
        ("Add it to 7", {"a": 5, "b": 7}),
    ],
)
def test_a_thread_s_next_message_and_a_fork_s_are_answered(said: str, call: dict[str, Any]) -> None:
    tools = advertised(add)
    after_answer = [*FIRST_TURN, answered(f"{LABEL} 2 + 3 = 5 (by the add tool)."), user(said)]
    after_call = [*FIRST_TURN, user(said)]  # a fork after turn 1, which called add
    for messages in (after_answer, after_call):
        assert offline_model(request(tools, *messages)).tool_calls == [("add", call)]
        done = offline_model(
            request(tools, *messages, called("add", call, 2), returned(str(sum(call.values())), 2))
        )
        assert (
            done.text
            == f"{LABEL} {call['a']} + {call['b']} = {sum(call.values())} (by the add tool)."
        )


def test_that_is_the_newest_number_an_answer_or_a_tool_gave() -> None:
    tools = advertised(add)
    typed = [*FIRST_TURN, answered('{"a": 2, "b": 3, "sum": 5}'), user("What is 17+25?")]
    typed += [called("add", {"a": 17, "b": 25}, 2), returned("42", 2)]
    typed += [answered('{"a": 17, "b": 25, "sum": 42}'), user("Now add 8 to that")]
    assert offline_model(request(tools, *typed)).tool_calls == [("add", {"a": 42, "b": 8})]
    # Nothing to refer back to: it says so, as for any task that lacks a number.
    alone = offline_model(request(tools, user("Now add 8 to that")))
    assert not alone.tool_calls and "no number for 'b'" in alone.text
    # "it" in a question that needs no number is not one.
    clock = ("time__get_current_time", TIMEZONE)
    asked = [*FIRST_TURN, answered("5"), user("What time is it in UTC?")]
    assert offline_model(request(advertised(add, clock), *asked)).tool_calls == [
        ("time__get_current_time", {"timezone": "UTC"})
    ]


def test_a_steering_message_that_gives_the_tools_nothing_lets_the_turn_go_on() -> None:
    tools = advertised(
        add,
        (
            "file_read",
            {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
        ),
    )
    steered = [*FIRST_TURN, user("Keep it short, please")]
    turn = offline_model(request(tools, *steered))
    assert not turn.tool_calls
    assert turn.text == f"{LABEL} 2 + 3 = 5 (by the add tool)."  # the turn it joined
    # orga's own notices never begin a turn: the answer after a gate's word is the same turn's.
    notice = user("[orga gate] The call was denied: not today")
    assert offline_model(request(tools, *FIRST_TURN, notice)).text == turn.text


# ---- typed answers -----------------------------------------------------------------------------


SUM = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}, "sum": {"type": "integer"}},
    "required": ["a", "b", "sum"],
}


def typed_request(
    schema: dict[str, Any], *messages: dict[str, Any], how: str = "shown", tools: bool = True
) -> RecordedRequest:
    """A request of a typed loop: the schema shown in orga's system message, given as the
    provider's structured output, or shown again after an answer that did not match."""
    body: dict[str, Any] = {"model": OFFLINE_MODEL, "messages": list(messages)}
    if tools:
        body["tools"] = advertised(add)
    if how == "shown":
        body["messages"] = [m.model_dump() for m in with_schema([], schema)] + body["messages"]
    elif how == "constrained":
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": "answer", "schema": schema},
        }
    else:
        retry = (
            "[orga] Your final answer must be JSON matching the output schema, and it does not: "
            "the answer is not JSON. Answer again with the JSON only. The schema: "
        )
        retry += schema_text(schema)
        body["messages"] += [answered("42"), user(retry)]
    return RecordedRequest(wire="openai", path="/v1/chat/completions", headers={}, body=body)


@pytest.mark.parametrize("how", ["shown", "constrained", "retried"])
def test_a_typed_answer_calls_the_tool_then_answers_json_that_validates(how: str) -> None:
    task = user("What is 17+25?")
    first = offline_model(typed_request(SUM, task, how=how))
    if how != "retried":  # the tool first, as an untyped loop
        assert first.tool_calls == [("add", {"a": 17, "b": 25})]
    done = offline_model(
        typed_request(SUM, task, called("add", {"a": 17, "b": 25}), returned("42"), how=how)
    )
    assert not done.tool_calls
    assert json.loads(done.text) == {"a": 17, "b": 25, "sum": 42}


def test_a_typed_answer_without_tools_takes_the_task_s_values() -> None:
    class Refund(BaseModel):
        refund_id: str
        amount: int

    schema = Refund.model_json_schema()
    answer = offline_model(typed_request(schema, user("Refund order 7"), tools=False))
    refund = Refund.model_validate_json(answer.text)
    assert refund.amount == 7 and refund.refund_id.startswith("refund")
    nested = {
        "type": "object",
        "$defs": {
            "Line": {
                "type": "object",
                "properties": {
                    "sku": {"type": "string", "pattern": "^[A-Z]{2}-"},
                    "qty": {"type": "integer", "minimum": 1},
                },
                "required": ["sku", "qty"],
            }
        },
        "properties": {
            "lines": {"type": "array", "items": {"$ref": "#/$defs/Line"}, "minItems": 1},
            "status": {"enum": ["open", "shipped", "closed"]},
            "email": {"type": "string", "format": "email"},
            "note": {"anyOf": [{"type": "string", "maxLength": 30}, {"type": "null"}]},
            "urgent": {"type": "boolean"},
        },
        "required": ["lines", "status", "email"],
    }
    task = "Ship 3 of XY-12 to ann@example.com, the order is shipped"
    value = json.loads(offline_model(typed_request(nested, user(task), tools=False)).text)
    jsonschema.validate(value, nested)
    assert value["lines"] == [{"sku": "XY-12", "qty": 3}]
    assert (value["status"], value["email"]) == ("shipped", "ann@example.com")
    assert value["note"].startswith(LABEL[:25])


_NAMES = ["a", "b", "sum", "total", "refund_id", "email", "summary", "count", "tags", "url", "when"]


def _schemas() -> st.SearchStrategy[dict[str, Any]]:
    bounds = st.integers(-5, 50)
    leaves = st.one_of(
        st.tuples(bounds, bounds).map(
            lambda b: {"type": "integer", "minimum": min(b), "maximum": max(b)}
        ),
        st.just({"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1}),
        st.tuples(st.integers(0, 5), st.integers(0, 40)).map(
            lambda n: {"type": "string", "minLength": min(n), "maxLength": max(n)}
        ),
        st.just({"type": "string", "format": "date"}),
        st.just({"enum": ["low", "high"]}),
        st.just({"type": "boolean"}),
        st.just({"type": "null"}),
        st.just({"const": 3}),
        st.just({"type": "integer", "multipleOf": 5, "minimum": 1}),
    )
    return st.recursive(
        leaves,
        lambda inner: st.one_of(
            st.dictionaries(st.sampled_from(_NAMES), inner, max_size=4).flatmap(
                lambda properties: st.lists(
                    st.sampled_from(sorted(properties) or ["a"]), unique=True
                ).map(
                    lambda required: {
                        "type": "object",
                        "properties": properties,
                        "required": [r for r in required if r in properties],
                    }
                )
            ),
            st.tuples(inner, st.integers(0, 2), st.integers(0, 2)).map(
                lambda t: {
                    "type": "array",
                    "items": t[0],
                    "minItems": min(t[1:]),
                    "maxItems": max(t[1:]),
                }
            ),
            inner.map(lambda s: {"anyOf": [s, {"type": "null"}]}),
        ),
        max_leaves=8,
    )


@settings(max_examples=300, deadline=None)
@given(_schemas(), st.lists(st.sampled_from(PIECES), max_size=10), st.booleans())
def test_whatever_the_schema_a_typed_answer_validates(
    schema: dict[str, Any], pieces: list[str], with_call: bool
) -> None:
    task = user(" ".join(pieces) or "hello")
    messages = [task, called("add", {"a": 2, "b": 3}), returned("5")] if with_call else [task]
    answer = offline_model(typed_request(schema, *messages, tools=with_call))
    jsonschema.validate(json.loads(answer.text), schema)


def test_anthropic_wire_a_fork_s_message_shares_the_results_message() -> None:
    """On the Anthropic wire a message after a turn's results can share their user message."""
    tools = [{"name": "add", "input_schema": schema(add)}]
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "What is 2+3?"}]},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "add", "input": {"a": 2, "b": 3}}],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "5"},
                {"type": "text", "text": "Now add 8 to that"},
            ],
        },
    ]
    forked = RecordedRequest(
        wire="anthropic",
        path="/v1/messages",
        headers={},
        body={"model": OFFLINE_MODEL, "tools": tools, "messages": messages},
    )
    assert offline_model(forked).tool_calls == [("add", {"a": 5, "b": 8})]

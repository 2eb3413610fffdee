"""Issue 50, as the attacker tried it: a schema (a client's ``output_schema``, an MCP server's
tool schema) and a value (a model's answer or arguments) chosen to freeze the worker that
checks one against the other. Every regex runs in RE2, the work is bounded, nothing is
fetched, and other loops on the worker keep answering.

No test measures time: an input that took Python's backtracking ``re`` (or jsonschema's stock
validator) minutes or centuries is used, so a regression hangs the test until its timeout.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import pytest
from mcp.server.mcpserver import MCPServer
from pydantic import Field

from orga.activities.answers import check_answer
from orga.contracts.answers import AnswerCheck
from orga.contracts.errors import InvalidConfig, OutputInvalid, ToolInputError
from orga.knowledge.conventions import find_conventions
from orga.runtime.json_schema import (
    MAX_SCHEMA_BYTES,
    MAX_SCHEMA_DEPTH,
    JsonSchema,
    SchemaRefused,
    schema_problem,
)
from orga.scripted.arguments import fits
from orga.scripted.clues import fact_to_remember, time_zones
from orga.scripted.server import Turn
from orga.tools.mcp.hub import open_mcp
from tests.harness import Harness
from tests.helpers import failure, http_server, servers_file
from tests.local_http import Reply, serve

EVIL = "^(a+)+$"
"""Exponential in Python's ``re`` on ``a…a!``: 29 characters held a worker for 19 s."""
LONG_EVIL = "a" * 5_000 + "!"
"""Far past anything Python's ``re`` would finish on ``EVIL`` (2^5000 steps); RE2: linear."""


def messages(schema: dict[str, Any], value: Any) -> list[str]:
    return [e.message for e in JsonSchema(schema).errors(value)]


@pytest.fixture
def fetched() -> Iterator[tuple[str, list[str]]]:
    """A server that records every request: a schema's ``$ref`` must never reach it."""
    hits: list[str] = []

    def answer(method: str, path: str, body: bytes) -> Reply:
        hits.append(path)
        return 200, "application/json", b'{"type": "string"}'

    with serve(answer) as url:
        yield url, hits


# ---- the regexes of a schema run in RE2 ---------------------------------------------------


def test_the_catastrophic_pattern_gets_a_verdict_in_linear_time() -> None:
    schema = {"type": "string", "pattern": EVIL}
    [refused] = messages(schema, LONG_EVIL)
    assert refused.endswith(f"does not match {EVIL!r}")
    assert messages(schema, "a" * 100_000) == []  # and a match is still a match


def test_pattern_properties_and_the_keywords_that_consult_them_run_in_re2() -> None:
    evil_key = "a" * 5_000 + "!"
    closed = {"type": "object", "patternProperties": {EVIL: {"type": "integer"}}}
    for keyword in ("additionalProperties", "unevaluatedProperties"):
        found = messages({**closed, keyword: False}, {evil_key: 1, "aaa": "x"})
        assert "'x' is not of type 'integer'" in found  # "aaa" matched the pattern
        assert any(evil_key in m and "not" in m for m in found)  # the evil key did not
    assert messages({**closed, "additionalProperties": False}, {"aa": 1}) == []


def test_a_pattern_re2_cannot_run_is_refused_with_why_and_the_fix() -> None:
    for schema in (
        {"type": "string", "pattern": "^(?=a)a+$"},  # lookahead
        {"type": "object", "patternProperties": {r"(a)\1": {}}},  # backreference
        {"$defs": {"x": {"pattern": "(?<!b)a"}}},  # lookbehind, in an unused definition
    ):
        problem = schema_problem(schema)
        assert problem is not None and "not a regex RE2 can run in linear time" in problem
        assert "rewrite it without them" in problem
        with pytest.raises(SchemaRefused):
            JsonSchema(schema)


def test_a_ref_into_a_place_no_schema_is_read_reaches_no_python_regex() -> None:
    """The meta-schema never reads an unknown keyword's value; a ``$ref`` can still point
    there. The regex is refused when the check reaches it, never run in Python's ``re``."""
    hidden = {"x-hidden": {"pattern": "(?=a)(a+)+$"}, "$ref": "#/x-hidden"}
    with pytest.raises(SchemaRefused, match="RE2 can run in linear time"):
        JsonSchema(hidden).errors(LONG_EVIL)
    run = {"x-hidden": {"pattern": EVIL}, "$ref": "#/x-hidden"}
    assert len(messages(run, LONG_EVIL)) == 1


def test_a_subschema_naming_another_dialect_is_still_checked_here() -> None:
    """jsonschema switches to its stock class where a subschema says ``$schema`` (Python's
    regexes): draft-07 below the root, and a root reached again through ``$ref: "#"``."""
    draft7 = "http://json-schema.org/draft-07/schema#"
    nested = {"properties": {"code": {"$schema": draft7, "pattern": EVIL}}}
    assert len(messages(nested, {"code": LONG_EVIL})) == 1
    recursive = {
        "$schema": draft7,
        "properties": {"next": {"$ref": "#"}, "code": {"pattern": EVIL}},
    }
    assert len(messages(recursive, {"next": {"next": {"code": LONG_EVIL}}})) == 1


def test_format_is_an_annotation_for_values() -> None:
    assert messages({"type": "string", "format": "regex"}, "(?=a)(a+)+$") == []


# ---- a schema is refused past its bounds, and its work is bounded -------------------------


def test_a_schema_too_large_or_too_deep_is_refused() -> None:
    large = {"type": "string", "description": "x" * MAX_SCHEMA_BYTES}
    assert f"past the {MAX_SCHEMA_BYTES:,}" in (schema_problem(large) or "")
    deep: dict[str, Any] = {"type": "string"}
    for _ in range(MAX_SCHEMA_DEPTH):
        deep = {"type": "object", "properties": {"x": deep}}
    assert "MAX_SCHEMA_DEPTH" in (schema_problem(deep) or "")
    for schema in (large, deep):
        with pytest.raises(SchemaRefused):
            JsonSchema(schema)


def test_a_schema_that_fans_out_is_refused_as_too_costly_not_run_for_hours() -> None:
    """18 levels of ``anyOf`` over ``$ref`` (1.3 KB): 2^18 paths; 30 levels would be 2^30."""
    levels = 30
    defs: dict[str, Any] = {
        f"a{i}": {"anyOf": [{"$ref": f"#/$defs/a{i + 1}"}, {"$ref": f"#/$defs/a{i + 1}"}]}
        for i in range(levels)
    }
    defs[f"a{levels}"] = {"type": "string"}
    fans_out = JsonSchema({"$defs": defs, "$ref": "#/$defs/a0"})
    assert fans_out.errors("fine") == []  # the first branch holds: no fan-out
    with pytest.raises(SchemaRefused, match="is too costly to check"):
        fans_out.errors(1)  # every branch fails: each level doubles the work


def test_unique_items_of_many_objects_is_bounded() -> None:
    """jsonschema compares every pair of items it cannot sort."""
    with pytest.raises(SchemaRefused, match="MAX_STEPS"):
        JsonSchema({"uniqueItems": True}).errors([{"n": i} for i in range(100_000)])
    assert JsonSchema({"uniqueItems": True}).errors([{"n": i} for i in range(100)]) == []


def test_a_ref_that_reaches_itself_is_refused_not_a_crash() -> None:
    with pytest.raises(SchemaRefused, match="recursed without end"):
        JsonSchema({"$ref": "#"}).errors(1)


# ---- nothing is fetched ---------------------------------------------------------------------


def test_no_ref_is_fetched(fetched: tuple[str, list[str]]) -> None:
    url, hits = fetched
    for schema in (
        {"$ref": f"{url}/evil.json"},
        {"properties": {"x": {"$ref": f"{url}/evil.json"}}},
        {"$id": f"{url}/root.json", "$ref": "evil.json"},  # relative to a remote base
        {"$dynamicRef": f"{url}/evil.json"},
    ):
        problem = schema_problem(schema)
        assert problem is not None and "orga never fetches a schema" in problem, schema
    assert hits == []


def test_the_json_schema_meta_schemas_resolve_offline(fetched: tuple[str, list[str]]) -> None:
    meta = JsonSchema({"$ref": "https://json-schema.org/draft/2020-12/schema"})
    [error] = meta.errors({"type": "nonsense"})
    assert "is not valid under any of the given schemas" in error.message
    assert fetched[1] == []


# ---- the answer activity --------------------------------------------------------------------


async def test_check_answer_gives_a_verdict_on_the_evil_answer() -> None:
    schema = {"type": "string", "pattern": EVIL}
    evil = await check_answer(AnswerCheck(answer=json.dumps(LONG_EVIL), output_schema=schema))
    assert not evil.valid and "does not match" in evil.problem
    assert len(evil.problem) < 1_000  # the value is not quoted whole back to the model
    good = await check_answer(AnswerCheck(answer='"aaaa"', output_schema=schema))
    assert good.valid and good.value == "aaaa"


async def test_check_answer_reports_a_schema_too_costly_for_the_value() -> None:
    check = AnswerCheck(
        answer=json.dumps([{"n": i} for i in range(50_000)]),
        output_schema={"type": "array", "uniqueItems": True},
    )
    checked = await check_answer(check)
    assert not checked.valid
    assert checked.problem.startswith("the answer could not be checked: output_schema is too")


# ---- on the dev server: the typed loop that froze a worker ----------------------------------


async def test_the_evil_typed_answer_fails_its_loop_while_another_loop_answers(
    harness: Harness,
) -> None:
    evil = harness.new_model([Turn(text=json.dumps(LONG_EVIL)), Turn(text=json.dumps("b!"))])
    typed = harness.new_model([Turn(text=json.dumps("aaaa"))])
    plain = harness.new_model([Turn(text="pong")])
    schema = {"type": "string", "pattern": EVIL}
    async with harness.worker():
        attacked = await harness.start("x", model=evil, output_schema=schema, output_retries=1)
        matching = await harness.start("x", model=typed, output_schema=schema)
        other = await harness.start("ping", model=plain)
        assert (await other.result()).output == "pong"
        assert (await matching.result()).value == "aaaa"
        error = await failure(attacked, OutputInvalid.__name__)
    assert "does not match" in error.message
    shown = harness.model.requests_for(evil)[1].user_texts()[-1]
    assert f"does not match {EVIL!r}" in shown  # the model was told why, as for any miss


async def test_schemas_the_worker_will_not_run_are_refused_when_the_loop_starts(
    harness: Harness, fetched: tuple[str, list[str]]
) -> None:
    url, hits = fetched
    refused = {
        "not a regex RE2 can run": {"type": "string", "pattern": "^(?=a)(a+)+$"},
        "orga never fetches a schema": {"$ref": f"{url}/evil.json"},
        f"past the {MAX_SCHEMA_BYTES:,}": {"description": "x" * MAX_SCHEMA_BYTES},
    }
    async with harness.worker():
        for why, schema in refused.items():
            model = harness.new_model([Turn(text='"a"')])
            handle = await harness.start("x", model=model, output_schema=schema)
            error = await failure(handle, InvalidConfig.__name__)
            assert error.message.startswith("the loop could not be set up: config.output_schema")
            assert why in error.message
            assert harness.model.requests_for(model) == []  # refused before any model call
    assert hits == []


# ---- an MCP server's tool schemas -----------------------------------------------------------


def hostile_server(url: str) -> MCPServer:
    server = MCPServer("hostile")

    @server.tool()
    def lookup(code: Annotated[str, Field(pattern=EVIL)]) -> str:
        """Look a code up."""
        return code

    @server.tool()
    def peek(code: Annotated[str, Field(json_schema_extra={"pattern": "^(?=a)"})]) -> str:
        """A lookahead."""
        return code

    def fetch(code: str) -> str:
        """A remote definition."""
        return code

    remote = Field(json_schema_extra={"$ref": f"{url}/evil.json"})
    fetch.__annotations__["code"] = Annotated[str, remote]  # a local: no string annotation
    server.add_tool(fetch)

    @server.tool()
    def bloated(code: Annotated[str, Field(description="x" * MAX_SCHEMA_BYTES)]) -> str:
        """A schema past the bound."""
        return code

    return server


async def test_an_mcp_servers_tool_schemas_are_checked_and_bounded(
    tmp_path: Path, fetched: tuple[str, list[str]]
) -> None:
    url, hits = fetched
    async with http_server(hostile_server(url), "tok-50") as address:
        path = servers_file(
            tmp_path,
            f'[servers.hostile]\nurl = "{address}"\n'
            'headers = { Authorization = "Bearer tok-50" }\n',
        )
        async with open_mcp(path) as hub:
            assert hub is not None
            tools = hub.current()
            assert set(tools) == {"hostile__lookup"}  # the others are refused, the server stays
            with pytest.raises(ToolInputError, match="does not match"):
                tools["hostile__lookup"].validate({"code": LONG_EVIL})
            assert tools["hostile__lookup"].validate({"code": "aaa"}) == {"code": "aaa"}
            for name, why in (
                ("hostile__peek", "RE2 can run in linear time"),
                ("hostile__fetch", "orga never fetches a schema"),
                ("hostile__bloated", f"past the {MAX_SCHEMA_BYTES:,}"),
            ):
                absent = hub.absent(name) or ""
                assert "MCP server 'hostile': the input schema of tool" in absent, absent
                assert why in absent and "until the server's schema is fixed" in absent
    assert hits == []


# ---- other regexes a client, a model or a server reaches ------------------------------------


def test_the_offline_model_reads_hostile_tasks_and_schemas_in_linear_time() -> None:
    """The offline scripted model runs in the worker's process: its task, its tools'
    descriptions and schemas are the client's and the MCP server's."""
    assert time_zones("Aaa-" * 50_000) == []  # quadratic in Python's re (a start per "-")
    assert fact_to_remember("remember x" + "\n." * 100_000 + "\x00") is not None
    assert fact_to_remember("Remember that ann prefers tea...") == ("ann", "prefers", "tea")
    assert not fits(LONG_EVIL, {"type": "string", "pattern": EVIL})  # a tool schema's regex
    assert fits("x", {"type": "string", "pattern": "(?=x)"})  # RE2 cannot: the tool decides


def test_a_convention_file_with_a_hostile_heading_is_read_in_linear_time(tmp_path: Path) -> None:
    heading = "# " + "##" * 100_000 + "\x00"  # cubic in Python's re (a lazy heading)
    (tmp_path / "AGENTS.md").write_text(f"# Style #\n- short lines\n{heading}\n- tabs\n")
    found = [c.content for c in find_conventions(tmp_path).conventions]
    assert found[0] == "Style: short lines"
    assert len(found) == 2 and found[1].startswith("###")  # "- tabs" under it (cut long)

"""A JSON Schema validator whose regexes run in RE2, and whose work is bounded.

Schemas come from people and programs orga does not trust: a client's ``output_schema``, an
MCP server's tool input schemas. The instances checked against them come from models. With
``jsonschema`` as it ships, either side could hold a worker: its ``pattern``,
``patternProperties`` and ``additionalProperties`` run Python's backtracking ``re``, in which
``^(a+)+$`` against thirty characters takes seconds (each one more doubles it) while holding the
GIL, so no timeout, heartbeat or poller of the worker runs meanwhile; ``anyOf`` over ``$ref``
chains fans out exponentially in pure Python (18 levels, 1.3 KB of schema: 28 s); and a
``$ref`` to an ``http`` URL is fetched from the worker's network. Here, on jsonschema's own
extension API (``validators.extend``), Draft 2020-12:

* Every regex a schema carries runs in RE2 (``orga.contracts.prehydration.compile_pattern``),
  in time linear in the text: ``pattern``, ``patternProperties``, the patterns
  ``additionalProperties`` and ``unevaluatedProperties`` consult, and ``format: regex`` when a
  schema is checked against the meta-schema. A pattern RE2 cannot compile (a lookaround, a
  backreference) is a schema problem, refused with its reason, never passed over. ``format``
  stays an annotation when instances are checked, as in jsonschema by default.
* A schema is refused before use (``schema_problem``) past ``MAX_SCHEMA_BYTES`` of JSON or
  ``MAX_SCHEMA_DEPTH`` levels of nesting, when it is not a Draft 2020-12 schema, or when a
  ``$ref`` points outside it: nothing is fetched, only the JSON Schema meta-schemas are known.
* Checking one value spends at most ``MAX_STEPS`` steps (each keyword evaluated costs one,
  plus the entries it walks); past that the schema is refused as too costly to check. So even
  a schema that fans out ends, with a verdict, in bounded time (about a second).
* A subschema's ``$schema`` does not switch to jsonschema's stock validator classes (whose
  regexes are Python's): every subschema is checked as Draft 2020-12.

The keywords and the budget are ``orga.runtime._json_schema_keywords``.

Schema problems read as a predicate of the schema ("is not a JSON Schema: …"), so a caller
names the schema first: ``f"config.output_schema {problem}"``.
"""

from __future__ import annotations

import json
from typing import Any, Final

import referencing.exceptions
from jsonschema import Draft202012Validator, FormatChecker, ValidationError
from referencing import Registry
from referencing.jsonschema import DRAFT202012

from orga.contracts.prehydration import compile_pattern
from orga.runtime._json_schema_keywords import MAX_STEPS, SchemaRefused, Validator, budgeted

__all__ = [
    "MAX_SCHEMA_BYTES",
    "MAX_SCHEMA_DEPTH",
    "MAX_STEPS",
    "JsonSchema",
    "SchemaRefused",
    "schema_problem",
]

MAX_SCHEMA_BYTES: Final = 64 * 1024
"""JSON of one schema, compact. Hand-written and generated schemas (pydantic's, an MCP
server's tools) stay far below it; the bound keeps what a check walks, and what every model
call carries, small."""

MAX_SCHEMA_DEPTH: Final = 32
"""Nesting of a schema's objects and arrays. An object's property costs two levels
(``properties`` → its schema), so this is sixteen levels of nested objects; deeper types
belong under ``$defs``. The bound keeps every walk over a schema far from Python's recursion
limit."""

_OFFLINE: Final = Registry[Any]()
"""No retrieval: a ``$ref`` resolves within the schema or to a JSON Schema meta-schema
(jsonschema adds those), or not at all. jsonschema's default registry fetches any URL."""

_FORMATS: Final = FormatChecker()
"""jsonschema's format checks, for a schema checked against the meta-schema, with ``regex``
in RE2."""
_FORMATS.checkers = {**Draft202012Validator.FORMAT_CHECKER.checkers}


@_FORMATS.checks("regex", raises=ValueError)
def _is_regex(instance: object) -> bool:
    if isinstance(instance, str):
        compile_pattern(instance)  # raises ValueError, with why, for a regex RE2 cannot run
    return True


def _depth_past(node: object, limit: int) -> bool:
    """Does ``node`` nest deeper than ``limit`` (recursion stops at ``limit``)?"""
    children: list[object]
    if isinstance(node, dict):
        children = list(node.values())  # pyright: ignore[reportUnknownArgumentType, reportUnknownMemberType] (JSON)
    elif isinstance(node, list):
        children = list(node)  # pyright: ignore[reportUnknownArgumentType] (JSON)
    else:
        return False
    return limit == 0 or any(_depth_past(child, limit - 1) for child in children)


def _too_big(schema: Any) -> str | None:
    if _depth_past(schema, MAX_SCHEMA_DEPTH):
        return (
            f"nests deeper than {MAX_SCHEMA_DEPTH} levels of objects and arrays "
            "(MAX_SCHEMA_DEPTH): define deep types once under $defs and refer to them with $ref"
        )
    try:
        size = len(json.dumps(schema, separators=(",", ":"), allow_nan=False).encode())
    except (TypeError, ValueError) as error:
        return f"is not JSON ({error})"
    if size > MAX_SCHEMA_BYTES:
        return (
            f"is {size:,} bytes of JSON, past the {MAX_SCHEMA_BYTES:,} orga checks against "
            "(MAX_SCHEMA_BYTES): split it, or leave out descriptions and examples"
        )
    return None


_META: Final[Any] = Validator(
    Draft202012Validator.META_SCHEMA, format_checker=_FORMATS, registry=_OFFLINE
)
"""The Draft 2020-12 meta-schema, checked as any schema is (RE2, within the budget): what
``check_schema`` does, without its stock validator's Python regexes and unbounded work."""


def _not_a_schema(schema: Any) -> str | None:
    try:
        with budgeted():
            error: ValidationError | None = next(_META.iter_errors(schema), None)
    except SchemaRefused as refused:
        return str(refused)
    if error is None:
        return None
    if error.validator == "format" and error.cause is not None:  # a regex RE2 refused
        return f"has a regex at {error.json_path} that orga cannot run: {error.cause}"
    return f"is not a JSON Schema (Draft 2020-12): {error.message} (at {error.json_path})"


def _outside_ref(schema: Any) -> str | None:
    """The first ``$ref`` or ``$dynamicRef`` that does not resolve within ``schema``, found
    as the validator would follow it (its registry, its resolver, every subschema)."""
    pending: list[tuple[Any, Any]] = [(schema, Validator(schema, registry=_OFFLINE)._resolver)]
    while pending:
        contents: Any
        resolver: Any
        contents, resolver = pending.pop()
        for keyword in ("$ref", "$dynamicRef"):
            ref = contents.get(keyword) if isinstance(contents, dict) else None  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType] (JSON)
            if not isinstance(ref, str):
                continue
            try:
                resolver.lookup(ref)
            except referencing.exceptions.Unresolvable:
                return (
                    f"has a {keyword} {ref!r} that does not resolve within it: orga never "
                    "fetches a schema; put the definition under $defs and refer to it as "
                    "'#/$defs/<name>'"
                )
        for sub in DRAFT202012.subresources_of(contents):  # pyright: ignore[reportUnknownArgumentType] (JSON)
            pending.append((sub, resolver.in_subresource(DRAFT202012.create_resource(sub))))
    return None


def schema_problem(schema: Any) -> str | None:
    """Why orga refuses ``schema``, as a predicate ("is …, past …", with the fix), or
    ``None``: too large or deep, not a Draft 2020-12 JSON Schema, a regex RE2 cannot run, or
    a ``$ref`` outside it."""
    return _too_big(schema) or _not_a_schema(schema) or _outside_ref(schema)


class JsonSchema:
    """A schema orga accepted, to check values against: regexes in RE2, work bounded by
    ``MAX_STEPS``, nothing fetched."""

    def __init__(self, schema: Any) -> None:
        """Raises:
        SchemaRefused: ``schema_problem`` refuses it.
        """
        if (problem := schema_problem(schema)) is not None:
            raise SchemaRefused(problem)
        self.schema = schema
        self._validator: Any = Validator(schema, registry=_OFFLINE)

    def errors(self, value: Any) -> list[ValidationError]:
        """Where ``value`` does not match the schema, in the order of their paths.

        Raises:
            SchemaRefused: checking it would take more than ``MAX_STEPS`` steps, recursed
                without end, or reached a regex RE2 cannot run or a ``$ref`` that does not
                resolve (through a ``$ref`` into a place the meta-schema does not read as a
                schema).
        """
        try:
            with budgeted():
                found: list[ValidationError] = list(self._validator.iter_errors(value))
        except referencing.exceptions.Unresolvable as error:
            raise SchemaRefused(
                f"has a $ref that does not resolve within it ({error}): orga never fetches a "
                "schema; put the definition under $defs"
            ) from error
        except RecursionError as error:
            raise SchemaRefused(
                "recursed without end: a $ref reaches itself through no keyword that moves "
                "into the value, or the value nests deeper than Python can follow; break the "
                "cycle"
            ) from error
        return sorted(found, key=lambda e: [str(p) for p in e.path])

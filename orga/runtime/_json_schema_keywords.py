"""The validator behind ``orga.runtime.json_schema``: jsonschema's Draft 2020-12, its regexes in
RE2 and every keyword it evaluates charged to a budget.

The four keywords that run a regex are jsonschema 4.26's own (``_keywords``, ``_utils``) with
``re.search`` made RE2's: ``pattern``, ``patternProperties``, and ``additionalProperties`` and
``unevaluatedProperties``, which consult ``patternProperties`` to know which keys are
accounted for. Every keyword, those and the stock ones, is wrapped to charge the check's
budget first (``_cost``): one step, plus one per entry it walks itself; what it descends into
is charged as it runs. ``evolve`` keeps this class for every subschema, whatever its
``$schema`` says (jsonschema would switch to a stock class there, with Python's regexes).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any, Final

from jsonschema import Draft202012Validator, ValidationError, validators

from orga.contracts.prehydration import compile_pattern

__all__ = ["MAX_STEPS", "SchemaRefused", "Validator", "budgeted"]

MAX_STEPS: Final = 500_000
"""Steps one check may spend: a keyword evaluated costs one, plus one per entry it walks (a
``required`` name, an ``enum`` value, the pairs of ``uniqueItems`` items it cannot sort), one
per KiB of a string it reads, two per regex search, five per subschema it moves into or
``$ref`` it follows. Measured at 0.5 to 2.2 µs a step whatever the schema: about a second at
most; an answer of a thousand objects of five fields takes ~90,000."""


class SchemaRefused(Exception):
    """A schema orga will not run, or not to the end. The message is a predicate of the
    schema ("is …, past …"), with the fix: the caller names the schema before it."""


# ---- the budget --------------------------------------------------------------------------


class _Budget:
    def __init__(self, steps: int) -> None:
        self.left = steps


_budget: ContextVar[_Budget | None] = ContextVar("orga_json_schema_budget", default=None)
"""The budget of the check running in this thread or task (``budgeted`` sets it)."""


class budgeted:
    """Give the checks inside a fresh budget of ``MAX_STEPS``."""

    def __enter__(self) -> None:
        self._token = _budget.set(_Budget(MAX_STEPS))

    def __exit__(self, *_: object) -> None:
        _budget.reset(self._token)


def _charge(steps: int) -> None:
    budget = _budget.get()
    if budget is None:  # only JsonSchema.errors runs the validator, always within a budget
        raise RuntimeError("orga's JSON Schema validator ran outside `with budgeted():`")
    budget.left -= steps
    if budget.left < 0:
        raise SchemaRefused(
            f"is too costly to check: the check took more than {MAX_STEPS:,} validation steps "
            "(MAX_STEPS; anyOf/oneOf/allOf over $ref chains, and thousands of subschemas, "
            "multiply the work); simplify the schema"
        )


_DESCENT: Final = 5
"""Steps for moving into a subschema (``evolve``: a new validator) or following a ``$ref``:
each costs about as much as five plain keywords (measured)."""

_REGEX: Final = 2
"""Steps for one regex search (RE2 through its Python wrapper)."""

_PER_PROPERTY: Final = frozenset(
    ["patternProperties", "additionalProperties", "unevaluatedProperties"]
)
"""Keywords that run each property of the instance against each pattern of the schema."""


def _cost(keyword: str, value: Any, instance: Any, schema: Any) -> int:
    """Steps for one keyword: its own walk over its entries and the instance's."""
    steps = 1 + (len(value) if isinstance(value, list | dict) else 0)  # pyright: ignore[reportUnknownArgumentType] (JSON)
    if keyword in ("$ref", "$dynamicRef"):
        steps += _DESCENT
    if isinstance(instance, str):
        steps += len(instance) // 1024  # RE2, len() and comparisons are linear in it
    elif keyword in _PER_PROPERTY and isinstance(instance, dict):
        patterns: Any = schema.get("patternProperties", {})  # a keyword's schema is an object
        steps += len(instance) * (1 + _REGEX * len(patterns))  # pyright: ignore[reportUnknownArgumentType] (JSON)
    elif keyword == "uniqueItems" and value is True and isinstance(instance, list):
        items: list[Any] = instance  # pyright: ignore[reportUnknownVariableType] (JSON)
        sortable = all(isinstance(i, str) for i in items) or all(
            isinstance(i, int | float) and not isinstance(i, bool) for i in items
        )
        steps += len(items) if sortable else len(items) ** 2  # jsonschema compares every pair
    return steps


def _charged(
    keyword: str, check: Callable[..., Iterator[ValidationError] | None]
) -> Callable[..., Iterator[ValidationError]]:
    def charged(
        validator: Any, value: Any, instance: Any, schema: Any
    ) -> Iterator[ValidationError]:
        _charge(_cost(keyword, value, instance, schema))
        yield from check(validator, value, instance, schema) or ()

    return charged


# ---- the keywords that run a regex, in RE2 -----------------------------------------------


def _regex(pattern: str) -> Any:
    try:
        return compile_pattern(pattern)
    except ValueError as error:  # reached through a $ref into what the meta-schema never read
        raise SchemaRefused(f"has a regex orga cannot run: {error}") from error


def _shown(text: str) -> str:
    """``text`` quoted, its middle left out past 80 characters (the message goes to a model)."""
    quoted = repr(text)
    return quoted if len(quoted) <= 80 else f"{quoted[:40]}…{quoted[-20:]} ({len(text):,} chars)"


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and _regex(pattern).search(instance) is None:
        yield ValidationError(f"{_shown(instance)} does not match {pattern!r}")


def _pattern_properties(
    validator: Any, patterns: dict[str, Any], instance: Any, schema: Any
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        regex = _regex(pattern)
        for key, value in instance.items():
            if regex.search(key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _listed(extras: list[Any]) -> tuple[str, str]:
    return ", ".join(repr(e) for e in extras), "was" if len(extras) == 1 else "were"


def _additional_properties(
    validator: Any, allowed: Any, instance: Any, schema: dict[str, Any]
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    named = schema.get("properties", {})
    regexes = [_regex(p) for p in schema.get("patternProperties", {})]
    extras = {k for k in instance if k not in named and not any(r.search(k) for r in regexes)}
    if validator.is_type(allowed, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], allowed, path=extra)
    elif not allowed and extras:
        if "patternProperties" in schema:
            verb = "does" if len(extras) == 1 else "do"
            joined = ", ".join(repr(each) for each in sorted(extras))
            patterns = ", ".join(repr(each) for each in sorted(schema["patternProperties"]))
            yield ValidationError(f"{joined} {verb} not match any of the regexes: {patterns}")
        else:
            error = "Additional properties are not allowed (%s %s unexpected)"
            yield ValidationError(error % _listed(sorted(extras, key=str)))


def _valid(errors: Iterator[ValidationError]) -> bool:
    return next(errors, None) is None


def _evaluated_keys(validator: Any, instance: dict[str, Any], schema: Any) -> list[str]:
    """The keys ``schema`` evaluates (jsonschema's ``find_evaluated_property_keys_by_schema``)."""
    if validator.is_type(schema, "boolean"):
        return []
    patterns: dict[str, Any] = schema.get("patternProperties", {})
    _charge(1 + len(instance) * _REGEX * len(patterns))
    keys: list[str] = []
    for keyword in ("$ref", "$dynamicRef"):
        if (ref := schema.get(keyword)) is not None:
            resolved = validator._resolver.lookup(ref)  # jsonschema's own way to follow one
            evolved = validator.evolve(schema=resolved.contents, _resolver=resolved.resolver)
            keys += _evaluated_keys(evolved, instance, resolved.contents)
    properties = schema.get("properties")
    if validator.is_type(properties, "object"):
        keys += properties.keys() & instance.keys()
    for keyword in ("additionalProperties", "unevaluatedProperties"):
        if (subschema := schema.get(keyword)) is not None:
            keys += [k for k, v in instance.items() if _valid(validator.descend(v, subschema))]
    for pattern in patterns:
        regex = _regex(pattern)
        keys += [k for k in instance if regex.search(k)]
    for key, subschema in schema.get("dependentSchemas", {}).items():
        if key in instance:
            keys += _evaluated_keys(validator, instance, subschema)
    for keyword in ("allOf", "oneOf", "anyOf"):
        for subschema in schema.get(keyword, []):
            if _valid(validator.descend(instance, subschema)):
                keys += _evaluated_keys(validator, instance, subschema)
    if "if" in schema:
        if validator.evolve(schema=schema["if"]).is_valid(instance):
            keys += _evaluated_keys(validator, instance, schema["if"])
            if "then" in schema:
                keys += _evaluated_keys(validator, instance, schema["then"])
        elif "else" in schema:
            keys += _evaluated_keys(validator, instance, schema["else"])
    return keys


def _unevaluated_properties(
    validator: Any, unevaluated: Any, instance: Any, schema: Any
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    evaluated = _evaluated_keys(validator, instance, schema)
    invalid = [
        key
        for key in instance
        if key not in evaluated
        and not _valid(validator.descend(instance[key], unevaluated, path=key, schema_path=key))
    ]
    if invalid:
        if unevaluated is False:
            error = "Unevaluated properties are not allowed (%s %s unexpected)"
            yield ValidationError(error % _listed(sorted(invalid, key=str)))
        else:
            error = (
                "Unevaluated properties are not valid under the given schema "
                "(%s %s unevaluated and invalid)"
            )
            yield ValidationError(error % _listed(invalid))


_IN_RE2: Final[dict[str, Callable[..., Iterator[ValidationError]]]] = {
    "pattern": _pattern,
    "patternProperties": _pattern_properties,
    "additionalProperties": _additional_properties,
    "unevaluatedProperties": _unevaluated_properties,
}

# ---- the validator -----------------------------------------------------------------------

_STOCK: Final[dict[str, Callable[..., Any]]] = dict(Draft202012Validator.VALIDATORS)  # pyright: ignore[reportUnknownArgumentType, reportUnknownMemberType] (jsonschema's untyped table)

Validator: Any = validators.extend(  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType] (untyped)
    Draft202012Validator,
    validators={k: _charged(k, _IN_RE2.get(k, check)) for k, check in _STOCK.items()},
)
"""Draft 2020-12, with RE2 regexes and every keyword charged to the budget (jsonschema's
classes are untyped: ``Any``)."""


def _evolve(self: Any, **changes: Any) -> Any:
    """jsonschema's ``evolve`` without its switch to the class a subschema's ``$schema`` names
    (a stock class, whose regexes are Python's): the same fields, this class."""
    _charge(_DESCENT)
    cls: Any = self.__class__
    field: Any
    for field in cls.__attrs_attrs__:
        if field.init and field.alias not in changes:
            changes[field.alias] = getattr(self, field.name)
    return cls(**changes)


Validator.evolve = _evolve

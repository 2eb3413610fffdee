"""The offline scripted model's typed answer: a JSON value built from the answer's JSON Schema
(``typed_answer``), deterministic, that validates wherever the schema lets it.

* An object has every property it declares (required or not), each built for its name.
* A number is, in order: the argument of that name a call of the turn passed (``a`` and ``b``
  of ``add``), the field of that name a tool returned as JSON, the number a tool returned for
  a result-like name (``sum``, ``total``, ``result``, ``value``…, or the answer itself), the
  task's next number not taken yet (labelled ones first, as tool arguments are filled:
  ``orga.scripted.arguments``), then the schema's default or the number nearest 0 within its
  bounds. Integers stay whole; bounds are kept.
* A string is the argument or returned field of its name, else by its kind: a URL, email
  address, time zone, path, date, time or identifier the task (or a tool) gives, key words for
  a query, else the answer the model would have given in prose (which says it is the offline
  model's). Lengths and patterns are kept where a candidate fits.
* An ``enum`` takes the value the task names, else its first; ``const`` its value; an array
  holds one item (``minItems`` as many); a boolean is its default, else ``true``; ``anyOf`` and
  ``oneOf`` take their first option that is not ``null``; local ``$ref`` are followed.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any, Final, cast

from orga.scripted.arguments import (
    fill_arguments,
    fits,
    key_words,
    kind_of,
    shortened,
    types_of,
    words_of,
)
from orga.scripted.clues import NUMBER, Clues
from orga.scripted.reading import number_in

__all__ = ["typed_answer"]

_RESULT_WORDS: Final = frozenset(
    """result sum total answer value output amount count product difference quotient
    number score""".split()  # noqa: SIM905 (a list would take a screen)
)
_DEPTH: Final = 8
"""How deep nested objects are built with all their properties (then the required ones only)."""
_PLACEHOLDERS: Final = {
    "url": "https://example.com/",
    "email": "someone@example.com",
    "timezone": "UTC",
    "date": "1970-01-01",
    "time": "00:00",
}


@dataclass
class _Builder:
    root: dict[str, Any]
    task: str
    prose: str
    arguments: dict[str, Any]
    """The arguments of the turn's calls, by name (a later call's win)."""
    fields: dict[str, Any]
    """The fields tools returned as JSON objects, by name (a later result's win)."""
    result: int | float | None
    """The number the newest successful tool result holds."""
    numbers: list[int | float] = field(default_factory=list[int | float])
    """The task's numbers not taken yet, in order."""

    def resolve(self, spec: Any, seen: int = 0) -> dict[str, Any]:
        """``spec`` with a local ``$ref`` followed and ``allOf`` merged."""
        node = dict(cast(dict[str, Any], spec)) if isinstance(spec, dict) else {}
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#") and seen < _DEPTH:
            target: Any = self.root
            for part in ref.lstrip("#").strip("/").split("/") if ref != "#" else []:
                target = cast(dict[str, Any], target).get(part) if isinstance(target, dict) else {}
            rest = {k: v for k, v in node.items() if k != "$ref"}
            node = {**self.resolve(target, seen + 1), **rest}
        for part in cast(list[Any], node.pop("allOf", None) or []):
            merged = self.resolve(part, seen + 1)
            properties: dict[str, Any] = {**merged.get("properties", {})}
            properties.update(cast(dict[str, Any], node.get("properties") or {}))
            required = [*merged.get("required", []), *cast(list[Any], node.get("required") or [])]
            node = {**merged, **node, "properties": properties, "required": required}
        return node

    def value(self, spec: Any, name: str, depth: int = 0) -> Any:
        if depth > 2 * _DEPTH:  # a schema that requires itself without end: none fits
            return None
        node = self.resolve(spec)
        if "const" in node:
            return node["const"]
        if isinstance(enum := node.get("enum"), list) and enum:
            return self.enum(cast(list[Any], enum))
        options = cast(list[Any], node.get("anyOf") or node.get("oneOf") or [])
        if options and "type" not in node:
            chosen = [o for o in options if self.resolve(o).get("type") != "null"]
            return None if not chosen else self.value(chosen[0], name, depth)
        types = types_of(node)
        if not types and node.get("type") in ("null", ["null"]):
            return None
        if "object" in types or (not types and "properties" in node):
            return self.object(node, depth)
        if "array" in types or (not types and "items" in node):
            return self.array(node, name, depth)
        if types & {"integer", "number"} and not types & {"string"}:
            return self.number(node, name, whole="number" not in types)
        if "boolean" in types and not types & {"string"}:
            default = node.get("default")
            return default if isinstance(default, bool) else True
        return self.string(node, name)

    def enum(self, enum: list[Any]) -> Any:
        named = [
            (found.start(), value)
            for value in enum
            if isinstance(value, str) and len(value) >= 2
            for found in [re.search(rf"(?<![\w-]){re.escape(value)}(?![\w-])", self.task, re.I)]
            if found is not None
        ]
        return min(named)[1] if named else enum[0]

    def object(self, node: dict[str, Any], depth: int) -> dict[str, Any]:
        properties = cast(dict[str, Any], node.get("properties") or {})
        required = [str(n) for n in cast(list[Any], node.get("required") or [])]
        names = [*properties, *(n for n in required if n not in properties)]
        if depth >= _DEPTH:
            names = [n for n in names if n in required]
        return {n: self.value(properties.get(n, {}), n, depth + 1) for n in names}

    def array(self, node: dict[str, Any], name: str, depth: int) -> list[Any]:
        items: Any = node.get("items", {})
        prefix = cast(
            list[Any], node.get("prefixItems") or (items if isinstance(items, list) else [])
        )
        count = max(int(node.get("minItems", 0)), 1 if depth < _DEPTH else 0, len(prefix))
        if "maxItems" in node:
            count = min(count, int(node["maxItems"]))
        singular = name[:-1] if name.endswith("s") and len(name) > 3 else name
        return [
            self.value(prefix[i] if i < len(prefix) else items, singular, depth + 1)
            for i in range(count)
        ]

    def number(self, node: dict[str, Any], name: str, *, whole: bool) -> int | float:
        candidates: list[Any] = [self.arguments.get(name), self.fields.get(name)]
        if not name or words_of(name) & _RESULT_WORDS:
            candidates.append(self.result)
        if name:  # "4200 cents" for an amount in cents, "limit: 3"
            labelled = fill_arguments({"properties": {name: node}, "required": []}, self.task)
            candidates.append(labelled.arguments.get(name))
        for candidate in candidates:
            if (found := _number(candidate, node, whole=whole)) is not None:
                if candidate in self.numbers:
                    self.numbers.remove(candidate)
                return found
        for index, candidate in enumerate(self.numbers):
            if (found := _number(candidate, node, whole=whole)) is not None:
                del self.numbers[index]
                return found
        if (found := _number(node.get("default"), node, whole=whole)) is not None:
            return found
        return _within(node, whole=whole)

    def string(self, node: dict[str, Any], name: str) -> str:
        kind = kind_of(name, node) if name else None
        candidates: list[Any] = [self.arguments.get(name), self.fields.get(name)]
        if kind in ("text", None):
            candidates += [self.prose, self.task]
        elif kind == "query":
            candidates.append(key_words(self.task))
        else:
            alone = {"properties": {name: node}, "required": [name]}
            for text in (self.task, *(str(v) for v in self.fields.values())):
                candidates.append(fill_arguments(alone, text).arguments.get(name))
            candidates.append(_PLACEHOLDERS.get(kind or "", _slug(self.task)))
        candidates += [node.get("default"), _slug(self.task), *self.task.split(), self.prose]
        for candidate in candidates:
            if isinstance(candidate, str) and fits(text := shortened(candidate, node), node):
                return text
        return shortened(self.prose, node) + "x" * max(0, int(node.get("minLength", 0)))


def _parsed(text: str) -> int | float:
    value = float(text)
    return int(value) if value.is_integer() else value


def _slug(text: str) -> str:
    """A short identifier made of ``text``'s key words (``refund-order-7``)."""
    words = re.findall(r"[a-z0-9]+", key_words(text).lower())
    return "-".join(words[:4]) or "answer"


def _number(candidate: Any, node: dict[str, Any], *, whole: bool) -> int | float | None:
    """``candidate`` as a number of ``node`` (a whole one for an integer), or ``None``."""
    if isinstance(candidate, str) and NUMBER.fullmatch(candidate.strip()):
        candidate = float(candidate)
    if not isinstance(candidate, int | float) or isinstance(candidate, bool):
        return None
    if not math.isfinite(candidate) or (whole and not float(candidate).is_integer()):
        return None
    value = int(candidate) if float(candidate).is_integer() else float(candidate)
    step = node.get("multipleOf")
    if isinstance(step, int | float) and step > 0 and not float(value / step).is_integer():
        return None
    return value if fits(value, {**node, "enum": None}) else None


def _bound(node: dict[str, Any], key: str) -> float | None:
    """A numeric bound of ``node`` (draft 4's ``exclusiveMinimum: true`` is a flag, not one)."""
    value = node.get(key)
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def _within(node: dict[str, Any], *, whole: bool) -> int | float:
    """The number nearest 0 that ``node``'s bounds allow."""
    low, high = _bound(node, "minimum"), _bound(node, "maximum")
    low_x, high_x = _bound(node, "exclusiveMinimum"), _bound(node, "exclusiveMaximum")
    value: float = 0
    if low is not None and value < low:
        value = math.ceil(low) if whole else low
    if low_x is not None and value <= low_x:
        value = math.floor(low_x) + 1 if whole else low_x + 0.5
    if high is not None and value > high:
        value = math.floor(high) if whole else high
    if high_x is not None and value >= high_x:
        value = math.ceil(high_x) - 1 if whole else high_x - 0.5
    step = node.get("multipleOf")
    if isinstance(step, int | float) and step > 0:
        value = math.ceil(value / step) * step
    return int(value) if whole or float(value).is_integer() else value


def typed_answer(
    schema: dict[str, Any],
    *,
    task: str,
    prose: str,
    calls: list[tuple[str, dict[str, Any]]],
    results: list[tuple[str, bool]],
) -> str:
    """The answer to ``task`` as JSON text that matches ``schema``, from the calls the turn made
    and what they returned; ``prose`` is the answer the model would give without a schema."""
    arguments: dict[str, Any] = {}
    for _, given in calls:
        arguments.update(given)
    fields: dict[str, Any] = {}
    result: int | float | None = None
    for text, failed in results:
        if failed:
            continue
        try:
            returned: Any = json.loads(text)
        except ValueError:
            returned = None
        if isinstance(returned, dict):
            fields.update(cast(dict[str, Any], returned))
        if (number := number_in(text)) is not None:
            result = _parsed(number)
    numbers = [_parsed(text) for _, text in Clues.of(task).numbers]
    builder = _Builder(schema, task, prose, arguments, fields, result, numbers)
    return json.dumps(builder.value(schema, ""), ensure_ascii=False)

"""How the offline scripted model fills a tool's arguments: from the tool's JSON schema and the
task's text, the way a careful model would.

* An optional argument is left out (its default applies) unless the task clearly gives it: an
  enum value the task names, a number next to the parameter's name or unit ("the first 300
  characters", "limit 3", "4200 cents" for an amount "in cents"), or a value of the
  parameter's kind (a directory for ``directory``, a time zone for ``timezone``).
* A required argument takes a value of its kind from the task (``orga.scripted.clues``),
  in order: numbers for numbers, URLs, email addresses and file paths for parameters named so,
  a known IANA time zone for a timezone, ``HH:MM`` for a time, the task's key words for a query,
  the task itself for free text (``task``, ``message``, ``text``). A value the tool's
  description names for when none is given ("Use 'UTC' … if no timezone provided") comes next,
  then the schema's default.
* Every value keeps the schema's type, bounds (``minimum``, ``maximum``, exclusive ones),
  ``minLength``/``maxLength``, ``pattern`` and ``enum``: never 0 for an integer of at least 1.
* A short identifier (``id``, ``name``, ``key``, ``timezone``…) is never given the whole task.
  When a required argument cannot be filled, the tool is not called: ``Filling.missing`` says
  why, and the model answers with that instead.

Over 400 lines: one filler over every JSON Schema keyword a tool may use; what a task offers
is ``orga.scripted.clues``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal, cast

from orga.contracts.prehydration import compile_pattern
from orga.core.knowledge import search_terms
from orga.scripted.clues import NUMBER, Clues

__all__ = [
    "Filling",
    "Kind",
    "fill_arguments",
    "fits",
    "key_words",
    "kind_of",
    "shortened",
    "types_of",
    "words_of",
]

Kind = Literal[
    "url", "email", "timezone", "path", "directory", "date", "time", "query", "text", "identifier"
]
_KINDS: Final[tuple[tuple[Kind, frozenset[str]], ...]] = (
    ("url", frozenset(["url", "uri", "link", "href", "endpoint", "website"])),
    ("email", frozenset(["email", "mail"])),
    ("timezone", frozenset(["timezone", "tz", "zone"])),
    ("path", frozenset(["path", "file", "filename", "filepath"])),
    ("directory", frozenset(["directory", "dir", "folder", "cwd"])),
    ("date", frozenset(["date", "day"])),
    ("time", frozenset(["time"])),
    ("query", frozenset(["query", "search", "keywords", "terms", "topic"])),
    (
        "text",
        frozenset(
            """task text content message body prompt instructions question description
            feedback note comment summary details input""".split()  # noqa: SIM905 (a list would take a screen)
        ),
    ),
    (
        "identifier",
        frozenset(
            """id key name agent code slug user username handle tag label type kind mode status
            language lang currency country locale region subject predicate object ref sha hash
            token uuid owner repo branch version""".split()  # noqa: SIM905 (a list would take a screen)
        ),
    ),
)
_FORMATS: Final[dict[str, Kind]] = {
    "uri": "url",
    "url": "url",
    "email": "email",
    "date": "date",
    "time": "time",
}
_POOLED: Final = frozenset({"url", "email", "timezone", "path", "directory", "date", "time"})
_ID_WORDS: Final = frozenset(["id", "key", "code", "ref", "sha", "hash", "uuid"])
_NOT_LABELS: Final = frozenset(["max", "min", "num", "number", "count", "total", "the"])
_SYNONYMS: Final = {
    "chars": ("characters", "character", "chars"),
    "limit": ("results", "items", "hits", "limit"),
    "seconds": ("seconds", "second", "secs"),
}
_UNIT: Final = re.compile(r"\bin (cents|seconds|minutes|hours|days|bytes|characters|words)\b")
_DESCRIBED_DEFAULT: Final = compile_pattern(r"\b[Uu]se\s+['\"]([^'\"]{1,64})['\"][^.]*?\bif\s+no\b")
"""In RE2: a tool's description is the server's, and Python's ``re`` takes quadratic time on
it (each "use '…'" scanned to the next full stop)."""
_WHAT: Final[dict[Kind, str]] = {
    "url": "URL",
    "email": "email address",
    "timezone": "time zone",
    "path": "file path",
    "directory": "directory",
    "date": "date (YYYY-MM-DD)",
    "time": "time (HH:MM)",
    "query": "key words",
    "text": "text",
    "identifier": "identifier",
}


@dataclass(frozen=True)
class Filling:
    """The arguments for one call, or why the tool should not be called."""

    arguments: dict[str, Any] = field(default_factory=dict[str, Any])
    missing: str | None = None
    """Why a required argument could not be filled (``None``: call the tool)."""


class _Unfillable(Exception):
    """A required argument has no sensible value."""


_OMIT: Final = object()


def words_of(name: str) -> set[str]:
    """The words of an identifier (``maxChars``, ``source_timezone``), with their singulars."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", name).lower()
    words = {w for w in re.split(r"[^a-z0-9]+", spaced) if w}
    return words | {w[:-1] for w in words if len(w) > 3 and w.endswith("s")}


def key_words(task: str, leave_out: set[str] | frozenset[str] = frozenset()) -> str:
    """A short query from ``task``: its key words (no stop words, no ``leave_out``), not the
    whole prompt."""
    terms = search_terms(task, 8)
    return " ".join([t for t in terms if t not in leave_out] or terms)


def types_of(spec: Mapping[str, Any]) -> set[str]:
    """The JSON types ``spec`` allows (``anyOf``/``oneOf`` options and an ``enum``'s values
    counted), ``null`` left out."""
    raw = spec.get("type")
    found = {raw} if isinstance(raw, str) else set(cast(list[str], raw or []))
    for option in cast(list[dict[str, Any]], spec.get("anyOf") or spec.get("oneOf") or []):
        found |= types_of(option)
    if not found and spec.get("enum"):
        values = cast(list[Any], spec["enum"])
        found = {"string" if isinstance(v, str) else "number" for v in values}
    return found - {"null"}


def kind_of(name: str, spec: Mapping[str, Any]) -> Kind | None:
    """What kind of value a string named ``name`` holds, by its format, name or description
    (``None``: none this module knows)."""
    if (kind := _FORMATS.get(str(spec.get("format", "")))) is not None:
        return kind
    words = words_of(name)
    for kind, names in _KINDS:
        if words & names:
            return kind
    description = str(spec.get("description", ""))
    if words_of(description) & {"id", "identifier"}:  # "reservation: the reservation id"
        return "identifier"
    if "IANA" in description or re.search(r"\btime ?zone\b", description, re.IGNORECASE):
        return "timezone"
    return "time" if "HH:MM" in description else None


def _number(text: str) -> int | float:
    value = float(text)
    return int(value) if value.is_integer() else value


def _fits_number(value: float, spec: Mapping[str, Any], types: set[str]) -> bool:
    if "number" not in types and not float(value).is_integer():
        return False
    low, high = spec.get("minimum"), spec.get("maximum")
    low_x, high_x = spec.get("exclusiveMinimum"), spec.get("exclusiveMaximum")
    if low_x is True:  # draft 4: a flag on minimum
        low_x, low = low, None
    if high_x is True:
        high_x, high = high, None
    return not (
        (isinstance(low, int | float) and value < low)
        or (isinstance(high, int | float) and value > high)
        or (isinstance(low_x, int | float) and value <= low_x)
        or (isinstance(high_x, int | float) and value >= high_x)
    )


def _fits_string(value: str, spec: Mapping[str, Any]) -> bool:
    if len(value) < int(spec.get("minLength", 0)):
        return False
    if "maxLength" in spec and len(value) > int(spec["maxLength"]):
        return False
    pattern = spec.get("pattern")
    try:  # the tool's schema (an MCP server's): in RE2, never Python's backtracking re
        return not isinstance(pattern, str) or compile_pattern(pattern).search(value) is not None
    except ValueError:  # a pattern RE2 cannot run: the tool's own check decides
        return True


def fits(value: Any, spec: Mapping[str, Any]) -> bool:
    """Whether ``value`` keeps ``spec``'s enum, lengths, pattern and bounds."""
    enum = spec.get("enum")
    if isinstance(enum, list) and value not in enum:
        return False
    if isinstance(value, str):
        return _fits_string(value, spec)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return _fits_number(value, spec, types_of(spec) or {"number"})
    return True


def shortened(value: str, spec: Mapping[str, Any]) -> str:
    """``value`` cut at a word boundary to the schema's ``maxLength``."""
    limit = spec.get("maxLength")
    if not isinstance(limit, int) or len(value) <= limit:
        return value
    head = value[:limit]
    return head.rsplit(" ", 1)[0] if " " in head else head


_RANGE: Final = re.compile(
    rf"(?:\b(?:between|from)\s+({NUMBER.pattern})\s+(?:and|to)\s+({NUMBER.pattern})\b"
    rf"|\(({NUMBER.pattern})\s*(?:to|-|\u2013|\.\.)\s*({NUMBER.pattern})\))"
)
"""Bounds a description states in words: "(1 to 20)", "between 0 and 1"."""


def _with_described_bounds(spec: dict[str, Any]) -> dict[str, Any]:
    """``spec`` with the bounds its description states, where the schema states none."""
    if not types_of(spec) & {"number", "integer"} or {"minimum", "maximum"} & spec.keys():
        return spec
    found = _RANGE.search(str(spec.get("description", "")))
    if found is None:
        return spec
    low, high = (g for g in found.groups() if g is not None)
    return {**spec, "minimum": _number(low), "maximum": _number(high)}


class _Filler:
    def __init__(self, schema: Mapping[str, Any], task: str, tool: str) -> None:
        self.root = schema
        self.task = task
        self.tool_words = words_of(tool)
        for name in cast(dict[str, Any], schema.get("properties") or {}):
            self.tool_words |= words_of(name)  # a query names the subject, not the options
        self.clues = Clues.of(task)
        self.labels: dict[str, int | float] = {}
        """Numbers the task gives by name or unit, found before any is taken in order."""

    def resolve(self, spec: Any) -> dict[str, Any]:
        """``spec`` with a local ``$ref`` (``#/$defs/…``) followed."""
        node = cast(dict[str, Any], spec) if isinstance(spec, dict) else {}
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/"):
            target: Any = self.root
            for part in ref[2:].split("/"):
                target = (
                    cast(dict[str, Any], target).get(part, {}) if isinstance(target, dict) else {}
                )
            node = {
                **cast(dict[str, Any], target),
                **{k: v for k, v in node.items() if k != "$ref"},
            }
        return _with_described_bounds(node)

    def labelled(self, name: str, spec: Mapping[str, Any]) -> int | float | None:
        """A number the task puts next to the parameter's name or unit (``300 characters``)."""
        labels = {w for w in words_of(name) if len(w) >= 3 and w not in _NOT_LABELS}
        for word in list(labels):
            labels |= set(_SYNONYMS.get(word, ()))
        labels |= set(_UNIT.findall(str(spec.get("description", ""))))
        named = [rf"{re.escape(name)}\s*[:=]\s*({NUMBER.pattern})"]
        if labels:
            label = "(?:" + "|".join(re.escape(w) for w in sorted(labels)) + ")"
            named.append(rf"\b{label}\s*(?:[:=]|of|to|at|is)?\s*({NUMBER.pattern})")
            named.append(rf"({NUMBER.pattern})\s*{label}\b")
        for pattern in named:
            for match in re.finditer(pattern, self.clues.rest, re.IGNORECASE):
                value = _number(match.group(1))
                if ("number", match.start(1)) not in self.clues.used and _fits_number(
                    value, spec, types_of(spec)
                ):
                    self.clues.used.add(("number", match.start(1)))
                    return value
        return None

    def next_number(self, spec: Mapping[str, Any]) -> int | float | None:
        for position, text in self.clues.numbers:
            value = _number(text)
            if ("number", position) not in self.clues.used and _fits_number(
                value, spec, types_of(spec)
            ):
                self.clues.used.add(("number", position))
                return value
        return None

    def value(self, name: str, spec: dict[str, Any], required: bool) -> Any:
        types = types_of(spec)
        if "const" in spec:
            return spec["const"] if required else _OMIT
        if isinstance(enum := spec.get("enum"), list) and enum:
            return self.enum_value(cast(list[Any], enum), spec, required)
        if types & {"number", "integer"} and "string" not in types:
            found = self.labels.get(name)
            if found is None and required:
                found = self.next_number(spec)
            if found is not None:
                return found
            return self.fallback(name, spec, required, _bounds(spec, types))
        if "boolean" in types and "string" not in types:
            return (spec.get("default") is True) if required else _OMIT
        if "string" in types or not types:  # an untyped value takes a string too
            return self.string(name, spec, required)
        if "array" in types and required:
            return self.array(name, spec)
        return self.fallback(name, spec, required, " or ".join(sorted(types)) or "value")

    def enum_value(self, enum: list[Any], spec: Mapping[str, Any], required: bool) -> Any:
        named = [
            (match.start(), value)
            for value in enum
            if isinstance(value, str) and len(value) >= 2
            for match in [re.search(rf"(?<![\w-]){re.escape(value)}(?![\w-])", self.task, re.I)]
            if match is not None
        ]
        if named:
            return min(named)[1]
        if not required:
            return _OMIT
        return spec["default"] if spec.get("default") in enum else enum[0]

    def fallback(self, name: str, spec: Mapping[str, Any], required: bool, what: str) -> Any:
        """The tool's described or declared default of a required argument, else unfillable."""
        if not required:
            return _OMIT
        described = _DESCRIBED_DEFAULT.search(str(spec.get("description", "")))
        if described is not None and fits(described.group(1), spec):
            return described.group(1)
        if "default" in spec:
            return spec["default"]
        raise _Unfillable(f"the task gives no {what} for {name!r}")

    def string(self, name: str, spec: dict[str, Any], required: bool) -> Any:
        kind = kind_of(name, spec)
        if kind in _POOLED:
            value = self.clues.take(kind, self.pool(kind))
            if value is None or not _fits_string(value, spec):
                return self.fallback(name, spec, required, _WHAT[kind])
            return value
        if not required:
            return _OMIT
        if kind == "text":
            value = shortened(self.task.strip(), spec)
        elif kind == "identifier":
            value = None
            if (words_of(name) | words_of(str(spec.get("description", "")))) & _ID_WORDS:
                value = self.clues.take("identifier", self.clues.identifiers)
            if value is None:
                if "default" in spec:
                    return spec["default"]
                raise _Unfillable(
                    f"{name!r} needs a short value such as a name or an id and the task gives "
                    "none (the whole task is no such value)"
                )
        else:  # a query, or a short value of an unknown kind: the task's key words
            value = shortened(key_words(self.task, self.tool_words), spec)
        if not value or not _fits_string(value, spec):
            return self.fallback(name, spec, required, f"{_WHAT[kind or 'query']} that fit")
        return value

    def pool(self, kind: Kind) -> list[str]:
        c = self.clues
        pools = {"url": c.urls, "email": c.emails, "timezone": c.zones, "path": c.paths}
        pools |= {"directory": c.directories, "date": c.dates, "time": c.times}
        return pools.get(kind, [])

    def array(self, name: str, spec: dict[str, Any]) -> list[Any]:
        items = self.resolve(spec.get("items"))
        values: list[Any] = []
        if types_of(items) & {"number", "integer"}:
            while (number := self.next_number(items)) is not None:
                values.append(number)
        elif (kind := kind_of(name, items) or kind_of(name, {})) in _POOLED:
            while (value := self.clues.take(kind, self.pool(kind))) is not None:
                values.append(value)
        values = values[: int(spec.get("maxItems", len(values)))]
        if len(values) < max(1, int(spec.get("minItems", 1))):
            raise _Unfillable(f"the task gives no values for the list {name!r}")
        return values


def _bounds(spec: Mapping[str, Any], types: set[str]) -> str:
    what = "whole number" if "number" not in types else "number"
    low = spec.get("minimum", spec.get("exclusiveMinimum"))
    high = spec.get("maximum", spec.get("exclusiveMaximum"))
    numbers = [v for v in (low, high) if isinstance(v, int | float) and not isinstance(v, bool)]
    if len(numbers) == 2:
        return f"{what} from {low} to {high}"
    return what


def fill_arguments(
    schema: Mapping[str, Any],
    task: str,
    *,
    tool: str = "",
    given: Mapping[str, Any] | None = None,
) -> Filling:
    """The arguments a careful model would pass to ``tool`` (its JSON ``schema``) for ``task``;
    ``given`` fixes some of them (still checked against the schema)."""
    filler = _Filler(schema, task, tool)
    properties = cast(dict[str, Any], schema.get("properties") or {})
    required = [n for n in cast(list[str], schema.get("required") or []) if n in properties]
    order = [*required, *(n for n in properties if n not in required)]
    chosen: dict[str, Any] = {}
    for name in order:
        spec = filler.resolve(properties[name])
        if not types_of(spec) & {"number", "integer"} or (given is not None and name in given):
            continue
        if (found := filler.labelled(name, spec)) is not None:
            filler.labels[name] = found
    try:
        for name in order:
            spec = filler.resolve(properties[name])
            if given is not None and name in given:
                if not fits(given[name], spec):
                    raise _Unfillable(f"{given[name]!r} does not fit {name!r}")
                value = given[name]
            else:
                value = filler.value(name, spec, name in required)
            if value is not _OMIT:
                chosen[name] = value
    except _Unfillable as error:
        return Filling(missing=str(error))
    return Filling(arguments={n: chosen[n] for n in properties if n in chosen})

"""What a ``Settings`` field read from the environment is: its ``Env`` (the variable), how
the variable's text becomes the field's value, and how the docs show the field (``Variable``).

``orga.runtime.settings`` uses it to read the environment and to describe itself; nothing here
reads the environment.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import UnionType
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo

__all__ = [
    "Env",
    "Variable",
    "attribute_docstrings",
    "bounds",
    "default_text",
    "env_of",
    "flag",
    "parser",
    "shape",
]


@dataclass(frozen=True)
class Env:
    """Where a ``Settings`` field comes from: one environment variable.

    Put in the field's annotation: ``task_queue: Annotated[str, Env("ORGA_TASK_QUEUE")]``.
    """

    name: str
    """The variable, e.g. ``ORGA_TASK_QUEUE``."""
    default: str | None = None
    """How the docs show the default when the field's own default does not say it (a computed
    default, or what being unset means: ``unset: one implicit agent``)."""
    shape: str | None = None
    """How the docs show the value's type when the field's type does not say it."""
    unit: str = ""
    """The unit of a number (``s``, ``days``), shown after its default."""
    cli: bool = False
    """The ``orga`` CLI reads it too: ``orga --help`` lists it."""
    parse: Callable[[str], Any] | None = None
    """Turns the variable's text into the field's value, refusing with a message of its own;
    by default the field's type says how (flags, paths, comma-separated lists, numbers)."""


@dataclass(frozen=True)
class Variable:
    """One row of the environment's documentation: a variable (or a group of them)."""

    names: tuple[str, ...]
    shape: str
    """Its type, as a reader writes it: ``text``, ``number``, ``flag``, ``a`` · ``b``, …"""
    default: str
    bounds: str
    """``> 0, ≤ 1``, or empty."""
    meaning: str
    """The field's docstring."""
    cli: bool


def flag(value: str | None) -> bool:
    return (value or "").lower() in {"1", "true", "yes"}


def env_of(info: FieldInfo) -> Env | None:
    return next((m for m in info.metadata if isinstance(m, Env)), None)


def _bare(annotation: Any) -> Any:
    """``annotation`` without ``| None``."""
    if get_origin(annotation) not in (Union, UnionType):
        return annotation
    args = [a for a in get_args(annotation) if a is not type(None)]
    return args[0] if len(args) == 1 else annotation


def parser(info: FieldInfo) -> Callable[[str], Any]:
    kind = _bare(info.annotation)
    if kind is bool:
        return flag
    if kind is Path:
        return lambda text: Path(text).resolve()
    if get_origin(kind) is list:
        return lambda text: [part.strip() for part in text.split(",") if part.strip()]
    return lambda text: text  # numbers, names, secrets: the model validates them


def shape(annotation: Any) -> str:
    kind = _bare(annotation)
    if get_origin(kind) is Literal:
        return " · ".join(f"``{choice}``" for choice in get_args(kind))
    shapes: dict[Any, str] = {
        bool: "flag (``1``, ``true``, ``yes``)",
        Path: "path",
        float: "number",
        int: "integer",
        SecretStr: "secret",
        str: "text",
    }
    if get_origin(kind) is list:
        return "comma-separated list"
    return shapes.get(kind, "text")


def _number(value: float) -> str:
    return f"{value:g}"


def default_text(info: FieldInfo, unit: str) -> str:
    value = info.get_default(call_default_factory=False)
    if value is None:
        return "unset"
    if value is False:
        return "off"
    if isinstance(value, int | float):
        return f"{_number(value)} {unit}".strip()
    return f"``{value}``"


def bounds(info: FieldInfo, show: Callable[[Any], str] | None = None) -> str:
    """A field's pydantic constraints as a reader writes them (``> 0, ≤ 1``); ``show`` writes a
    bound's value (plain numbers by default)."""
    words = {"gt": ">", "ge": "≥", "lt": "<", "le": "≤"}
    found: list[str] = []
    for constraint in info.metadata:
        for attribute, word in words.items():
            value = getattr(constraint, attribute, None)
            if value is not None:
                found.append(f"{word} {(show or _shown)(value)}")
        for attribute, word in (("min_length", "length ≥"), ("max_length", "length ≤")):
            value = getattr(constraint, attribute, None)
            if value is not None:
                found.append(f"{word} {value}")
    return ", ".join(found)


def _shown(value: Any) -> str:
    return _number(value) if isinstance(value, float) else str(value)


def attribute_docstrings(model: type[BaseModel]) -> dict[str, str]:
    """The docstrings written under ``model``'s fields (its own class body only)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(model)))
    body = tree.body[0]
    assert isinstance(body, ast.ClassDef)
    found: dict[str, str] = {}
    for statement, after in zip(body.body, body.body[1:], strict=False):
        if (
            isinstance(statement, ast.AnnAssign)
            and isinstance(statement.target, ast.Name)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            found[statement.target.id] = inspect.cleandoc(after.value.value)
    return found

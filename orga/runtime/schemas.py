"""JSON Schemas of what people write by hand: a loop's input and a task file.

Generated from the pydantic models, committed under ``schemas/`` (editors validate and complete
with them; the docs name them) and checked against the models by the tests. Regenerate
after changing a contract::

    uv run python -m orga.runtime.schemas
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Final

from pydantic import BaseModel

from orga.contracts.config import LoopInput
from orga.contracts.task import TaskInput

__all__ = ["SCHEMAS", "main", "render"]

SCHEMAS: Final[dict[str, tuple[type[BaseModel], str]]] = {
    "loop-input.schema.json": (
        LoopInput,
        "The input of the ReasoningLoop workflow (temporal workflow start --input, "
        "client.start_workflow).",
    ),
    "task.schema.json": (TaskInput, "The input of the Task workflow (orga task start FILE)."),
}
_INTERNAL: Final = {"LoopInput": "carry"}
"""Fields a loop sets for itself (continue-as-new), never a person: model title → field."""


def _referenced(node: Any, found: set[str]) -> None:
    if isinstance(node, dict):
        for key, value in node.items():  # pyright: ignore[reportUnknownVariableType]
            if key == "$ref" and isinstance(value, str):
                found.add(value.rsplit("/", 1)[-1])
            else:
                _referenced(value, found)
    elif isinstance(node, list):
        for value in node:  # pyright: ignore[reportUnknownVariableType]
            _referenced(value, found)


def render(model: type[BaseModel], description: str) -> str:
    """The model's JSON Schema as committed: internal fields left out, stable formatting."""
    schema = model.model_json_schema(mode="validation")
    definitions: dict[str, Any] = schema.pop("$defs", {})
    for node in [schema, *definitions.values()]:
        if (field := _INTERNAL.get(node.get("title", ""))) is not None:
            node.get("properties", {}).pop(field, None)
    kept: set[str] = set()
    _referenced(schema, kept)
    while True:  # definitions reachable from what is kept
        more: set[str] = set()
        for name in kept:
            _referenced(definitions.get(name, {}), more)
        if more <= kept:
            break
        kept |= more
    head = {"$schema": "https://json-schema.org/draft/2020-12/schema", "description": description}
    ordered = {**head, **schema}
    if kept:
        ordered["$defs"] = {name: definitions[name] for name in sorted(kept)}
    return json.dumps(ordered, indent=2, ensure_ascii=False) + "\n"


def main(directory: Path = Path("schemas")) -> int:
    """Write every schema into ``directory``."""
    directory.mkdir(exist_ok=True)
    for filename, (model, description) in SCHEMAS.items():
        (directory / filename).write_text(render(model, description), encoding="utf-8")
        print(f"wrote {directory / filename}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

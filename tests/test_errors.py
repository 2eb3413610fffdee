"""The error tree drawn in ``orga.contracts.errors``'s docstring is the tree of its classes:
every class drawn once, under its parent, marked "(retryable)" exactly when Temporal retries it.
"""

from __future__ import annotations

import inspect
import re

from orga.contracts import errors
from orga.contracts.errors import OrgaError

_ROW = re.compile(r"^    (?P<branch>(?:│   |    )*)(?:├── |└── )?(?P<name>[A-Z]\w+)\b(?P<rest>.*)$")


def _drawn() -> dict[str, tuple[str | None, bool]]:
    """Each class the docstring draws: its parent in the drawing, and whether it is marked
    retryable."""
    doc = errors.__doc__ or ""
    block = doc.split("decided once here:\n\n", 1)[1].split("\n\n", 1)[0]
    drawn: dict[str, tuple[str | None, bool]] = {}
    parents: list[str] = []
    for line in block.splitlines():
        row = _ROW.match(line)
        assert row, f"not a row of the tree: {line!r}"
        depth = len(row["branch"]) // 4 + (0 if line.strip().startswith(row["name"]) else 1)
        del parents[depth:]
        assert row["name"] not in drawn, f"{row['name']} is drawn twice"
        drawn[row["name"]] = (parents[-1] if parents else None, "(retryable" in row["rest"])
        parents.append(row["name"])
    return drawn


def _classes() -> dict[str, tuple[str | None, bool]]:
    found: dict[str, tuple[str | None, bool]] = {}
    for name in errors.__all__:
        value = getattr(errors, name)
        if inspect.isclass(value) and issubclass(value, OrgaError):
            parent = value.__mro__[1].__name__ if value is not OrgaError else None
            found[name] = (parent, bool(value.retryable))
    return found


def test_the_drawn_tree_is_the_tree_of_the_classes() -> None:
    drawn, classes = _drawn(), _classes()
    assert sorted(drawn) == sorted(classes), (
        f"drawn but not a class: {sorted(set(drawn) - set(classes))}; "
        f"a class not drawn: {sorted(set(classes) - set(drawn))}"
    )
    for name, (parent, retryable) in classes.items():
        assert drawn[name][0] == parent, f"{name} is drawn under {drawn[name][0]}, not {parent}"
        assert drawn[name][1] == retryable, (
            f"{name} is {'' if retryable else 'not '}retryable, and the drawing says otherwise"
        )


def test_every_error_is_exported() -> None:
    defined = {
        name
        for name, value in vars(errors).items()
        if inspect.isclass(value) and issubclass(value, OrgaError)
    }
    assert defined <= set(errors.__all__)

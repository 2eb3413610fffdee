"""The house in numbers: the package graph, module sizes, long functions.

    uv run python -m tests.house_metrics [ROOT]

Prints the edges between orga's rooms (``orga.cli`` → ``orga.runtime`` …, a module's
first-party imports, counted once per pair of rooms), the cycles among them, the median, 90th
percentile and largest module size in lines, and the functions longer than 80 lines. ROOT
(default: this checkout) lets the same script measure another checkout, e.g. an older commit
in a ``git worktree``.
"""

from __future__ import annotations

import ast
import statistics
import sys
from pathlib import Path

from tests.helpers._source import parse_python

LONG_FUNCTION = 80


def room(module: str) -> str:
    """The room a module lives in: ``orga.cli.loops`` → ``orga.cli``; ``orga.client`` stays."""
    parts = module.split(".")
    return ".".join(parts[:2])


def modules(root: Path) -> dict[str, Path]:
    found: dict[str, Path] = {}
    for path in sorted((root / "orga").rglob("*.py")):
        relative = path.relative_to(root).with_suffix("")
        name = ".".join(relative.parts)
        found[name.removesuffix(".__init__")] = path
    return found


def edges(found: dict[str, Path]) -> set[tuple[str, str]]:
    pairs: set[tuple[str, str]] = set()
    for name, path in found.items():
        tree = parse_python(path)
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module]
            for target in targets:
                if target.startswith("orga.") or target == "orga":
                    a, b = room(name), room(target)
                    if a != b and b != "orga":
                        pairs.add((a, b))
    return pairs


def cycles(pairs: set[tuple[str, str]]) -> list[list[str]]:
    """The strongly connected groups of more than one room (Tarjan)."""
    graph: dict[str, set[str]] = {}
    for a, b in pairs:
        graph.setdefault(a, set()).add(b)
        graph.setdefault(b, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on.add(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group: list[str] = []
            while True:
                top = stack.pop()
                on.discard(top)
                group.append(top)
                if top == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return groups


def long_functions(found: dict[str, Path]) -> list[tuple[int, str]]:
    long: list[tuple[int, str]] = []
    for name, path in found.items():
        for node in ast.walk(parse_python(path)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > LONG_FUNCTION:
                    long.append((length, f"{name}:{node.name}"))
    return sorted(long, reverse=True)


def main(root: Path) -> None:
    found = modules(root)
    sizes = sorted(len(p.read_text().splitlines()) for p in found.values())
    pairs = edges(found)
    print(f"modules {len(sizes)}, lines {sum(sizes)}")
    print(
        f"module size: median {statistics.median(sizes):.0f}, "
        f"p90 {sizes[int(len(sizes) * 0.9)]}, max {sizes[-1]}"
    )
    over = [(len(p.read_text().splitlines()), n) for n, p in found.items()]
    print("modules over 500 lines:", sorted((s, n) for s, n in over if s > 500) or "none")
    print(f"room edges {len(pairs)}; cycles {cycles(pairs) or 'none'}")
    long = long_functions(found)
    print(f"functions over {LONG_FUNCTION} lines: {len(long)}")
    for length, where in long:
        print(f"  {length:4} {where}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent)

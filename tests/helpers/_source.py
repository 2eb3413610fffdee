"""Python source read as a syntax tree, safe from CPython 3.11's thread-unsafe AST builder.

CPython 3.11 (before 3.12) counts the AST constructor's recursion in state that threads share:
``ast.parse`` in a test now and then raises ``SystemError: AST constructor recursion depth
mismatch`` while another thread of the process (a Temporal worker's sandbox importing modules)
builds a tree at the same moment (python/cpython#106905; seen once in a full run). The tree is
the same on the next try, so a parse that meets this error is made again — never any other
error, and never more than a few times.
"""

from __future__ import annotations

import ast
from pathlib import Path

__all__ = ["parse_python"]

_TRIES = 5


def parse_python(source: str | Path, filename: str = "<unknown>") -> ast.Module:
    """``ast.parse`` of ``source`` (a path is read as UTF-8 text)."""
    if isinstance(source, Path):
        filename, source = str(source), source.read_text(encoding="utf-8")
    for tried in range(1, _TRIES + 1):
        try:
            return ast.parse(source, filename)
        except SystemError as error:  # only CPython's own miscount, and only a few times
            if "recursion depth mismatch" not in str(error) or tried == _TRIES:
                raise
    raise AssertionError("unreachable")

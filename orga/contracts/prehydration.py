"""``config.pre_hydration``: which references a loop resolves before its first model call.

References are URLs, file paths, issue and PR references and custom patterns found in the
task's text (``orga.core.prehydration`` extracts them); each reference type maps to the tool
that resolves it, and every resolution is a tool call through the gate.

Custom patterns come from whoever starts the loop, and workflow code matches them against the
task: they are compiled with RE2 (``google-re2``), whose matching time grows linearly with the
text, never with Python's backtracking ``re``, where a pattern such as ``(a+)+$`` would hold
the worker's interpreter for hours. RE2 has no lookarounds or backreferences; a pattern using
them is refused when the input is validated (``InvalidConfig`` before the loop starts).
"""

from __future__ import annotations

from functools import lru_cache

import re2
from pydantic import ConfigDict, Field, field_validator

from orga.contracts.wire import Contract

__all__ = [
    "MAX_PATTERNS",
    "MAX_PATTERN_CHARS",
    "PreHydrationConfig",
    "ReferencePattern",
    "Resolver",
    "compile_pattern",
]

MAX_PATTERN_CHARS = 256
"""Characters of one custom pattern."""
MAX_PATTERNS = 10
"""Custom patterns of one loop."""


@lru_cache(maxsize=256)
def compile_pattern(pattern: str) -> re2._Regexp:  # pyright: ignore[reportPrivateUsage] (RE2's type has no public name)
    """``pattern`` compiled by RE2 (linear-time matching), cached.

    Raises:
        ValueError: RE2 cannot compile it (invalid, or a lookaround or backreference).
    """
    options = re2.Options()
    options.log_errors = False  # the refusal is ours to report, not absl's on stderr
    try:
        return re2.compile(pattern, options)
    except re2.error as error:
        reason: object = error.args[0] if error.args else error
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        raise ValueError(
            f"pattern {pattern!r} is not a regex RE2 can run in linear time ({reason}): "
            "lookarounds and backreferences are not supported; rewrite it without them"
        ) from error


class ReferencePattern(Contract):
    """A custom reference type: an RE2 regex whose first group (or whole match) is the value."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    ref_type: str = Field(min_length=1, max_length=64)
    """The reference type it finds: a key of ``resolvers``."""
    pattern: str = Field(min_length=1, max_length=MAX_PATTERN_CHARS)
    """RE2 syntax (Python's ``re`` without lookarounds and backreferences), at most 256
    characters."""

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, pattern: str) -> str:
        compile_pattern(pattern)
        return pattern


class Resolver(Contract):
    """Which tool resolves a reference type, and which argument takes the reference."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tool: str
    """The tool called with each reference (gated like any call; one the loop's model sees)."""
    argument: str
    """The tool's argument that takes the reference."""


class PreHydrationConfig(Contract):
    """``config.pre_hydration``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    patterns: list[ReferencePattern] = Field(
        default_factory=list[ReferencePattern], max_length=MAX_PATTERNS
    )
    """Custom reference types, extracted after the built-in ones (at most 10)."""
    max_references: int = Field(default=10, ge=1, le=100)
    """At most this many references are resolved (deduplicated, in the order found)."""
    resolvers: dict[str, Resolver] = Field(
        default_factory=lambda: {
            "url": Resolver(tool="web_fetch", argument="url"),
            "file": Resolver(tool="file_read", argument="path"),
        }
    )
    """Reference type → tool. Types without a resolver are found but not resolved."""
    max_context_tokens: int = Field(default=4_000, ge=100)
    """The injected context is cut to this many tokens (about four UTF-8 bytes each)."""
